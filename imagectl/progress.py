"""Progress of long work: push byte counts, a heartbeat for silent steps, pip's downloads, the line displays.

- :class:`PushProgress` turns the engine's push events into "pushed X of Y" lines, at most one every few
  seconds, from the bytes the engine reports per layer.
- :class:`Heartbeat` prints a line when a step has been silent for a while (a layer commit, a long pip
  step), with the elapsed time, the step it is in and, given a :class:`PipLog`, what pip is doing.
- :class:`PipLog` follows pip in a build log (pip is the image's own, often 22 or 23, so it cannot be asked
  for a raw progress bar: the log is read instead).  It knows pip's current activity, ``downloading FILE
  (SIZE)``, ``installing N packages`` or ``committing the layer`` (the silence after ``Successfully
  installed`` until the engine's next line), and records each downloaded wheel as a :class:`PipDownload`
  (name, version, bytes as pip printed them, seconds from its ``Downloading`` line to the next line).  At
  each ``Successfully installed`` it gives one summary line (:func:`pip_summary`)::

      pip: 12 packages, 1.9 GB downloaded in 25 s, installed in 30 s: nvidia-cudnn-cu12 731.7 MB 8 s, ... +7 smaller

  The packages are the installed ones; "downloaded in" runs from the step's first ``Collecting`` to
  ``Installing collected packages``, "installed in" from there to ``Successfully installed``.  At most the 5
  largest downloads are listed (fewer where the line would pass 240 characters), then how many more;
  a download pip gave no size for is listed without one and makes the total "at least X"; a step that
  downloaded nothing (local files, pip's cache) says "nothing downloaded".  An unknown line is ignored, and
  so is any line the parser fails on: it never raises into a build.
- :func:`plain_sink` writes timestamped lines, never ``\\r`` (CI logs); :class:`LiveDisplay` redraws one
  line per running profile on a terminal.

Everything takes its clock and output as arguments, so it is tested without sleeping or a terminal.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .lock.lockfile import canonical_name

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
        self._emit(f"push: {human_bytes(uploaded)} uploaded in {_count(len(self._layers), 'layer')}, "
                   f"{_count(kept, 'layer')} the registry already had")


_SIZE_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4,
                  "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")
_DOWNLOADING_RE = re.compile(r"^\s*Downloading (\S+)(?: \(([^()]*)\))?\s*$")
_COLLECTING_RE = re.compile(r"^\s*Collecting ([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:===?\s*([^\s;,()]+))?")
_BAR_RE = re.compile(r"^\s*[^\w\s]+.*?(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)\s*[A-Za-z]+")
_INSTALLING = "Installing collected packages:"
_INSTALLED = "Successfully installed"
SUMMARY_LISTED = 5  # downloads named in a summary line, the largest
SUMMARY_WIDTH = 240  # ... fewer where the line would be longer
_FILE_WIDTH = 70  # of a file name in a heartbeat line


def _count(count: int, noun: str) -> str:
    """``1 layer``, ``2 layers``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _packages(count: int) -> str:
    return _count(count, "package")


def parse_pip_size(text: str) -> int | None:
    """Bytes of a size as pip prints it (``823 kB``, ``410.6 MB``, ``1.2 GB``, ``512 bytes``: decimal units;
    ``MiB`` and the like binary), or None for anything else."""
    match = _SIZE_RE.match(text)
    factor = _SIZE_UNITS.get(match[2].lower()) if match else None
    return round(float(match[1]) * factor) if match and factor else None


def wheel_name_version(filename: str) -> tuple[str, str] | None:
    """``(name, version)`` of a wheel file name (PEP 427: ``{name}-{version}(-{build})?-{py}-{abi}-{plat}.whl``,
    the name made canonical), or None when ``filename`` is no wheel's."""
    parts = filename[:-4].split("-") if filename.endswith(".whl") else []
    if len(parts) not in (5, 6) or not parts[0] or not parts[1]:
        return None
    return canonical_name(parts[0]), parts[1]


def _file_of(target: str) -> str:
    """The file name in pip's ``Downloading`` target: a URL (its last path segment) or a bare file name."""
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(target).path.rstrip("/").rsplit("/", 1)[-1]) or target


@dataclass(frozen=True)
class PipDownload:
    """One wheel pip downloaded: ``bytes`` as pip printed its size (pip rounds: 0.1 MB, 1 kB), None when it
    printed none; ``seconds`` from its ``Downloading`` line to the next line."""

    name: str
    version: str
    bytes: int | None
    seconds: float


def pip_summary(installed: int, downloads: Sequence[PipDownload], download_seconds: float,
                install_seconds: float | None) -> str:
    """The line that ends a pip step (see the module's docstring for its wording)."""
    head = f"pip: {_packages(installed)}, "
    if downloads:
        total = sum(d.bytes or 0 for d in downloads)
        least = "at least " if any(d.bytes is None for d in downloads) else ""
        head += f"{least}{human_bytes(total)} downloaded in {download_seconds:.0f} s"
    else:
        head += "nothing downloaded"
    if install_seconds is not None:
        head += f", installed in {install_seconds:.0f} s"
    return head + _listed(downloads, len(head))


def _listed(downloads: Sequence[PipDownload], width: int) -> str:
    """``: NAME SIZE N s, ... +K smaller``: the largest downloads that fit."""
    ranked = sorted(downloads, key=lambda d: (d.bytes if d.bytes is not None else -1, d.seconds), reverse=True)
    entries = [" ".join([d.name, *([human_bytes(d.bytes)] if d.bytes is not None else []), f"{d.seconds:.0f} s"])
               for d in ranked]
    shown: list[str] = []
    for entry in entries[:SUMMARY_LISTED]:
        if shown and width + len(": " + ", ".join([*shown, entry])) + len(" +999 smaller") > SUMMARY_WIDTH:
            break
        shown.append(entry)
    if not shown:
        return ""
    more = f" +{len(entries) - len(shown)} smaller" if len(entries) > len(shown) else ""
    return ": " + ", ".join(shown) + more


@dataclass
class _Open:
    """The download pip is on: what it will be recorded as, since when, its heartbeat text."""

    name: str
    version: str
    size: int | None
    started: float
    text: str


class PipLog:
    """Follows pip through a build log, one line at a time (:meth:`feed`), a ``Step N/M`` line starting over:
    what pip is doing now (:meth:`activity`), the wheels it downloaded (:attr:`downloads`, the whole build's)
    and, at each ``Successfully installed``, the summary line of the step.  Not thread-safe (the caller
    locks)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.downloads: list[PipDownload] = []
        self._reset()

    def _reset(self) -> None:
        self._step: list[PipDownload] = []
        self._open: _Open | None = None
        self._collecting: float | None = None  # the step's first Collecting
        self._wanted: tuple[str, str] | None = None  # name and version of the last Collecting
        self._installing: tuple[int, float] | None = None  # packages and since when
        self._committing = False

    def feed(self, line: str) -> str | None:
        """Take one log line; return the summary line when it ends a pip step.  Never raises."""
        try:
            return self._feed(line.rstrip(), self._clock())
        except Exception:  # a line the parser did not foresee must not break a build
            return None

    def activity(self) -> str | None:
        """What pip is doing now (``downloading FILE (SIZE)``, ``installing N packages``, ``committing the
        layer``), or None when nothing pip is known to be going on."""
        if self._open is not None:
            return self._open.text
        if self._committing:
            return "committing the layer"
        return f"installing {_packages(self._installing[0])}" if self._installing else None

    def _feed(self, line: str, now: float) -> str | None:
        if self._open is not None and not _bar_in_progress(line):
            self._close(now)
        if _STEP_RE.match(line):
            self._reset()
        elif line.startswith(" ---> ") or line.startswith("Removing intermediate container"):
            self._committing = False  # the engine's own lines: the step's layer is committed
        elif line.lstrip().startswith(_INSTALLED):
            return self._installed(line, now)
        elif line.lstrip().startswith(_INSTALLING):
            names = [n for n in line.split(":", 1)[1].split(",") if n.strip()]
            self._installing = (len(names), now)
        elif match := _COLLECTING_RE.match(line):
            self._collecting = now if self._collecting is None else self._collecting
            self._wanted = (canonical_name(match[1]), match[2] or "")
        elif match := _DOWNLOADING_RE.match(line):
            self._downloading(match[1], match[2], now)
        return None

    def _downloading(self, target: str, size_text: str | None, now: float) -> None:
        filename = _file_of(target)
        if filename.endswith(".metadata"):
            return  # PEP 658 metadata, not the package
        name, version = wheel_name_version(filename) or self._wanted or (filename, "")
        shown = filename if len(filename) <= _FILE_WIDTH else filename[: _FILE_WIDTH - 3] + "..."
        text = f"downloading {shown}" + (f" ({size_text})" if size_text else "")
        self._collecting = now if self._collecting is None else self._collecting
        self._open = _Open(name, version, parse_pip_size(size_text or ""), now, text)

    def _close(self, now: float) -> None:
        done, self._open = self._open, None
        if done is not None:
            download = PipDownload(done.name, done.version, done.size, round(now - done.started, 1))
            self._step.append(download)
            self.downloads.append(download)

    def _installed(self, line: str, now: float) -> str:
        names = line.split(_INSTALLED, 1)[1].split()
        since = self._installing[1] if self._installing else None
        collected = (since if since is not None else now) - self._collecting if self._collecting is not None else 0.0
        summary = pip_summary(len(names) or len(self._step), self._step, collected,
                              None if since is None else now - since)
        self._installing, self._committing = None, True
        return summary


def _bar_in_progress(line: str) -> bool:
    """A progress bar line short of its total (``━━━ 200.1/410.6 MB``): the download goes on."""
    match = _BAR_RE.match(line)
    return bool(match) and float(match[1]) < float(match[2])


class Heartbeat:
    """A context manager that wraps a line sink (``heartbeat.sink``): while the block runs, a line is emitted
    whenever nothing was printed for ``every`` seconds, with the step the engine last named (``Step N/M``)
    and the elapsed time.  Given a :class:`PipLog`, every line feeds it, its summary lines follow the line
    that ended a pip step, and the heartbeat names pip's activity instead of the step's command::

        still building step 10/21: installing 12 packages (15 s without output, 01:35 elapsed)

    The thread is a daemon and stops when the block ends."""

    def __init__(self, sink: LineSink, what: str, every: float = 15.0, clock: Clock = time.monotonic,
                 pip: PipLog | None = None) -> None:
        self._out, self._what, self._every, self._clock, self._pip = sink, what, every, clock, pip
        self._started = self._last = clock()
        self._step = self._command = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def sink(self, line: str) -> None:
        """Pass ``line`` on and note the time (and the step, for a ``Step N/M : ...`` line); then pip's summary
        line, when ``line`` ended a pip step."""
        match = _STEP_RE.match(line)
        with self._lock:
            self._last = self._clock()
            if match:
                self._step, self._command = f"step {match[1]}/{match[2]}", match[3][:60]
            summary = self._pip.feed(line) if self._pip is not None else None
        self._out(line)
        if summary:
            self._out(summary)

    def beat(self) -> str | None:
        """The heartbeat line due now, or None (the thread calls this; tests call it directly)."""
        with self._lock:
            now = self._clock()
            silent = now - self._last
            if silent < self._every:
                return None
            self._last = now
            doing = self._pip.activity() if self._pip is not None else None
            where = ": ".join(part for part in (self._step, doing or self._command) if part)
        where = f" {where}" if self._step else f": {where}" if where else ""
        return f"still {self._what}{where} ({silent:.0f} s without output, {clock_text(now - self._started)} elapsed)"

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
