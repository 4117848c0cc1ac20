"""A stand-in package index whose wheel files come slowly, as over a poor network: the index of
:func:`tests.integration.support.wheels.start_simple_index` (pages, ``.metadata``, hashes: a lock is made from it
as fast as ever), except that the body of every ``/files/<wheel>`` answer is sent ``chunk`` bytes at a time with
``pause_s`` seconds after each, while :attr:`SlowIndex.slow` is set.  It counts the wheel bytes it sent, and which
wheels went out whole (:meth:`~tests.integration.support.wheels.IndexServer.full_downloads`: a transfer the client
cut short does not count).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.support.wheels import (IndexServer, _IndexState, _QuietIndexServer, _SimpleIndexHandler,
                                              normalize_name)


@dataclass
class SlowIndex:
    """The running index: ``server`` (its ``url``, ``full_downloads()``, ``requests()``), whether wheels come slowly
    now, and the wheel bytes sent so far."""

    server: IndexServer
    chunk: int
    pause_s: float
    slow: threading.Event = field(default_factory=threading.Event)
    sent: int = 0
    guard: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return self.server.url

    def wheel_requests(self) -> list[str]:
        """The wheel files asked for (GET), in order."""
        return [r.path.rsplit("/", 1)[-1] for r in self.server.requests()
                if r.method == "GET" and r.path.startswith("/files/") and r.path.endswith(".whl")]

    def count(self, size: int) -> None:
        with self.guard:
            self.sent += size


class _Throttled:
    """The handler's ``wfile``: a wheel's body goes out in pieces with a pause after each, while the index is slow."""

    def __init__(self, handler: _SimpleIndexHandler, out: Any, index: SlowIndex) -> None:
        self._handler, self._out, self._index = handler, out, index

    def write(self, data: bytes) -> int:
        path = getattr(self._handler, "path", "")
        if not (self._index.slow.is_set() and path.startswith("/files/") and path.endswith(".whl")):
            return self._out.write(data)
        for start in range(0, len(data), self._index.chunk):
            piece = data[start:start + self._index.chunk]
            self._out.write(piece)
            self._out.flush()
            self._index.count(len(piece))
            time.sleep(self._index.pause_s)
        return len(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


@contextmanager
def slow_index(wheel_dir: Path, *, chunk: int = 256, pause_s: float = 1.0) -> Iterator[SlowIndex]:
    """Serve ``wheel_dir`` as :func:`~tests.integration.support.wheels.start_simple_index` does, wheel bodies
    ``chunk`` bytes per ``pause_s`` seconds once ``slow`` is set (it is set at the start), for the block."""
    state = _IndexState((Path(wheel_dir),))
    holder: dict[str, SlowIndex] = {}

    class Handler(_SimpleIndexHandler):
        def setup(self) -> None:
            super().setup()
            self.wfile = _Throttled(self, self.wfile, holder["index"])  # type: ignore[assignment]

    handler = type("SlowIndexHandler", (Handler,), {"state": state})
    server = _QuietIndexServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="slow-index", daemon=True)
    thread.start()
    index = SlowIndex(IndexServer(f"http://127.0.0.1:{server.server_address[1]}/simple", state, server, thread),
                      chunk, pause_s)
    holder["index"] = index
    index.slow.set()
    try:
        yield index
    finally:
        index.slow.clear()  # a handler still sending finishes at once
        index.server.stop()


__all__ = ["SlowIndex", "normalize_name", "slow_index"]
