"""Where locks live and which one a profile installs.

Lock directories, searched in this order: the team's (``[paths] locks``), then ``locks/`` of each configured
matrix directory, then the shipped ``matrices/locks/``.  A lock is ``<lock id>.txt``
(``torch-2.3.1-cu121-py3.11.txt``).  It applies to a profile only when it was resolved against the index the
profile installs from: a shipped lock of PyPI does not apply to a build whose ``[pip] index_url`` points
elsewhere (that build is locked against its own index, at build time).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config
from ..errors import InputError, OperationError
from .. import shipped

if TYPE_CHECKING:  # imported where used: `show` with a cached description needs only lock_inputs
    from ..matrix.model import Profile
    from .lockfile import Lock

LOCKS = "locks"


@dataclass(frozen=True)
class FoundLock:
    """A lock file that applies to a profile: the lock, its path, and ``team`` or ``shipped``."""

    lock: Lock
    path: Path
    origin: str


def lock_dirs(config: Config) -> list[tuple[Path, str]]:
    """``(directory, origin)`` of every lock directory, in search order (missing ones included)."""
    dirs = [(d, "team") for d in config.lock_dirs]
    dirs += [(d / LOCKS, "team") for d in reversed(config.matrix_dirs)]
    dirs.append((shipped.shipped_dir("matrices") / LOCKS, "shipped"))
    return dirs


def lock_inputs(config: Config) -> list[Path]:
    """Every lock directory (present or not) and the lock files in it: what decides which lock a profile gets,
    the inputs of a cached result that names it."""
    dirs = [directory for directory, _ in lock_dirs(config)]
    return [*dirs, *(f for d in dirs if d.is_dir() for f in d.glob("*.txt"))]


def read_lock(path: Path) -> Lock:
    """The lock at ``path`` (parsed once for an unchanged file: per process, and in the result cache); raises
    InputError naming the file for one that cannot be read or parsed."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the lock: {exc.strerror or exc}") from None
    return _read(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _read(path: Path, _mtime: int, _size: int) -> Lock:
    from ..cache import cached

    return cached("lock", [path], lambda: _parse_file(path))


def _parse_file(path: Path) -> Lock:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the lock: {getattr(exc, 'strerror', None) or exc}") from None
    from .lockfile import parse_lock

    lock = parse_lock(text, str(path))
    lock.sha256  # computed before the result cache pickles it
    return lock


def find_lock(profile: Profile, config: Config, index: str) -> FoundLock | None:
    """The first lock file of ``profile`` whose header names ``index`` (credential-free), or None; raises
    InputError for a lock file that cannot be read."""
    from .target import profile_lock_id

    name = f"{profile_lock_id(profile)}.txt"
    for directory, origin in lock_dirs(config):
        path = directory / name
        if path.is_file():
            lock = read_lock(path)
            if lock.header.index.rstrip("/") == index.rstrip("/") and lock.header.python == profile.python:
                return FoundLock(lock, path, origin)
    return None


def shipped_lock_path(profile: Profile) -> Path:
    """Where the shipped lock of ``profile`` is (or would be)."""
    from .target import profile_lock_id

    return shipped.shipped_dir("matrices") / LOCKS / f"{profile_lock_id(profile)}.txt"


def write_lock(lock: Lock, path: Path) -> None:
    """Write ``lock`` to ``path`` atomically (a concurrent reader sees the old or the new file, never half);
    raises OperationError when it cannot."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(lock.text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        raise OperationError(f"{path}: cannot write the lock: {exc.strerror or exc}") from None


def lock_summary(profile: Profile, config: Config, index: str) -> dict[str, object] | None:
    """What ``show --json`` says of the lock a build of ``profile`` installs, or None when the build locks at
    build time (no lock file applies); raises InputError for a lock file that cannot be read."""
    found = find_lock(profile, config, index)
    if found is None:
        return None
    header = found.lock.header
    return {
        "id": header.lock_id, "origin": found.origin, "path": str(found.path), "sha256": found.lock.sha256,
        "as_of": header.as_of, "index": header.index, "platform": header.platform,
        "source": f"{header.source} ({header.as_of_note})" if header.as_of_note else header.source,
        "packages": found.lock.versions,
    }
