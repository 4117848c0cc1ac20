"""Progress of long work: push byte counts, a heartbeat for silent steps, and the line displays.

- :class:`PushProgress` turns the engine's push events into "pushed X of Y" lines, at most one every few
  seconds, from the bytes the engine reports per layer.
- :class:`Heartbeat` prints a line when a step has been silent for a while (a layer commit, a long pip
  step), with the elapsed time and the step it is in.
- :func:`plain_sink` writes timestamped lines, never ``\\r`` (CI logs); :class:`LiveDisplay` redraws one
  line per running profile on a terminal.

Everything takes its clock and output as arguments, so it is tested without sleeping or a terminal.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

LineSink = Callable[[str], None]
Clock = Callable[[], float]
_STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
DONE_STATUSES = ("Pushed", "Layer already exists", "Mounted from")


def human_bytes(count: float) -> str:
    """``1.2 GB`` (decimal units, as the engine prints them)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"  # pragma: no cover


def clock_text(seconds: float) -> str:
    """``01:23`` or ``1:02:03``: an elapsed time."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


class PushProgress:
    """Per-image push progress from the engine's events (``{"status", "id", "progressDetail": {"current",
    "total"}}``); ``event`` emits "push: X of Y (N of M layers done)" at most every ``every`` seconds, and
    ``finish`` the last line."""

    def __init__(self, emit: LineSink, every: float = 5.0, clock: Clock = time.monotonic) -> None:
        self._emit, self._every, self._clock = emit, every, clock
        self._layers: dict[str, tuple[int, int]] = {}  # id -> (bytes done, total)
        self._done: set[str] = set()
        self._seen: set[str] = set()
        self._last = clock()

    def event(self, chunk: Mapping[str, Any]) -> None:
        """Take one push event (others are ignored)."""
        layer, status = chunk.get("id"), str(chunk.get("status") or "")
        if not layer or not isinstance(layer, str):
            return
        self._seen.add(layer)
        detail = chunk.get("progressDetail") or {}
        if status == "Pushing" and isinstance(detail, Mapping) and detail.get("total"):
            self._layers[layer] = (int(detail.get("current") or 0), int(detail["total"]))
        elif status.startswith(DONE_STATUSES):
            self._done.add(layer)
            if layer in self._layers:
                total = self._layers[layer][1]
                self._layers[layer] = (total, total)
        if self._clock() - self._last >= self._every:
            self._emit(self.line())
            self._last = self._clock()

    def line(self) -> str:
        """The progress now, as one line."""
        done = sum(current for current, _ in self._layers.values())
        total = sum(total for _, total in self._layers.values())
        layers = f"{len(self._done)} of {len(self._seen)} layers done"
        if not total:
            return f"push: {layers}"
        return f"push: {human_bytes(done)} of {human_bytes(total)} uploading ({layers})"

    def finish(self) -> None:
        """Emit the final line (what was uploaded, what the registry already had)."""
        uploaded = sum(total for _, total in self._layers.values())
        kept = len(self._done - set(self._layers))
        self._emit(f"push: {human_bytes(uploaded)} uploaded in {len(self._layers)} layers, {kept} layers the "
                   "registry already had")


class Heartbeat:
    """A context manager that wraps a line sink (``heartbeat.sink``): while the block runs, a line is emitted
    whenever nothing was printed for ``every`` seconds, with the step the engine last named (``Step N/M``)
    and the elapsed time.  The thread is a daemon and stops when the block ends."""

    def __init__(self, sink: LineSink, what: str, every: float = 15.0, clock: Clock = time.monotonic) -> None:
        self._out, self._what, self._every, self._clock = sink, what, every, clock
        self._started = self._last = clock()
        self._step = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def sink(self, line: str) -> None:
        """Pass ``line`` on and note the time (and the step, for a ``Step N/M : ...`` line)."""
        match = _STEP_RE.match(line)
        with self._lock:
            self._last = self._clock()
            if match:
                self._step = f"step {match[1]}/{match[2]}: {match[3][:60]}"
        self._out(line)

    def beat(self) -> str | None:
        """The heartbeat line due now, or None (the thread calls this; tests call it directly)."""
        with self._lock:
            now = self._clock()
            silent = now - self._last
            if silent < self._every:
                return None
            self._last = now
            step = f" {self._step}" if self._step else ""
        return f"still {self._what}{step} ({silent:.0f} s without output, {clock_text(now - self._started)} elapsed)"

    def _run(self) -> None:
        while not self._stop.wait(min(self._every, 5.0)):
            line = self.beat()
            if line:
                self._out(line)

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self._what}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)


def plain_sink(stream: TextIO, prefix: str = "", clock: Clock = time.monotonic,
               started: float | None = None) -> LineSink:
    """Lines as ``[mm:ss] PREFIX line`` (elapsed since ``started``), one per write, never ``\\r``; thread-safe."""
    lock = threading.Lock()
    start = clock() if started is None else started

    def sink(line: str) -> None:
        text = line.replace("\r", " ").rstrip()
        with lock:
            stream.write(f"[{clock_text(clock() - start)}] {prefix}{text}\n")
            stream.flush()

    return sink


class LiveDisplay:
    """One line per running profile on a terminal, redrawn in place (ANSI: cursor up, erase line); lines are
    cut to ``width``.  ``sink(name)`` gives the line sink of one profile; ``close()`` leaves the last state."""

    def __init__(self, stream: TextIO, width: int = 100, clock: Clock = time.monotonic) -> None:
        self._stream, self._width, self._clock = stream, max(20, width), clock
        self._rows: dict[str, str] = {}
        self._started: dict[str, float] = {}
        self._drawn = 0
        self._lock = threading.Lock()

    def sink(self, name: str) -> LineSink:
        """The line sink of profile ``name`` (its row shows its latest line and elapsed time)."""
        with self._lock:
            self._rows.setdefault(name, "waiting")
            self._started.setdefault(name, self._clock())

        def update(line: str) -> None:
            with self._lock:
                self._rows[name] = line.replace("\r", " ").strip()
                self._draw()

        return update

    def _draw(self) -> None:
        out: list[str] = []
        if self._drawn:
            out.append(f"\x1b[{self._drawn}F")  # to the start of the first row drawn
        for name, line in self._rows.items():
            elapsed = clock_text(self._clock() - self._started[name])
            text = f"{name} [{elapsed}] {line}"
            out.append("\x1b[2K" + text[: self._width] + "\n")
        self._drawn = len(self._rows)
        self._stream.write("".join(out))
        self._stream.flush()

    def close(self) -> None:
        """Draw the final state once more."""
        with self._lock:
            if self._rows:
                self._draw()
