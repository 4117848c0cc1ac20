"""imagectl.engine.process: an engine child ends when the build's stop is set, when the waiting thread is
interrupted, and when imagectl itself dies (kill -9: the parent-death signal; the held stdin reaches its end)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from imagectl.engine.process import child, descendants, run_child
from imagectl.errors import BuildError
from imagectl.stop import Stop, Stopped

REPO = Path(__file__).resolve().parents[2]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone too: it waits for its (dead) parent's reaper
        return stat.read().rpartition(")")[2].split()[0] == "Z"


def _poll(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_output_and_status_come_back():
    done = run_child(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    held = run_child(["sh", "-c", "echo out; echo err >&2; exit 3"], hold_stdin=True)
    assert (held.returncode, held.stdout, held.stderr) == (3, "out\nerr\n", "")


def test_a_stop_ends_the_child_and_the_call_raises_stopped(tmp_path):
    stop, raised = Stop(), []
    pid_file = tmp_path / "pid"

    def run() -> None:
        try:
            run_child(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 600"], stop=stop)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert _poll(lambda: pid_file.exists() and pid_file.read_text().strip())
    stop.set(BuildError("another part failed"))
    thread.join(60)
    assert not thread.is_alive() and len(raised) == 1 and isinstance(raised[0], Stopped)
    assert _gone(int(pid_file.read_text()))


# Like ``buildah run``'s relay: writes without waiting for its reader (a full pipe refuses the rest), then exits
_IMPATIENT = textwrap.dedent("""
    import os, sys
    os.set_blocking(1, False)
    sent = 0
    for _ in range(128):
        try:
            sent += os.write(1, b"x" * 65536)
        except BlockingIOError:
            pass
    sys.stderr.write(f"sent {sent}")
""")


@pytest.mark.parametrize("hold_stdin", [False, True])
def test_a_child_that_never_waits_for_its_reader_loses_no_output(hold_stdin):
    # a pipe held up to 64 KiB of the 8 MiB: the child dropped the rest (buildah run lost the end of the dpkg
    # status that way, and an SBOM missed 26 packages)
    done = run_child([sys.executable, "-c", _IMPATIENT], hold_stdin=hold_stdin)
    everything = "x" * (128 * 65536)
    if hold_stdin:
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{everything}sent {len(everything)}", "")
    else:
        assert (done.returncode, done.stdout, done.stderr) == (0, everything, f"sent {len(everything)}")


@pytest.mark.parametrize("hold_stdin", [False, True])
def test_a_child_past_its_timeout_is_killed(hold_stdin):
    with pytest.raises(subprocess.TimeoutExpired):
        run_child(["sleep", "600"], timeout=0.5, hold_stdin=hold_stdin)


def test_an_exception_in_the_waiting_thread_ends_the_child(tmp_path):
    with pytest.raises(KeyboardInterrupt), child(["sh", "-c", "echo $$; exec sleep 600"]) as process:
        pid = int(process.stdout.readline())
        raise KeyboardInterrupt
    assert process.returncode is not None and _gone(pid)


PARENT = textwrap.dedent("""
    import sys
    from imagectl.engine.process import run_child
    print(run_child(sys.argv[1:], hold_stdin=True).returncode, flush=True)
""")


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux setpriv is not installed")
def test_a_child_of_a_process_killed_with_sigkill_gets_sigterm(tmp_path):
    marks = tmp_path / "marks"
    script = f"echo $$ > {marks}.pid; trap 'echo term >> {marks}; exit 0' TERM; while :; do sleep 0.1; done"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, "sh", "-c", script], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert _poll(lambda: Path(f"{marks}.pid").exists() and Path(f"{marks}.pid").read_text().strip())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _poll(lambda: marks.exists())  # the parent-death signal
    assert marks.read_text() == "term\n"


def test_a_held_stdin_reaches_its_end_when_the_parent_is_killed(tmp_path):
    marks = tmp_path / "marks"
    script = f"echo $$ > {marks}.pid; trap '' TERM; cat; echo eof > {marks}"  # deaf to SIGTERM: only the pipe tells
    parent = subprocess.Popen([sys.executable, "-c", PARENT, "sh", "-c", script], cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert _poll(lambda: Path(f"{marks}.pid").exists() and Path(f"{marks}.pid").read_text().strip())
    time.sleep(0.5)
    assert not marks.exists()  # still waiting on its stdin while the parent lives
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _poll(lambda: marks.exists())
    assert marks.read_text() == "eof\n"


def test_a_child_deaf_to_sigterm_is_killed_after_the_grace_and_a_held_stdin_is_closed_first(tmp_path):
    stop, raised = Stop(), []
    marks = tmp_path / "marks"
    script = f"echo $$ > {marks}.pid; trap '' TERM; cat; echo eof >> {marks}; while :; do sleep 0.1; done"

    def run() -> None:
        try:
            run_child(["sh", "-c", script], stop=stop, hold_stdin=True)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert _poll(lambda: Path(f"{marks}.pid").exists() and Path(f"{marks}.pid").read_text().strip())
    stop.set()
    assert _poll(lambda: marks.exists())  # its stdin ended at once
    thread.join(60)  # then SIGKILL after the grace (10 s)
    assert not thread.is_alive() and len(raised) == 1 and isinstance(raised[0], Stopped)
    assert _gone(int(Path(f"{marks}.pid").read_text()))


def test_a_stop_ends_the_child_s_own_children_first_so_it_fails_its_step_and_cleans_up(tmp_path):
    """buildah bud's way: its RUN step dies, the step fails, bud removes its containers (--force-rm) and exits; a
    SIGTERM between steps would end it without that."""
    stop, raised = Stop(), []
    marks = tmp_path / "marks"
    script = f"trap 'echo term >> {marks}; exit 1' TERM; sleep 600; echo step-failed-cleaned-up >> {marks}"

    def run() -> None:
        try:
            run_child(["sh", "-c", script], stop=stop)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert _poll(lambda: any("sleep" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
                             for pid in descendants(os.getpid()) if Path(f"/proc/{pid}/cmdline").exists()))
    stop.set()
    thread.join(60)
    assert not thread.is_alive() and len(raised) == 1 and isinstance(raised[0], Stopped)
    assert marks.read_text() == "step-failed-cleaned-up\n"  # its own failure path, no SIGTERM
