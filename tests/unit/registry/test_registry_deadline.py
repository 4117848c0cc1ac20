"""Deadlines of registry requests, the timeouts that feed them, and loopback host names: pure pieces.

What the deadline covers against real sockets (silence, drips, retries, token requests, the CLI) is tested with
fake servers in tests/integration/test_hostile_registry.py.
"""

from __future__ import annotations

import math

import pytest

from imagectl.errors import InputError, RegistryError
from imagectl.registry import Timeouts, connect
from imagectl.registry.client import DEFAULT_TIMEOUT_S
from imagectl.registry.deadline import Deadline, transfer_seconds
from imagectl.registry.loopback import hostname, is_loopback


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _deadline(clock: Clock, seconds: float = 10) -> Deadline:
    return Deadline.after(seconds, "ghcr.io", "GET manifest team/x:v1", clock)


def test_a_deadline_counts_down_and_then_raises_one_line_naming_the_registry() -> None:
    clock = Clock()
    deadline = _deadline(clock)
    clock.now += 4
    assert deadline.remaining() == 6 and deadline.left("waiting") == 6
    clock.now += 7
    assert deadline.remaining() == 0
    with pytest.raises(RegistryError) as caught:
        deadline.left("no answer")
    assert str(caught.value) == ("registry ghcr.io: GET manifest team/x:v1: no complete answer within 10 s "
                                 "(no answer); [registry] timeout sets how long to wait")


def test_a_retry_wait_past_the_deadline_raises_at_once_without_waiting() -> None:
    clock, waited = Clock(), []
    wait = _deadline(clock).sleeper(waited.append, lambda: "last answer: 503")
    wait(2.0)
    clock.now += 5
    with pytest.raises(RegistryError, match=r"\(last answer: 503; no time left to try again\)"):
        wait(5.0)  # would end exactly at the deadline
    assert waited == [2.0]


def test_a_transfer_gets_the_timeout_per_mib_and_no_limit_when_its_size_is_unknown() -> None:
    assert transfer_seconds(45, 0) == 45
    assert transfer_seconds(45, 2 * 1024 * 1024) == 135
    assert transfer_seconds(45, None) == math.inf
    assert Deadline.after(math.inf, "r", "w").remaining() == math.inf


@pytest.mark.parametrize("bad", [0, -1, True, "10", math.nan])
def test_timeouts_must_be_positive_numbers(bad: object) -> None:
    with pytest.raises(InputError, match="must be a number of seconds > 0"):
        Timeouts(request_s=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="request_s must be a number of seconds > 0"):
        connect("ghcr.io", timeout=bad)  # type: ignore[arg-type]


def test_by_default_a_hung_registry_fails_within_a_minute() -> None:
    assert Timeouts().request_s == DEFAULT_TIMEOUT_S <= 50


@pytest.mark.parametrize(("domain", "host", "loopback"), [
    ("127.0.0.1:5000", "127.0.0.1", True),
    ("127.1.2.3", "127.1.2.3", True),
    ("LOCALHOST:5000", "localhost", True),
    ("[::1]:5000", "::1", True),
    ("ghcr.io", "ghcr.io", False),
    ("10.0.0.5:5000", "10.0.0.5", False),
    ("[2001:db8::1]:443", "2001:db8::1", False),
])
def test_hostnames_and_loopback(domain: str, host: str, loopback: bool) -> None:
    assert hostname(domain) == host and is_loopback(domain) is loopback
