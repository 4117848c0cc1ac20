"""Which answers are retried, and how long the client waits in between."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
import requests

from imagectl.registry.retry import RetryPolicy, retry_after_seconds


def _response(status: int, retry_after: str | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    if retry_after is not None:
        response.headers["Retry-After"] = retry_after
    return response


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_transient_statuses_are_retried(status: int) -> None:
    assert RetryPolicy().should_retry(status)


@pytest.mark.parametrize("status", [200, 201, 400, 401, 403, 404, 405, 409, 501])
def test_definite_answers_are_not_retried(status: int) -> None:
    assert not RetryPolicy().should_retry(status)


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_s=0.5, max_s=3.0)
    assert [policy.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    policy = RetryPolicy(max_retry_after_s=10.0)
    assert policy.delay(0, _response(429, "4")) == 4.0
    assert policy.delay(0, _response(429, "3600")) == 10.0
    assert policy.delay(2, _response(503, "soon")) == policy.delay(2)


def test_retry_after_as_an_http_date() -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=20), usegmt=True)
    seconds = retry_after_seconds(_response(503, when))
    assert seconds is not None and 15 < seconds <= 20
    assert retry_after_seconds(_response(503)) is None
