"""The engine's long-running child processes (``buildah bud``, ``buildah run``, ``buildah push``/``pull`` of a layout,
``containers-storage import-layer``), tied to the build that runs them.

- A build's stop (:class:`imagectl.stop.Stop`: another part failed, or Ctrl-C) ends the child within seconds, and the
  call raises Stopped instead of the child's own failure.  Its own children go first (SIGKILL, again each time new
  ones appear): ``buildah bud`` whose RUN step dies fails that step as any failed step, and ``--force-rm`` removes
  its working containers; SIGTERM would end buildah itself between its steps, leaving them behind.  Then its held
  stdin is closed; SIGTERM follows after :data:`TERM_AFTER_S` seconds and SIGKILL after :data:`GRACE_S`.
- An exception in the waiting thread (KeyboardInterrupt in the main thread) ends the child before it is raised on,
  instead of waiting for the child to finish by itself (``Popen.__exit__`` would wait for a build of minutes).
- The child gets SIGTERM when imagectl dies, even by ``kill -9`` (the kernel's parent-death signal, set by
  util-linux ``setpriv --pdeathsig TERM`` where it is installed): ``buildah bud --force-rm`` then removes its working
  containers itself, and nothing imagectl started goes on working for a process that is gone.
- ``hold_stdin``: the child's stdin is a pipe imagectl holds open until the call returns, so a program that reads it
  to its end learns that imagectl is gone (the compile probe exits then, :mod:`imagectl.assemble.probe`).
- :func:`run_child` gives the child unnamed temporary files for its output and reads them once it has ended: a
  child never waits for imagectl to read.  ``buildah run`` (chroot isolation) relays its program's output through a
  pipe of its own and exits when the program does, dropping what it still holds; while imagectl's other threads (a
  second build) keep the interpreter busy, imagectl read a pipe too slowly, and the end of the output was lost with
  exit status 0 (an SBOM listed the dpkg packages up to ``perl-modules`` only).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO

from ..stop import Stop

GRACE_S = 10.0  # between SIGTERM and SIGKILL of a child that is told to end (and of a stopped child: SIGKILL)
TERM_AFTER_S = 3.0  # a stopped child whose own children did not end it gets SIGTERM after this many seconds


def dying_with_parent(argv: Sequence[str]) -> list[str]:
    """``argv`` run so that the child gets SIGTERM when this process dies (``setpriv --pdeathsig TERM``, on Linux
    where util-linux's ``setpriv`` is installed; else ``argv`` as it is)."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else list(argv)


@contextlib.contextmanager
def child(argv: Sequence[str], *, stop: Stop | None = None, hold_stdin: bool = False, apart: bool = False,
          into: tuple[IO[bytes], IO[bytes]] | None = None) -> Iterator[subprocess.Popen[str]]:
    """Start ``argv`` as the module docstring says, its stdout and stderr together in one text pipe (``apart``: in
    two) that the caller reads, or (``into``) written to the files (stdout's, stderr's; one file for both may be
    given twice); when the block ends the child has ended (it is ended first if the block raises).  Raises OSError
    when it cannot start."""
    if into is not None:
        stdout: int | IO[bytes] = into[0]
        stderr: int | IO[bytes] = into[1]
    else:
        stdout, stderr = subprocess.PIPE, subprocess.PIPE if apart else subprocess.STDOUT
    process = subprocess.Popen(dying_with_parent(argv), stdin=subprocess.PIPE if hold_stdin else subprocess.DEVNULL,
                               stdout=stdout, stderr=stderr, text=True, errors="replace", bufsize=1)
    try:
        with stop.hook(lambda: _halt(process)) if stop is not None else contextlib.nullcontext():
            yield process
            process.wait()
    except BaseException:
        end(process)
        raise
    finally:
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def run_child(argv: Sequence[str], *, stop: Stop | None = None, timeout: float | None = None,
              hold_stdin: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end (:func:`child`): its status, stdout and stderr (with ``hold_stdin``, stderr comes in
    stdout), all of them: its output goes to temporary files, read when it has ended (the module docstring says
    why).  Raises Stopped when ``stop`` was set meanwhile, subprocess.TimeoutExpired after ``timeout`` seconds (the
    child ended first), OSError when it cannot start."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with child(argv, stop=stop, hold_stdin=hold_stdin, into=(out, out if hold_stdin else err)) as process:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                if hold_stdin:  # a program that reads its stdin gets no SIGTERM grace (buildah run passes none on)
                    process.kill()
                raise
        if stop is not None:
            stop.check()
        return subprocess.CompletedProcess(list(argv), process.returncode, _read_back(out), _read_back(err))


def _read_back(file: IO[bytes]) -> str:
    """What a child wrote to ``file``, as a text pipe would have given it (the locale's encoding, undecodable bytes
    replaced, universal newlines)."""
    file.seek(0)
    text = io.TextIOWrapper(file, errors="replace")
    try:
        return text.read()
    finally:
        text.detach()


def _halt(process: subprocess.Popen[str]) -> None:
    """Tell ``process`` to end without waiting (a stop's hook): the module docstring's order, on a thread of its own
    (``buildah run`` does not pass SIGTERM on to its program; ``buildah bud`` cleans up only after a failed step)."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    threading.Thread(target=_end_stopped, args=(process,), name="imagectl-halt", daemon=True).start()


def _end_stopped(process: subprocess.Popen[str]) -> None:
    started = time.monotonic()
    while process.poll() is None and time.monotonic() - started < GRACE_S:
        for pid in descendants(process.pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() - started >= TERM_AFTER_S:
            with contextlib.suppress(OSError):
                process.terminate()
        time.sleep(0.1)
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.kill()


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, theirs, ...), from ``/proc`` (none where it cannot be read)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rpartition(b")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(parent, []).append(entry)
    found, todo = [], list(parents.get(pid, ()))
    while todo:
        child_pid = todo.pop()
        found.append(child_pid)
        todo.extend(parents.get(child_pid, ()))
    return found


def end(process: subprocess.Popen[str]) -> None:
    """End ``process``: SIGTERM, then SIGKILL after :data:`GRACE_S` seconds; never raises."""
    with contextlib.suppress(OSError):
        process.terminate()
        try:
            process.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
