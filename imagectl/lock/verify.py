"""``imagectl lock --check``: the lock files against the matrix and their index (for CI).

A lock drifts when the matrix changed under it (its inputs, the framework/companion/pin versions, are no
longer the profile's), when a locked input is not at its pinned version, when it holds a package below one of the
matrix's security floors (``[lock] floors``), or when the index now marks one of its files yanked (PEP 592).  A
profile ``list`` shows that installs from PyPI has to have a shipped lock.
Each problem is one line; the command exits 1 when there is any.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import shipped
from ..config import Config
from ..errors import ImagectlError
from ..grammar import versions_equal
from ..matrix.model import Matrix, Profile
from ..matrix.names import resolve_profile
from ..pypi.simple import project_files
from ..pypi.transport import DEFAULT_SETTINGS, IndexSettings, index_settings
from .lockfile import Lock, canonical_name, platform_suffix
from ..pip_index import index_url
from .store import LOCKS, find_lock, read_lock
from .target import lock_inputs, profile_lock_id


@dataclass(frozen=True)
class Problem:
    """One way a lock file drifted: the file (or lock id) and what is wrong."""

    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


def input_problems(lock: Lock, profile: Profile) -> list[str]:
    """Where ``lock`` disagrees with ``profile``'s inputs (pure)."""
    out = []
    platform = lock.header.oci_platform
    wanted = lock_inputs(profile, platform)
    if tuple(lock.header.inputs) != wanted:
        gone = sorted(set(lock.header.inputs) - set(wanted))
        new = sorted(set(wanted) - set(lock.header.inputs))
        out.append(f"the matrix changed: the lock was made for {' '.join(gone) or '-'}, the profile now asks for "
                   f"{' '.join(new) or '-'} (remake: imagectl lock {profile_lock_id(profile)} --platform {platform})")
    locked = lock.versions
    for name, version in profile.packages_for(platform):
        have = locked.get(canonical_name(name))
        if have is None or not versions_equal(have, version):  # 13.0.3.0 is 13.0.3 (PEP 440)
            out.append(f"{name}: the matrix pins {version}, the lock has {have or 'nothing'}")
    return out


def floor_problems(lock: Lock, profile: Profile) -> list[str]:
    """The packages of ``lock`` below one of the security floors of ``profile``'s framework (pure)."""
    locked = lock.versions
    return [f"{floor.package} {locked[floor.package]} is below the security floor {floor.version} ({floor.source}): "
            f"remake it (imagectl lock {lock.header.lock_id} --upgrade)"
            for floor in profile.framework.lock_floors
            if floor.package in locked and Version(locked[floor.package]) < Version(floor.version)]


def profile_of(lock: Lock, matrix: Matrix) -> Profile | None:
    """The profile ``lock`` belongs to (its id less the platform suffix is a profile name), or None when the matrix
    has none."""
    platform = lock.header.oci_platform
    try:
        profile = resolve_profile(lock.header.lock_id.removesuffix(platform_suffix(platform)), matrix)
    except ImagectlError:
        return None
    return profile if profile_lock_id(profile, platform) == lock.header.lock_id else None


def same_version(filename: str, version: str) -> bool:
    """Whether the wheel or sdist ``filename`` is of ``version`` (pure; a name that is neither: False)."""
    try:
        found = (parse_wheel_filename(filename)[1] if filename.endswith(".whl")
                 else parse_sdist_filename(filename)[1])
        return found == Version(version)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return False


def yanked_problems(lock: Lock, settings: IndexSettings = DEFAULT_SETTINGS) -> list[str]:
    """The locked files the lock's index marks yanked (one request per package, each within the ``[pip] timeout``
    of ``settings``); raises nothing: an index that cannot be read is a problem line too.  A file is the locked one
    when its listed sha256 is one of the lock's; an index that lists files without a sha256 (a static folder) is
    matched by the version in the file name, and the line says so."""
    def one(pkg) -> list[str]:
        try:
            files = project_files(lock.header.index, pkg.name, settings=settings)
        except ImagectlError as exc:
            return [f"{pkg.name}: cannot read the index: {exc}"]
        hashes = set(pkg.hashes)
        out = []
        for f in files:
            if not f.yanked:
                continue
            listed = f.hashes.get("sha256")
            if listed is not None and listed not in hashes:
                continue
            if listed is None and not same_version(f.filename, pkg.version):
                continue
            out.append(f"{pkg.name}=={pkg.version}: {f.filename} is yanked"
                       + (f" ({f.yanked_reason})" if f.yanked_reason else "")
                       + (" (the index lists it without a sha256: matched by version)" if listed is None else ""))
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        return [line for lines in pool.map(one, lock.packages) for line in lines]


def check_files(paths: Iterable[Path], matrix: Matrix, yanked: bool = True, *,
                index_timeout: float | None = None) -> list[Problem]:
    """Every problem of the lock files at ``paths`` (the index read with ``index_timeout``, the ``[pip] timeout``,
    per request)."""
    out = []
    for path in paths:
        try:
            lock = read_lock(path)
        except ImagectlError as exc:
            out.append(Problem(str(path), str(exc)))
            continue
        if path.name != f"{lock.header.lock_id}.txt":
            out.append(Problem(str(path), f"the file is named {path.name}, its header says {lock.header.lock_id}"))
        profile = profile_of(lock, matrix)
        if profile is None:
            out.append(Problem(str(path), f"{lock.header.lock_id} names no profile of the matrix"))
            continue
        out += [Problem(str(path), line) for line in input_problems(lock, profile) + floor_problems(lock, profile)]
        if yanked:
            out += [Problem(str(path), line) for line in yanked_problems(lock, index_settings(index_timeout))]
    return out


def missing_locks(profiles: Sequence[Profile], config: Config) -> list[Problem]:
    """A problem for each PyPI-default profile of ``profiles`` (installing from the framework's PyPI index) and
    each platform of its build whose build would find no lock file (shipped or the team's)."""
    missing: dict[str, str] = {}  # lock id -> the lock command's arguments
    for profile in profiles:
        index = index_url(profile, config)
        if not profile.variant.pypi or index != profile.framework.pypi_index_url:
            continue
        for platform in profile.platforms:  # every platform its index has CUDA wheels for
            if not find_lock(profile, config, index, platform):
                missing.setdefault(profile_lock_id(profile, platform),
                                   profile_lock_id(profile) + (f" --platform {platform}" if platform_suffix(platform)
                                                               else ""))
    shipped_locks = shipped.shipped_dir("matrices") / LOCKS
    return [Problem(i, f"no lock (make it: IMAGECTL_PATHS_LOCKS={shipped_locks} imagectl lock {missing[i]})")
            for i in sorted(missing)]
