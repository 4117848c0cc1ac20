"""When to try a registry request again, and how long to wait first.

Only transient failures are retried: a connection error or timeout, 429 Too Many Requests and 5xx (but not
501 Not Implemented, which will not change).  A definite answer such as 401, 403 or 404 never is.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from dataclasses import dataclass, field
from typing import Callable

import requests

RETRY_STATUSES = frozenset({429} | set(range(500, 600)) - {501})


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``attempts`` tries in all, waits of ``base_s * 2**n`` capped at ``max_s``.

    A ``Retry-After`` of a 429 or 503 is honoured up to ``max_retry_after_s``.  ``sleep`` is injectable so
    tests need not wait.
    """

    attempts: int = 4
    base_s: float = 0.5
    max_s: float = 8.0
    max_retry_after_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def should_retry(self, status: int) -> bool:
        """True if an answer with HTTP ``status`` is worth another try."""
        return status in RETRY_STATUSES

    def delay(self, attempt: int, response: requests.Response | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (0-based), from Retry-After when it says."""
        backoff = min(self.max_s, self.base_s * 2.0**attempt)
        hinted = retry_after_seconds(response) if response is not None else None
        if hinted is None:
            return backoff
        return max(0.0, min(hinted, self.max_retry_after_s))


def retry_after_seconds(response: requests.Response) -> float | None:
    """The Retry-After header of ``response`` in seconds (delta-seconds or HTTP date); None if absent or bad."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()
