"""What one build reports as it goes: its log lines and the seconds each phase took (resolve, lock, render, lookup,
build, check, tag, push); and its stop signal, which whoever runs the build sets to end it (an interrupt)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from collections.abc import Iterator
from contextlib import contextmanager

from ..engine import LineSink
from ..stop import Stop


def _discard(line: str) -> None:
    """A log sink that shows nothing (``build --plan``)."""


class Trace:
    """The log of one build and the record of its phase durations, filled as it goes (kept for a build that fails
    half way).  A trace made with ``hold`` keeps its lines until :meth:`release`: a build whose extras may still be
    refused shows nothing before the refusal (bad input is one line).  ``stop``: the build's stop signal
    (:mod:`imagectl.stop`): its first failure sets it, and so does whoever runs the build when it must end (Ctrl-C in
    the main thread while the build runs in another); the build's long work ends on it."""

    def __init__(self, sink: LineSink = _discard, *, hold: bool = False) -> None:
        self.stop = Stop()
        self.seconds: dict[str, float] = {}
        self.started = datetime.now(timezone.utc)  # when the build began (its provenance's startedOn)
        self._sink = sink
        self._held: list[str] | None = [] if hold else None

    def log(self, line: str) -> None:
        """Show ``line`` (or keep it, while held)."""
        if self._held is None:
            self._sink(line)
        else:
            self._held.append(line)

    def release(self) -> None:
        """Show the lines kept so far, then every line as it comes."""
        held, self._held = self._held or [], None
        for line in held:
            self._sink(line)

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Add the seconds the block takes to phase ``name`` (also when it raises)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.monotonic() - started, 3)
