"""One stop signal for a long operation and every thread working for it.

A build runs on several threads at once: the engine's build of the system image, the wheel downloads, the layer
writers, the staging of layers into the engine's store, the upload of their blobs.  When one of them fails, or the
user presses Ctrl-C, the rest must stop within seconds and leave nothing behind, instead of finishing gigabytes of
work nobody will use.  So the operation makes one :class:`Stop` and hands it to every worker:

- the first failure :meth:`~Stop.set`\\ s it, with its exception (:attr:`Stop.error`: what the operation reports);
- a worker checks it between small steps (a chunk of a download, a member of a layer, a layer staged):
  :meth:`~Stop.check` raises :class:`Stopped`, which is never the error reported when a real one is known;
- a worker blocked where no check can run (a socket read, a child process) registers a :meth:`~Stop.hook` that
  unblocks it (shuts the socket down, ends the process) the moment the stop is set.

Signals: Python raises KeyboardInterrupt in the main thread on SIGINT; :func:`signals_as_interrupts` makes SIGTERM
do the same (as :class:`Interrupted`), so both take the one path that sets the stop and cleans up.  The CLI exits
130 after SIGINT and 143 after SIGTERM (128 + the signal's number, as a shell reports a process a signal ended).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from .errors import OperationError


class Stopped(OperationError):
    """Work given up because its operation's stop was set (after another part failed, or an interrupt)."""


class Interrupted(KeyboardInterrupt):
    """The process was asked to end by a signal (SIGINT or SIGTERM): raised in the main thread."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal's number: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


class Stop:
    """A stop signal: set once (the first :meth:`set` wins), read by any thread."""

    def __init__(self) -> None:
        self._event, self._lock = threading.Event(), threading.Lock()
        self._hooks: dict[int, Callable[[], object]] = {}
        self._next = 0
        self.error: BaseException | None = None  # what set it: the operation's failure (None: set without one)

    def set(self, error: BaseException | None = None) -> bool:
        """Stop the operation, for ``error`` (the first failure); runs the hooks registered now.  Whether this call
        set it (False: it was set already, and ``error`` is not kept)."""
        with self._lock:  # held while the hooks run: a hook never runs once its block has ended
            if self._event.is_set():
                return False
            self.error = error
            self._event.set()
            for hook in self._hooks.values():
                with contextlib.suppress(Exception):  # a hook that fails (a socket already closed) stops nothing else
                    hook()
        return True

    def is_set(self) -> bool:
        """Whether the operation is stopping."""
        return self._event.is_set()

    def check(self) -> None:
        """Nothing while the operation goes on; raises Stopped once it is stopping."""
        if self._event.is_set():
            raise Stopped(f"stopped: {self.error or 'interrupted'}")

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds``, or less when the stop is set meanwhile; whether it is set."""
        return self._event.wait(seconds)

    @contextlib.contextmanager
    def hook(self, action: Callable[[], object]) -> Iterator[None]:
        """Run ``action`` (it must not block, nor use this stop) when the stop is set while the block runs, at once
        if it is set already, never after the block; for a worker blocked where it cannot check (a socket read, a
        child process)."""
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._hooks[key] = action
            if self._event.is_set():
                with contextlib.suppress(Exception):
                    action()
        try:
            yield
        finally:
            with self._lock:
                self._hooks.pop(key, None)


def first_error(stop: Stop, raised: BaseException) -> BaseException:
    """The error an operation reports: what set ``stop`` (the first failure) unless that is missing, else
    ``raised`` (a worker's Stopped never hides the failure that caused it)."""
    return stop.error if stop.error is not None and isinstance(raised, Stopped) else raised


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """While the block runs in the main thread, SIGTERM raises :class:`Interrupted` there as SIGINT raises
    KeyboardInterrupt (and SIGINT an :class:`Interrupted` too); the handlers before are put back after.  Elsewhere
    (another thread) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, before in saved.items():
        if before in (signal.default_int_handler, signal.SIG_DFL):  # never one a caller (a test runner) installed
            signal.signal(signum, interrupt)
    try:
        yield
    finally:
        for signum, before in saved.items():
            if before is not None:
                signal.signal(signum, before)
