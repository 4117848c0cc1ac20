"""The deadline of one registry request: everything it takes must be done within ``seconds``.

A request to a registry (``GET manifest team/torch:2.3``) gets the ``[registry] timeout`` for all of it:
connecting, answering a 401 (the token request too), every retry and the waits between them, following
redirects, and reading the answer's body.  Each socket wait is cut to the time left (see :mod:`.body`), so
neither a registry that accepts and never answers nor one that sends a byte a second holds a command longer.

Blob transfers, whose size has no bound, get time in proportion to their size instead (see
:func:`transfer_seconds` and :class:`~.client.BlobReader`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from ..errors import OperationError
from .error_factory import timeout_error, too_large_error

Clock = Callable[[], float]

PROGRESS_BYTES = 1024 * 1024  # a blob transfer earns one more timeout per MiB


@dataclass(frozen=True)
class Deadline:
    """The moment ``at`` (on ``clock``) by which request ``what`` to ``registry`` must be done.

    ``seconds`` is the budget it was given, for messages; ``math.inf`` means no deadline.
    """

    registry: str
    what: str
    seconds: float
    at: float
    clock: Clock = field(default=time.monotonic, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, registry: str, what: str, clock: Clock = time.monotonic) -> Deadline:
        """A deadline ``seconds`` from now; never raises."""
        return cls(registry, what, seconds, clock() + seconds, clock)

    def remaining(self) -> float:
        """Seconds left (0 once passed, ``math.inf`` for no deadline); never raises."""
        return max(0.0, self.at - self.clock())

    def error(self, detail: str) -> OperationError:
        """The one-line error for this request running out of time; ``detail`` says what it was waiting for.

        A RegistryError naming the ``[registry] timeout`` here; the package-index reader's deadline names its own
        setting (:class:`imagectl.pypi.transport.IndexDeadline`)."""
        return timeout_error(self.registry, self.what, self.seconds, detail)

    def too_large(self, limit: int) -> OperationError:
        """The one-line error for an answer to this request whose body is over ``limit`` bytes."""
        return too_large_error(self.registry, self.what, limit)

    def left(self, detail: str) -> float:
        """Seconds left; raises this deadline's :meth:`error` (with ``detail``) when none are."""
        remaining = self.remaining()
        if remaining <= 0:
            raise self.error(detail)
        return remaining

    def sleeper(self, sleep: Callable[[float], None], last: Callable[[], str]) -> Callable[[float], None]:
        """``sleep`` for waits between retries; a wait that would end past the deadline raises at once.

        ``last()`` describes the last failed try for the message.  The returned function raises :meth:`error`.
        """

        def wait(seconds: float) -> None:
            if seconds >= self.remaining():
                raise self.error(f"{last()}; no time left to try again")
            sleep(seconds)

        return wait


def transfer_seconds(seconds: float, size: int | None) -> float:
    """The time a transfer of ``size`` bytes gets: ``seconds`` plus ``seconds`` per MiB (``inf`` for unknown).

    Never raises.
    """
    if size is None:
        return math.inf
    return seconds * (1 + size / PROGRESS_BYTES)
