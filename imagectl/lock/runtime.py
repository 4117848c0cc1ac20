"""The CUDA runtime a profile's lock installs, for ``compat`` and ``check`` (see :mod:`imagectl.matrix.runtime`)."""

from __future__ import annotations

from typing import Callable

from ..config import Config
from ..matrix.model import Matrix, Profile
from ..matrix.runtime import LockedCuda, locked_cuda
from ..pip_index import index_url
from .lockfile import DEFAULT_PLATFORM
from .store import FoundLock, find_lock


def cuda_of(found: FoundLock | None, matrix: Matrix) -> LockedCuda | None:
    """The CUDA the lock file ``found`` installs, or None when no lock file applies (pure)."""
    return locked_cuda(found.lock.versions, matrix.cuda) if found else None


def lock_reader(config: Config, matrix: Matrix,
                platform: str = DEFAULT_PLATFORM) -> Callable[[Profile], LockedCuda | None]:
    """A function giving the CUDA a profile's applying lock of ``platform`` installs, or None when no lock applies
    (the build locks at build time); it raises InputError for a lock file that cannot be read, ValidationError for a
    bad configured index."""

    def read(profile: Profile) -> LockedCuda | None:
        return cuda_of(find_lock(profile, config, index_url(profile, config), platform), matrix)

    return read
