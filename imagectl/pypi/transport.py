"""The one request path of the package-index reader: a session, bounded retries, typed errors.

Every HTTP request the :mod:`imagectl.pypi` package makes goes through :func:`request`.  It retries only
what is transient, by the policy it shares with the registry client (:class:`imagectl.retry.RetryPolicy`:
a connection error or timeout, HTTP 429, HTTP 5xx except 501, ``Retry-After`` honoured), a bounded number of
times, and turns what is left into :class:`~imagectl.errors.PackageIndexError` through :func:`index_error`,
so every message is one line that starts with the URL.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import requests

from imagectl.errors import PackageIndexError
from imagectl.retry import RetryPolicy, loggable_url, send_with_retries


@dataclass(frozen=True)
class IndexSettings:
    """How the reader talks to an index: timeouts, the User-Agent, the Range budget and the retry policy."""

    timeout: float = 30.0
    user_agent: str = "imagectl (package index reader)"
    max_range_bytes: int = 64 * 1024 * 1024
    retry: RetryPolicy = field(default_factory=RetryPolicy)


DEFAULT_SETTINGS = IndexSettings()


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
    """GET ``url`` (following redirects), retrying connection errors, timeouts, 429 and 5xx (not 501).

    Returns the final response whatever its status (the caller decides what a 404 means); a response
    that is still 429/5xx after the last retry is returned as is.

    Raises:
        PackageIndexError: the server could not be reached after every retry, or the URL is unusable.
    """

    def send_once() -> requests.Response:
        return session.get(url, headers=dict(headers or {}), timeout=settings.timeout, stream=stream)

    try:
        return send_with_retries(send_once, settings.retry, f"GET {loggable_url(url)}")
    except (requests.ConnectionError, requests.Timeout) as exc:
        raise index_error(url, f"cannot reach the index: {type(exc).__name__}") from exc
    except requests.RequestException as exc:
        raise index_error(url, f"request failed: {exc}") from exc


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
