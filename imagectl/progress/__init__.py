"""Progress of long work, one module each: :mod:`.push` (push byte counts from the engine's events),
:mod:`.piplog` (pip followed through a build log: its activity, its downloads, a summary line per pip step),
:mod:`.heartbeat` (a line when a step is silent) and :mod:`.units` (bytes and elapsed time as they print).
Nothing here writes to a terminal: the CLI's displays (:mod:`imagectl.cli.live_display`) do.
"""

from __future__ import annotations

from collections.abc import Callable

LineSink = Callable[[str], None]
Clock = Callable[[], float]  # seconds, monotonic: time.monotonic, or a test's fake
