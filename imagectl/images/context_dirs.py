"""Directories for build contexts that a killed build cannot leave behind for long.

Build contexts are written under ``$XDG_CACHE_HOME/imagectl/contexts/``, one directory per build named
``PID.START-HOST-RANDOM`` (the process and its start time, :mod:`imagectl.owner`), removed when the build ends.  A
process killed meanwhile (``kill -9``) leaves its directory (an assembled build's holds gigabytes of layers); every
later ``build`` on that host, and ``imagectl sweep``, removes the ones whose process is gone (:func:`dead_contexts`,
:mod:`imagectl.images.sweep`).  A directory named by an older imagectl (``PID-HOST-RANDOM``) is removed when no
process has that id and it is older than a minute.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..cache import cache_dir
from ..owner import Owner, host_name, this_process


def contexts_root() -> Path:
    """Where build contexts are written: ``$XDG_CACHE_HOME/imagectl/contexts``."""
    return cache_dir() / "contexts"


def _host() -> str:
    """This host's name as a context directory carries it (:func:`imagectl.owner.host_name`)."""
    return host_name()


@contextmanager
def build_context() -> Iterator[Path]:
    """A fresh directory for one build context, ``PID-HOST-RANDOM`` under :func:`contexts_root` (the system's
    temporary directory when that cannot be made), removed when the block ends.  Raises OSError only when no
    directory can be made at all."""
    root: Path | None = contexts_root()
    prefix = f"{this_process().token}-{_host()}-"
    try:
        root.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
    except OSError:  # an unwritable cache: the system's temporary directory (not swept)
        root, prefix = None, f"imagectl-{prefix}"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=root) as tmp:
        yield Path(tmp)


def sweep_contexts(root: Path | None = None, min_age_s: float = 60.0) -> list[Path]:
    """Remove the build contexts that killed processes of this host left behind (:func:`dead_contexts`).

    Returns those removed.  Never raises: one that vanishes meanwhile or cannot be removed is left out.
    """
    removed = []
    for path, _ in dead_contexts(root, min_age_s):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def dead_contexts(root: Path | None = None, min_age_s: float = 60.0) -> list[tuple[Path, str]]:
    """The directories of :func:`contexts_root` (or ``root``) that processes of this host left behind and that are
    gone: (directory, the process as its name says, ``PID.START`` or ``PID``), sorted.  A name with a start time is
    the process's (:meth:`~imagectl.owner.Owner.alive`); an older name with the id alone also needs to be older than
    ``min_age_s``.  Never raises."""
    root = root or contexts_root()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    cutoff = time.time() - min_age_s
    return sorted((Path(entry.path), entry.name.partition("-")[0]) for entry in entries
                  if _left_by_dead_process(entry, cutoff))


def _left_by_dead_process(entry: os.DirEntry[str], cutoff: float) -> bool:
    who, _, rest = entry.name.partition("-")
    owner = Owner.parse(who)
    if not rest.startswith(f"{_host()}-") or (owner is None and (not who.isdigit() or int(who) <= 0)):
        return False
    try:
        if not entry.is_dir(follow_symlinks=False):
            return False
        stale = owner is not None or entry.stat(follow_symlinks=False).st_mtime < cutoff
    except OSError:
        return False
    return stale and not (owner.alive() if owner is not None else _alive(int(who)))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no PID is that large
        return False
    except PermissionError:  # another user's process
        return True
    return True
