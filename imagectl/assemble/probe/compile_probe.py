"""The compile probe: runs in a container of the system image (base, Python, venv), by the venv's Python, with a
staging folder mounted (``python compile_probe.py STAGE [WAIT_S [stdin]]``).  Its host side is
:mod:`imagectl.assemble.compile`.

1. It writes :data:`VENV_FILE` at once: the venv's folders as ``sysconfig`` says and the distributions the venv
   already holds, with their files and metadata folder (:func:`venv_facts`).
2. It waits for :data:`SOURCES_FILE` (:func:`wait_for_sources`), at most ``WAIT_S`` seconds (default 3600): the
   ``.py`` files to compile, staged under ``STAGE`` at their paths in the image; ``null`` means the build stopped:
   it exits at once.
3. It compiles each as if it were at its real path (the ``dfile``: tracebacks and ``co_filename`` name the
   installed file), hash-checked (PEP 552: no timestamp, so the same source gives the same bytes), one process per
   core, skipping a file that does not compile as pip does (:func:`compile_sources`), and writes
   :data:`PROBE_FILE`: the same facts and the ``.pyc`` files made.

Its life is tied to the imagectl process that started it: with ``stdin`` (the third argument), it reads its stdin,
a pipe imagectl holds open, and when that ends (imagectl is gone, even killed with ``kill -9``, or its build stopped)
it ends at once with its compile workers (:func:`exit_when_stdin_ends`, by SIGKILL), instead of waiting up to
``WAIT_S`` for sources that will never come.

Files appear by rename, never half-written.  Standard library only, no import of imagectl, syntax of Python 3.8:
see :mod:`imagectl.assemble.probe`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import importlib.metadata
import importlib.util
import json
import os
import py_compile
import signal
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable

VENV_FILE = "venv.json"
PROBE_FILE = "probe.json"
SOURCES_FILE = "sources.json"
WAIT_S = 3600.0  # how long the probe waits for the sources, unless its second argument says
POLL_S = 0.05
_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def write_json(stage: str, name: str, data: object) -> None:
    """Write ``data`` as ``stage/name`` by rename: a reader never sees half of it."""
    part = os.path.join(stage, name + ".part")
    with open(part, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(part, os.path.join(stage, name))


def metadata_folder(dist: importlib.metadata.Distribution) -> str:
    """The absolute path of ``dist``'s ``.dist-info`` (or ``.egg-info``) folder: the first folder beside its
    packages that holds a file it lists (a wheel's RECORD lists itself there); "" when it lists none there."""
    for file in dist.files or ():
        if len(file.parts) > 1 and file.parts[0].endswith(_METADATA_SUFFIXES):
            return os.path.normpath(str(dist.locate_file(file.parts[0])))
    return ""


def installed(dists: Iterable[importlib.metadata.Distribution] | None = None) -> list[dict[str, object]]:
    """Each distribution of ``dists`` (default: those of ``sys.path``, as ``importlib.metadata`` finds them, in its
    order): its name, version, metadata folder and the absolute path of every file it lists."""
    found: list[dict[str, object]] = []
    for dist in importlib.metadata.distributions() if dists is None else dists:
        base = str(dist.locate_file(""))
        files = [os.path.normpath(os.path.join(base, str(file))) for file in dist.files or ()]
        found.append({"name": dist.metadata["Name"], "version": dist.version, "path": metadata_folder(dist),
                      "files": files})
    return found


def venv_facts() -> dict[str, object]:
    """The venv's folders (``sysconfig``), prefix, Python version and distributions (:func:`installed`)."""
    paths = sysconfig.get_paths()
    return {"purelib": paths["purelib"], "platlib": paths["platlib"], "scripts": paths["scripts"],
            "prefix": sys.prefix, "python": "%d.%d" % sys.version_info[:2], "dists": installed()}


def wait_for_sources(stage: str, seconds: float, poll: float = POLL_S) -> list[str] | None:
    """The list in ``stage``'s :data:`SOURCES_FILE` once it is there (None: compile nothing); raises TimeoutError
    when it is not there within ``seconds``."""
    path, deadline = os.path.join(stage, SOURCES_FILE), time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {SOURCES_FILE} in time ({seconds:g} s)")
        time.sleep(poll)
    with open(path, encoding="utf-8") as handle:
        sources = json.load(handle)
    return None if sources is None else [str(source) for source in sources]


def compile_one(stage: str, path: str) -> str | None:
    """Compile ``stage + path`` (``path``: absolute in the image) to ``stage`` + its ``.pyc`` path, hash-checked, as
    if it were at ``path``; that ``.pyc`` path, or None for a file that does not compile (pip skips those too)."""
    cached = importlib.util.cache_from_source(path)
    try:
        py_compile.compile(stage + path, cfile=stage + cached, dfile=path, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    except (py_compile.PyCompileError, SyntaxError, ValueError, OSError):
        return None
    return cached


def end_with_parent(parent: int, poll: float = 1.0) -> threading.Thread:
    """In a compile worker: a thread that ends this process once ``parent`` (the probe) is no longer its parent (it
    died, even by SIGKILL: the worker would otherwise wait for work forever); the thread."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="imagectl-probe-parent", daemon=True)
    thread.start()
    return thread


def compile_sources(stage: str, sources: list[str], workers: int | None = None) -> list[str]:
    """Compile every file of ``sources`` (:func:`compile_one`) on ``workers`` processes (default: one per core), in
    their order; the ``.pyc`` paths made."""
    count = workers or max(1, os.cpu_count() or 1)
    with concurrent.futures.ProcessPoolExecutor(count, initializer=end_with_parent, initargs=(os.getpid(),)) as pool:
        return [made for made in pool.map(functools.partial(compile_one, stage), sources, chunksize=64) if made]


def exit_when_stdin_ends(fd: int = 0, end: Callable[[], None] | None = None) -> threading.Thread:
    """Start a thread that reads the file descriptor ``fd`` (default: stdin) to its end, then calls ``end`` (default:
    :func:`end_now`); the thread.  It reads the descriptor itself, never ``sys.stdin``: a process pool's worker,
    forked while this thread waits in a read, closes ``sys.stdin`` first, and would wait forever for the lock of a
    buffered reader that the read held at the fork."""
    finish = end if end is not None else end_now

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 65536):
                pass
        finish()

    thread = threading.Thread(target=watch, name="imagectl-parent", daemon=True)
    thread.start()
    return thread


def end_now() -> None:
    """End this process and its compile workers at once: the whole process group when this process leads one (it
    makes one for itself in :func:`main`), else this process alone."""
    print("imagectl probe: imagectl is gone (stdin ended): exiting", file=sys.stderr, flush=True)
    if os.getpgrp() == os.getpid():
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    """``STAGE [WAIT_S [stdin]]``: the steps of the module docstring; the exit status (1: no sources in time)."""
    stage = argv[0]
    if argv[2:3] == ["stdin"]:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)  # a group of its own, which its compile workers join: end_now ends them all
        exit_when_stdin_ends()
    facts = venv_facts()
    write_json(stage, VENV_FILE, facts)
    try:
        sources = wait_for_sources(stage, float(argv[1]) if len(argv) > 1 else WAIT_S)
    except TimeoutError as exc:
        print(f"imagectl probe: {exc}", file=sys.stderr)
        return 1
    if sources is None:
        return 0
    with contextlib.suppress(OSError):
        os.nice(10)  # the layers being staged meanwhile come first
    write_json(stage, PROBE_FILE, dict(facts, pyc=compile_sources(stage, sources)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
