"""A heartbeat for silent steps: a line when a build step has printed nothing for a while (a layer commit, a long
pip step), with the elapsed time, the step it is in and, given a :class:`.piplog.PipLog`, what pip is doing.

It takes its clock and output as arguments, so it is tested without sleeping.
"""

from __future__ import annotations

import threading
import time

from . import Clock, LineSink
from .piplog import STEP_RE, PipLog
from .units import clock_text


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
        match = STEP_RE.match(line)
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
