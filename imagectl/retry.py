"""The one retry policy of imagectl's HTTP clients (the OCI registry client and the package-index reader).

Only transient failures are tried again: a connection error or timeout (not a TLS failure, which will not
change), 429 Too Many Requests and 5xx except 501 Not Implemented.  A definite answer such as 401, 403 or
404 never is.  Waits grow exponentially (``base_s * 2**n``) up to ``max_s``; a ``Retry-After`` header, as
delta-seconds or as an HTTP date, replaces the backoff and is capped at ``max_retry_after_s``.  ``sleep`` is
injectable so tests never wait.

Why not urllib3's ``Retry`` as a whole: mounted on a session's adapter it would retry beneath ``requests``,
where neither client can rewind (or refuse to resend) a streamed upload body or answer a 401 challenge in
between; it would change sessions that callers pass in; its sleep is ``time.sleep``, not injectable; it
honours Retry-After only for 413/429/503; and an exhausted budget surfaces as ``MaxRetryError``, which would
change the clients' error messages.  Its Retry-After parser does fit, so :func:`retry_after_seconds` uses
it; the rest is the small frozen :class:`RetryPolicy` and the loop :func:`send_with_retries`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import InvalidHeader
from urllib3.util import Retry

from imagectl.errors import InputError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429} | set(range(500, 600)) - {501})
TRANSIENT_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``attempts`` tries in all, waits of ``base_s * 2**n`` capped at ``max_s``.

    A ``Retry-After`` (delta-seconds or HTTP date) is honoured up to ``max_retry_after_s``.  ``sleep`` is
    injectable so tests need not wait.  Raises InputError if ``attempts`` is below 1 or a time is negative.
    """

    attempts: int = 4
    base_s: float = 0.5
    max_s: float = 8.0
    max_retry_after_s: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InputError(f"retry policy: attempts must be at least 1, not {self.attempts}")
        if min(self.base_s, self.max_s, self.max_retry_after_s) < 0:
            raise InputError("retry policy: base_s, max_s and max_retry_after_s must not be negative")

    def should_retry(self, status: int) -> bool:
        """True if an answer with HTTP ``status`` is worth another try; never raises."""
        return status in RETRY_STATUSES

    def retries_error(self, error: BaseException) -> bool:
        """True if a request that failed with ``error`` (no answer at all) is worth another try; never raises."""
        return isinstance(error, TRANSIENT_ERRORS) and not isinstance(error, requests.exceptions.SSLError)

    def delay(self, attempt: int, response: requests.Response | None = None) -> float:
        """Seconds to wait after failed try number ``attempt`` (0-based), from Retry-After when it says.

        Never raises.
        """
        hinted = retry_after_seconds(response) if response is not None else None
        if hinted is None:
            return min(self.max_s, self.base_s * 2.0**attempt)
        return max(0.0, min(hinted, self.max_retry_after_s))

    def once(self) -> RetryPolicy:
        """This policy with a single try (for a request whose body cannot be sent again); never raises."""
        return replace(self, attempts=1)


def retry_after_seconds(response: requests.Response) -> float | None:
    """The Retry-After header of ``response`` in seconds (delta-seconds or HTTP date, a past date is 0).

    None if the header is absent or malformed; never raises.
    """
    value = str(response.headers.get("Retry-After", "")).strip()
    if not value:
        return None
    try:
        return float(Retry(total=0).parse_retry_after(value))
    except (InvalidHeader, ValueError, OverflowError):
        return None


def send_with_retries(send: Callable[[], requests.Response], policy: RetryPolicy, what: str) -> requests.Response:
    """Call ``send`` until it answers a status not worth retrying or ``policy.attempts`` tries are used up.

    Returns the last answer, even one with a transient status after the last try (the caller decides what
    it means).  ``what`` names the request in log lines (see :func:`loggable_url`).  Raises whatever
    ``send`` raised: a transient error once the tries are used up, any other error at once.
    """
    for attempt in range(policy.attempts):
        last = attempt == policy.attempts - 1
        try:
            response = send()
        except requests.exceptions.RequestException as exc:
            if last or not policy.retries_error(exc):
                raise
            log.info("%s failed (%s); trying again", what, type(exc).__name__)
            policy.sleep(policy.delay(attempt))
            continue
        if last or not policy.should_retry(response.status_code):
            return response
        log.info("%s answered %s; trying again", what, response.status_code)
        response.close()
        policy.sleep(policy.delay(attempt, response))
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def loggable_url(url: str) -> str:
    """``url`` for a log line: without user info and query, so credentials and upload tokens stay out.

    Never raises.
    """
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"
