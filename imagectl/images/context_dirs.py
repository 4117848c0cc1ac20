"""Directories for build contexts that a killed build cannot leave behind for long.

Build contexts are written under ``$XDG_CACHE_HOME/imagectl/contexts/``, one directory per build named
``PID-HOST-RANDOM``, removed when the build ends.  A process killed meanwhile (``kill -9``) leaves its directory;
every later ``build`` on that host removes the ones whose process is gone and that are older than a minute
(:func:`sweep_contexts`).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..cache import cache_dir


def contexts_root() -> Path:
    """Where build contexts are written: ``$XDG_CACHE_HOME/imagectl/contexts``."""
    return cache_dir() / "contexts"


def _host() -> str:
    """This host's name as a context directory carries it (no ``-``, so the name parses unambiguously)."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


@contextmanager
def build_context() -> Iterator[Path]:
    """A fresh directory for one build context, ``PID-HOST-RANDOM`` under :func:`contexts_root` (the system's
    temporary directory when that cannot be made), removed when the block ends.  Raises OSError only when no
    directory can be made at all."""
    root: Path | None = contexts_root()
    prefix = f"{os.getpid()}-{_host()}-"
    try:
        root.mkdir(parents=True, exist_ok=True)  # type: ignore[union-attr]
    except OSError:  # an unwritable cache: the system's temporary directory (not swept)
        root, prefix = None, f"imagectl-{prefix}"
    with tempfile.TemporaryDirectory(prefix=prefix, dir=root) as tmp:
        yield Path(tmp)


def sweep_contexts(root: Path | None = None, min_age_s: float = 60.0) -> list[Path]:
    """Remove the build contexts that killed processes of this host left behind: directories of
    :func:`contexts_root` (or ``root``) whose PID is not alive and that are older than ``min_age_s``.

    Returns those removed.  Never raises: one that vanishes meanwhile or cannot be removed is left out.
    """
    root = root or contexts_root()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    cutoff = time.time() - min_age_s
    removed = []
    for entry in entries:
        if _left_by_dead_process(entry, cutoff):
            shutil.rmtree(entry.path, ignore_errors=True)
            if not os.path.lexists(entry.path):
                removed.append(Path(entry.path))
    return removed


def _left_by_dead_process(entry: os.DirEntry[str], cutoff: float) -> bool:
    pid_text, _, rest = entry.name.partition("-")
    if not pid_text.isdigit() or int(pid_text) <= 0 or not rest.startswith(f"{_host()}-"):
        return False
    try:
        stale = entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff
    except OSError:
        return False
    return stale and not _alive(int(pid_text))


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: no PID is that large
        return False
    except PermissionError:  # another user's process
        return True
    return True
