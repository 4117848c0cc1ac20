"""imagectl.stop: one stop signal for every thread of an operation, and SIGINT/SIGTERM as one interrupt path; the CLI
exits 130 after SIGINT and 143 after SIGTERM with one line, in a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from pathlib import Path

import pytest

from imagectl.errors import BuildError, OperationError
from imagectl.stop import Interrupted, Stop, Stopped, first_error, signals_as_interrupts

REPO = Path(__file__).resolve().parents[2]


def test_the_first_set_wins_and_check_raises_stopped_naming_it():
    stop = Stop()
    stop.check()  # nothing while it goes on
    failure = BuildError("build failed: false", "build")
    assert stop.set(failure) and not stop.set(BuildError("later"))
    assert stop.is_set() and stop.error is failure
    with pytest.raises(Stopped, match="stopped: build failed: false"):
        stop.check()
    assert issubclass(Stopped, OperationError)  # exit 1 if it ever reached the CLI


def test_hooks_run_when_set_once_and_not_after_their_block():
    stop, calls = Stop(), []
    with stop.hook(lambda: calls.append("a")):
        pass
    with stop.hook(lambda: calls.append("b")), stop.hook(lambda: 1 / 0):  # a failing hook stops nothing else
        stop.set()
        stop.set()
    assert calls == ["b"]
    with stop.hook(lambda: calls.append("late")):  # registered after: runs at once
        assert calls == ["b", "late"]


def test_a_waiting_thread_wakes_when_another_sets_it():
    stop, woke = Stop(), []
    thread = threading.Thread(target=lambda: woke.append(stop.wait(60)))
    thread.start()
    stop.set()
    thread.join(10)
    assert woke == [True]


def test_the_error_reported_is_the_first_failure_not_a_worker_s_stopped():
    stop = Stop()
    cause = BuildError("the index broke off")
    stop.set(cause)
    assert first_error(stop, Stopped("stopped")) is cause
    other = BuildError("something else")
    assert first_error(stop, other) is other  # a real error of its own is kept
    assert first_error(Stop(), Stopped("x")).args == ("x",)


def test_sigterm_raises_interrupted_in_the_main_thread_and_the_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as raised, signals_as_interrupts():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert raised.value.signum == signal.SIGTERM and raised.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == before


@pytest.mark.parametrize(("signum", "code", "line"), [(signal.SIGINT, 130, "imagectl: interrupted"),
                                                    (signal.SIGTERM, 143, "imagectl: terminated")])
def test_the_cli_interrupted_by_a_signal_says_one_line_and_exits_128_plus_it(tmp_path, signum, code, line):
    # a command that waits: `imagectl history` of a registry that accepts the connection and never answers
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        (tmp_path / "imagectl.toml").write_text(
            f'[registry]\nurl = "127.0.0.1:{server.getsockname()[1]}"\ntimeout = 600\n')
        process = subprocess.Popen([sys.executable, "-m", "imagectl", "history", "torch-2.3-cu121"],
                                   cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        server.settimeout(1)
        while time.monotonic() < deadline:  # the command is waiting on the index now
            try:
                connection, _ = server.accept()
                break
            except TimeoutError:
                assert process.poll() is None, process.communicate()
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
        connection.close()
    assert process.returncode == code, err
    assert [e for e in err.splitlines() if e.strip()] == [line], err
