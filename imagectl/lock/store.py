"""Where locks live and which one a profile installs.

Lock directories, searched in this order: the team's (``[paths] locks``), then ``locks/`` of each configured
matrix directory, then the shipped ``matrices/locks/``.  A lock is ``<lock id>.txt``
(``torch-2.3.1-cu121-py3.11.txt``; a linux/arm64 lock ``torch-2.15.0-cu132-py3.12-aarch64.txt``): a lock is found
by profile and platform, and its header must say that platform.  It applies to a profile only when it was
resolved against the index the profile installs from: a shipped lock of PyPI does not apply to a build whose
``[pip] index_url`` points elsewhere (that build is locked against its own index, at build time).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from .. import paths, shipped
from ..config import Config
from ..errors import InputError, OperationError
from ..matrix.model import Profile
from .lockfile import DEFAULT_PLATFORM, Lock, parse_lock
from .target import profile_lock_id

LOCKS = "locks"
LockOrigin = Literal["team", "shipped"]  # a lock file of the team's lock directories, or one imagectl ships


@dataclass(frozen=True)
class FoundLock:
    """A lock file that applies to a profile: the lock, its path, and where it came from."""

    lock: Lock
    path: Path
    origin: LockOrigin


def lock_dirs(config: Config) -> list[tuple[Path, LockOrigin]]:
    """``(directory, origin)`` of every lock directory, in search order (missing ones included)."""
    dirs: list[tuple[Path, LockOrigin]] = [(d, "team") for d in config.lock_dirs]
    dirs += [(d / LOCKS, "team") for d in reversed(config.matrix_dirs)]
    dirs.append((shipped.shipped_dir("matrices") / LOCKS, "shipped"))
    return dirs


def lock_files(config: Config) -> list[Path]:
    """Every lock file (``*.txt``) of every lock directory, in search order, sorted within a directory, each once;
    raises InputError naming a lock directory that cannot be looked at."""
    found = [p for d, _ in lock_dirs(config) if paths.is_dir(d, InputError, "the lock folder")
             for p in sorted(d.glob("*.txt"))]
    return list(dict.fromkeys(found))


def read_lock(path: Path) -> Lock:
    """The lock at ``path``, read now (parsed once per process for the same path and bytes: ``list`` asks for the
    same lock of every flavour and OS); raises InputError naming the file for one that cannot be read or parsed."""
    return _parsed(paths.read_text(path, InputError, "the lock"), str(path))


@lru_cache(maxsize=256)
def _parsed(text: str, where: str) -> Lock:
    """:func:`~.lockfile.parse_lock`, memoised: a pure function of its arguments."""
    return parse_lock(text, where)


def find_lock(profile: Profile, config: Config, index: str, platform: str = DEFAULT_PLATFORM) -> FoundLock | None:
    """The first lock file of ``profile`` for the OCI ``platform`` whose header names ``index`` (credential-free),
    ``profile``'s Python and that platform, or None; raises InputError for a lock file that cannot be read."""
    name = f"{profile_lock_id(profile, platform)}.txt"
    for directory, origin in lock_dirs(config):
        path = directory / name
        if paths.is_file(path, InputError, "the lock"):
            header = (lock := read_lock(path)).header
            if (header.index.rstrip("/") == index.rstrip("/") and header.python == profile.python
                    and header.oci_platform == platform):
                return FoundLock(lock, path, origin)
    return None


def write_lock(lock: Lock, path: Path) -> None:
    """Write ``lock`` to ``path`` atomically (see :func:`write_atomically`)."""
    write_atomically(path, lock.text, "the lock")


def write_atomically(path: Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` atomically (a concurrent reader sees the old or the new file, never half; a
    failure leaves neither half a file nor the temporary one); raises OperationError naming ``what``."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:  # a full disk leaves no empty temporary file behind
            Path(tmp).unlink(missing_ok=True)
        raise OperationError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None
