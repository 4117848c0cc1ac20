"""The package-index reader's deadline (issue 24, item 6): one ``[pip] timeout`` for all of an index request.

Before: a hung index failed ``lock`` and ``matrix verify`` only after 124 s (four tries of a 30 s socket wait), and
an index sending one byte every 5 s kept ``lock`` running past 900 s.  Real loopback servers
(:mod:`tests.integration.support.hostile`) hang, drip and send without end here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagectl.config import load_config
from imagectl.errors import ConfigError, PackageIndexError
from imagectl.lock.asof import upload_date
from imagectl.lock.target import Target
from imagectl.pypi import IndexSettings, index_settings, project_files
from imagectl.pypi import transport
from imagectl.retry import RetryPolicy
from tests.integration.support.hostile import Behavior, FakeRegistry, answer, drip, endless, silence

DEADLINE_S = 1.0
SLACK_S = 3.0  # how much later than its deadline a request may end on a slow shared machine


@pytest.fixture
def index() -> Iterator[list[FakeRegistry]]:
    started: list[FakeRegistry] = []
    yield started
    for server in started:
        server.stop()


def _serve(started: list[FakeRegistry], behavior: Behavior) -> str:
    server = FakeRegistry(lambda request: behavior)
    started.append(server)
    return f"http://{server.host}/simple"


def _fails_in_time(call) -> str:
    started = time.monotonic()
    with pytest.raises(PackageIndexError) as caught:
        call()
    elapsed = time.monotonic() - started
    assert elapsed < DEADLINE_S + SLACK_S, f"took {elapsed:.1f} s"
    message = str(caught.value)
    assert "\n" not in message
    return message


SETTINGS = IndexSettings(timeout=30.0, deadline_s=DEADLINE_S, retry=RetryPolicy())  # real waits between tries


@pytest.mark.parametrize("behavior", [silence(), drip(10_000, every_s=0.25)], ids=["silent", "drip"])
def test_an_index_that_hangs_or_drips_fails_within_the_timeout_naming_it(index, behavior: Behavior) -> None:
    url = _serve(index, behavior)
    message = _fails_in_time(lambda: project_files(url, "torch", settings=SETTINGS))
    assert message.startswith(f"{url}/torch/: no complete answer within 1 s (")
    assert message.endswith("[pip] timeout sets how long to wait")


def test_retries_of_a_failing_index_stop_at_the_timeout(index) -> None:
    url = _serve(index, answer(503, b"busy"))
    message = _fails_in_time(lambda: project_files(url, "torch", settings=IndexSettings(
        deadline_s=DEADLINE_S, retry=RetryPolicy(attempts=10, base_s=0.3))))
    assert "last answer: HTTP 503; no time left to try again" in message and "[pip] timeout" in message


def test_an_endless_page_is_cut_at_its_cap(index, monkeypatch) -> None:
    monkeypatch.setattr(transport, "MAX_BODY_BYTES", 1024 * 1024)
    url = _serve(index, endless(200, {"Content-Type": "application/vnd.pypi.simple.v1+json"}))
    message = _fails_in_time(lambda: project_files(url, "torch", settings=SETTINGS))
    assert message == f"{url}/torch/: answer larger than 1048576 bytes; stopped reading it"
    assert index[0].sent < 64 * 1024 * 1024  # what socket buffers hold once the reader stops


def test_the_upload_date_a_lock_asks_for_uses_the_configured_timeout(index, tmp_path: Path) -> None:
    url = _serve(index, silence())
    (tmp_path / "imagectl.toml").write_text("[pip]\ntimeout = 1\n")
    config = load_config(cwd=tmp_path, env={})
    assert config.pip_timeout == 1.0 and index_settings(config.pip_timeout).deadline_s == 1.0
    target = Target(python="3.11", index=url, index_secret=url, index_timeout=config.pip_timeout)
    message = _fails_in_time(lambda: upload_date(target, "torch", "2.3.1"))
    assert "no complete answer within 1 s" in message and "[pip] timeout" in message


def test_matrix_verify_on_a_hung_index_fails_within_the_timeout_from_the_environment(index, run_cli,
                                                                                    monkeypatch) -> None:
    url = _serve(index, silence())
    monkeypatch.setenv("IMAGECTL_PIP_TIMEOUT", "1")
    started = time.monotonic()
    done = run_cli("matrix", "verify", "--index", url, "--framework", "torch")
    assert time.monotonic() - started < DEADLINE_S + SLACK_S
    assert done.code == 1 and "Traceback" not in done.err, done.err
    assert "no complete answer within 1 s" in done.err and "[pip] timeout sets how long to wait" in done.err


@pytest.mark.parametrize("value", ["0", "-1", "3601", '"soon"', "true"])
def test_the_timeout_must_be_a_number_of_seconds(tmp_path: Path, value: str) -> None:
    (tmp_path / "imagectl.toml").write_text(f"[pip]\ntimeout = {value}\n")
    with pytest.raises(ConfigError, match=r"\[pip\] timeout: expected a number of seconds"):
        load_config(cwd=tmp_path, env={})


def test_the_default_timeout_bounds_every_index_request() -> None:
    assert index_settings(None).deadline_s == transport.DEFAULT_TIMEOUT_S == 60.0
