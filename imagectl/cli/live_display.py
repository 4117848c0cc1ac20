"""How ``build`` draws its progress lines: :func:`plain_sink` writes timestamped lines, never ``\\r`` (CI logs);
:class:`LiveDisplay` redraws one line per running profile on a terminal.

Both take their clock and stream as arguments, so they are tested without sleeping or a terminal.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

from ..progress import Clock, LineSink
from ..progress.units import clock_text


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
