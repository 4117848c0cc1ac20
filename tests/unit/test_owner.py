"""imagectl.owner: a process named by its id and start time; alive while that very process runs, not after, and not
when another process got its id."""

from __future__ import annotations

import os
import subprocess
import sys

from imagectl.owner import Owner, process_start, this_process


def test_this_process_is_alive_and_its_token_reads_back():
    me = this_process()
    assert me.pid == os.getpid() and me.start > 0  # Linux: /proc/self/stat
    assert me.alive()
    assert Owner.parse(me.token) == me


def test_a_process_that_ended_is_not_alive():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    gone = Owner(int(done.stdout), 1)
    assert process_start(gone.pid) == -1 or process_start(gone.pid) != 1  # its id is free, or another's now
    assert not gone.alive()


def test_another_process_with_the_same_id_is_not_the_owner():
    me = this_process()
    assert not Owner(me.pid, me.start + 1).alive()  # the id reused by a process that started later
    assert Owner(me.pid, 0).alive()  # start unknown (no /proc where it was made): the id alone decides


def test_a_name_in_parentheses_with_spaces_is_read_past():
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                               executable=sys.executable)
    try:
        start = process_start(process.pid)
        assert start is not None and start > 0
        assert Owner(process.pid, start).alive()
    finally:
        process.communicate(b"")


def test_text_that_is_no_token_is_none():
    for text in ("", "12", "12.", ".5", "0.5", "12.5.6", "12-5", "x.1", "1" * 11 + ".1"):
        assert Owner.parse(text) is None, text
