"""The one request path of the package-index reader: a session, bounded retries, a deadline, typed errors.

Every HTTP request the :mod:`imagectl.pypi` package makes goes through :func:`request`.  It retries only
what is transient, by the policy it shares with the registry client (:class:`imagectl.retry.RetryPolicy`:
a connection error or timeout, HTTP 429, HTTP 5xx except 501, ``Retry-After`` honoured), a bounded number of
times, and turns what is left into :class:`~imagectl.errors.PackageIndexError` through :func:`index_error`,
so every message is one line that starts with the URL.

Like a registry request, an index request has one deadline for all of it, ``IndexSettings.deadline_s`` (the
``[pip] timeout``, :func:`index_settings`): connecting, every retry and the waits between them, and reading
the body, whose socket reads wait no longer than the time left (the registry client's bounded reader,
:mod:`imagectl.registry.body`, with :class:`IndexDeadline`'s errors).  So neither an index that never answers
nor one that sends a byte every few seconds holds ``lock`` or ``matrix verify``; the error names the setting.
A body is read up to ``MAX_BODY_BYTES``.  A streamed answer (a Range read) is read by its caller with
:func:`read_streamed`, within a deadline of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import requests

from imagectl.errors import PackageIndexError
from imagectl.registry.body import ERROR_BODY_BYTES, read_body
from imagectl.registry.deadline import Deadline
from imagectl.retry import RetryPolicy, loggable_url, send_with_retries

DEFAULT_TIMEOUT_S = 60.0  # [pip] timeout: an index that never answers fails a command within a minute
MAX_BODY_BYTES = 256 * 1024 * 1024  # an index page (PyPI's largest JSON pages are a few MB)


@dataclass(frozen=True)
class IndexSettings:
    """How the reader talks to an index: the wait for a connection or a socket read (``timeout``), the deadline
    of one whole request (``deadline_s``, the ``[pip] timeout``), the User-Agent, the Range budget and the retry
    policy."""

    timeout: float = 30.0
    user_agent: str = "imagectl (package index reader)"
    max_range_bytes: int = 64 * 1024 * 1024
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    deadline_s: float = DEFAULT_TIMEOUT_S


DEFAULT_SETTINGS = IndexSettings()


def index_settings(timeout: float | None) -> IndexSettings:
    """The reader's settings with the ``[pip] timeout`` (seconds for one whole request; the default when None)."""
    return DEFAULT_SETTINGS if timeout is None else replace(DEFAULT_SETTINGS, deadline_s=timeout)


@dataclass(frozen=True)
class IndexDeadline(Deadline):
    """The deadline of one index request (its ``registry`` is the URL asked): its errors are one-line
    PackageIndexErrors naming the URL and the ``[pip] timeout``."""

    def error(self, detail: str) -> PackageIndexError:
        """The error for the request running out of time; ``detail`` says what it was waiting for."""
        return index_error(self.registry, f"no complete answer within {self.seconds:g} s ({detail}); "
                                          "[pip] timeout sets how long to wait")

    def too_large(self, limit: int) -> PackageIndexError:
        """The error for an answer whose body is over ``limit`` bytes."""
        return index_error(self.registry, f"answer larger than {limit} bytes; stopped reading it")


def index_error(url: str, problem: str) -> PackageIndexError:
    """Build the one-line :class:`PackageIndexError` for ``url``; never raises."""
    return PackageIndexError(" ".join(f"{url}: {problem}".split()))


def error_for_status(response: requests.Response) -> PackageIndexError:
    """Map a non-2xx response to a :class:`PackageIndexError` naming the URL and status; never raises."""
    what = "not found" if response.status_code in (404, 410) else "the index answered"
    return index_error(response.url, f"{what} (HTTP {response.status_code} {response.reason or ''})")


def new_session(settings: IndexSettings = DEFAULT_SETTINGS) -> requests.Session:
    """Return a :class:`requests.Session` (connection reuse) with imagectl's User-Agent; never raises."""
    session = requests.Session()
    session.headers["User-Agent"] = settings.user_agent
    return session


@contextmanager
def session_scope(
    session: requests.Session | None, settings: IndexSettings = DEFAULT_SETTINGS
) -> Iterator[requests.Session]:
    """Yield ``session``, or a fresh one that is closed on exit when ``session`` is ``None``."""
    if session is not None:
        yield session
        return
    owned = new_session(settings)
    try:
        yield owned
    finally:
        owned.close()


def request(
    session: requests.Session,
    url: str,
    settings: IndexSettings = DEFAULT_SETTINGS,
    headers: Mapping[str, str] | None = None,
    *,
    stream: bool = False,
) -> requests.Response:
    """GET ``url`` (following redirects), retrying connection errors, timeouts, 429 and 5xx (not 501), all of it
    within ``settings.deadline_s``.

    Returns the final response whatever its status (the caller decides what a 404 means), its body read (at
    most ``MAX_BODY_BYTES``; of a failure, the first ``ERROR_BODY_BYTES``) unless ``stream``; a response that is
    still 429/5xx after the last retry is returned as is.

    Raises:
        PackageIndexError: the server could not be reached after every retry, the deadline passed (naming the
            ``[pip] timeout``), the body is too large, or the URL is unusable.
    """
    deadline = IndexDeadline.after(settings.deadline_s, url, "GET")
    last = ["no answer"]
    policy = replace(settings.retry, sleep=deadline.sleeper(settings.retry.sleep, lambda: last[0]))

    def send_once() -> requests.Response:
        wait = min(settings.timeout, deadline.left("no time left for another try"))
        try:
            response = session.get(url, headers=dict(headers or {}), timeout=wait, stream=True)
            last[0] = f"last answer: HTTP {response.status_code}"
            if not stream and not policy.should_retry(response.status_code):
                _read(response, deadline, settings)
        except requests.RequestException as exc:
            last[0] = f"last try: {type(exc).__name__}"
            raise
        return response

    try:
        response = send_with_retries(send_once, policy, f"GET {loggable_url(url)}")
        if not stream:
            _read(response, deadline, settings)
        return response
    except (requests.ConnectionError, requests.Timeout) as exc:
        if deadline.remaining() <= 0:
            raise deadline.error(last[0]) from None
        raise index_error(url, f"cannot reach the index: {type(exc).__name__}") from exc
    except requests.RequestException as exc:
        raise index_error(url, f"request failed: {exc}") from exc


def _read(response: requests.Response, deadline: IndexDeadline, settings: IndexSettings) -> None:
    """Read the body of ``response`` into ``.content`` within ``deadline`` (once): a 2xx answer's up to
    ``MAX_BODY_BYTES``, another's cut at ``ERROR_BODY_BYTES``."""
    if response._content is not False:  # requests' marker: read already
        return
    ok = 200 <= response.status_code < 300
    read_body(response, MAX_BODY_BYTES if ok else ERROR_BODY_BYTES, deadline, truncate=not ok,
              stall_s=settings.timeout)


def read_streamed(response: requests.Response, limit: int, settings: IndexSettings = DEFAULT_SETTINGS) -> bytes:
    """The body of a streamed ``response``, at most ``limit`` bytes (one more means "longer"), read within a
    deadline of its own (``settings.deadline_s``).

    Raises:
        PackageIndexError: the deadline passed or the connection broke off.
    """
    deadline = IndexDeadline.after(settings.deadline_s, response.url, "GET")
    try:
        return read_body(response, limit + 1, deadline, truncate=True, stall_s=settings.timeout)
    except requests.RequestException as exc:
        raise index_error(response.url, f"the answer broke off: {type(exc).__name__}") from None


def get_ok(
    session: requests.Session,
    url: str,
    settings: IndexSettings = DEFAULT_SETTINGS,
    headers: Mapping[str, str] | None = None,
) -> requests.Response:
    """GET ``url`` like :func:`request` and insist on a 2xx answer.

    Raises:
        PackageIndexError: unreachable, or any status other than 2xx (404 says "not found").
    """
    response = request(session, url, settings, headers)
    if not 200 <= response.status_code < 300:
        raise error_for_status(response)
    return response
