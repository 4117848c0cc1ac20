"""Where system locks live (:mod:`.system`): beside the Python locks, in the same lock directories and order
(:func:`~.store.lock_dirs`), as ``<system lock id>.apt.lock``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..config import Config
from ..errors import InputError
from ..matrix.model import Profile
from .lockfile import DEFAULT_PLATFORM
from .store import LockOrigin, lock_dirs, write_atomically
from .system import SUFFIX, SystemLock, parse_system_lock, system_lock_id


@dataclass(frozen=True)
class FoundSystemLock:
    """A system lock file that applies to a profile: the lock, its path and where it came from."""

    lock: SystemLock
    path: Path
    origin: LockOrigin


def profile_system_lock_id(profile: Profile, platform: str = DEFAULT_PLATFORM) -> str:
    """The id of ``profile``'s system lock for ``platform`` (its framework, public base image and Python)."""
    return system_lock_id(profile.framework.name, profile.base_image.familiar, profile.python, platform)


def read_system_lock(path: Path) -> SystemLock:
    """The system lock at ``path``; raises InputError naming the file for one that cannot be read or parsed."""
    return parse_system_lock(paths.read_text(path, InputError, "the system lock"), str(path))


def find_system_lock(profile: Profile, config: Config, platform: str = DEFAULT_PLATFORM) -> FoundSystemLock | None:
    """The first system lock of ``profile`` for ``platform`` whose header names the profile's base image, Python and
    framework, or None; raises InputError for one that cannot be read, or that names another base or Python."""
    name = profile_system_lock_id(profile, platform) + SUFFIX
    for directory, origin in lock_dirs(config):
        path = directory / name
        if paths.is_file(path, InputError, "the system lock"):
            lock = read_system_lock(path)
            h = lock.header
            if (h.base, h.python, h.framework, h.platform) != (profile.base_image.familiar, profile.python,
                                                             profile.framework.name, platform):
                raise InputError(f"{path}: made for {h.framework} on {h.base}, Python {h.python}, {h.platform}; "
                                 f"{profile.name} needs {profile.framework.name} on {profile.base_image}, Python "
                                 f"{profile.python}, {platform}")
            return FoundSystemLock(lock, path, origin)
    return None


def write_system_lock(lock: SystemLock, path: Path) -> None:
    """Write ``lock`` to ``path`` atomically; raises OperationError when it cannot."""
    write_atomically(path, lock.text, "the system lock")
