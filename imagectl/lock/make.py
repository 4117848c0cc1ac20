"""Making a profile's lock, and choosing the lock a build installs.

:func:`make_lock` resolves a profile's inputs (:func:`~.target.lock_inputs`) for its target as of the
``--as-of`` policy and writes the header that is the lock's source.  :func:`lock_for_build` is what ``build``,
``render`` and ``--plan`` use: the lock found in a lock directory (:mod:`.store`), else one made at build
time (the build says so, and the image keeps the lock it installed, as every image does).  Build-time locks
as of a date are cached: the same inputs and date give the same lock (the index's files do not change).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..cache import cached
from ..config import Config
from ..errors import OperationError
from ..matrix.model import Profile
from .asof import resolve_as_of
from .lockfile import Lock, LockHeader
from .resolve import resolve
from .store import find_lock
from .target import Target, build_tag, lock_inputs, profile_lock_id, target_for

SOURCE = "resolved by uv pip compile from the index's metadata (no wheel downloaded); remake: imagectl lock {name}"


@dataclass(frozen=True)
class ChosenLock:
    """The lock a build installs and where it came from: ``team`` or ``shipped`` (a file, ``path``), or
    ``build-time`` (resolved for this build)."""

    lock: Lock
    origin: str
    path: str = ""


def make_lock(profile: Profile, config: Config, as_of: str | None = None, prefer: Lock | None = None,
              target: Target | None = None) -> Lock:
    """Resolve ``profile``'s lock as of ``as_of`` (a policy; default ``[lock] as_of``), keeping the versions of
    ``prefer`` where they still fit; raises ResolveError/OperationError (resolver, index), InputError (policy)."""
    target = target or target_for(profile, config)
    when = resolve_as_of(as_of or config.lock_as_of, profile, target, config.lock_grace_days)
    inputs = lock_inputs(profile)
    packages = resolve(inputs, target, when.date, prefer=prefer.packages if prefer else ())
    header = LockHeader(framework=profile.framework.name, version=profile.release.version, build=build_tag(profile),
                        python=profile.python, index=target.index, platform=target.platform, as_of=when.date,
                        as_of_note=when.note, inputs=inputs, source=SOURCE.format(name=profile_lock_id(profile)))
    return Lock(header, tuple(packages))


def lock_for_build(profile: Profile, config: Config, log: Callable[[str], None] = lambda line: None) -> ChosenLock:
    """The lock a build of ``profile`` installs (see the module docstring); logs where it came from."""
    target = target_for(profile, config)
    found = find_lock(profile, config, target.index)
    if found is not None:
        log(f"lock {found.lock.header.lock_id} ({found.origin}: {found.path}, sha256 {found.lock.sha256[:12]})")
        return ChosenLock(found.lock, found.origin, str(found.path))
    policy = config.lock_as_of
    log(f"no lock of {profile_lock_id(profile)} for {target.index}: locking at build time (as of {policy})")

    def compute() -> Lock:
        return make_lock(profile, config, policy, target=target)

    try:
        if policy == "latest":  # what the index offers now: never from the cache
            lock = compute()
        else:
            lock = cached("lock", [], compute,
                          extra=repr((lock_inputs(profile), target, policy, config.lock_grace_days)))
    except OperationError as exc:
        where = "[pip] index_url" if config.pip_index_url else "the matrix's index of this build; [pip] index_url"
        raise OperationError(f"cannot lock {profile_lock_id(profile)} against {target.index} ({where} sets the "
                        f"index): {str(exc).removeprefix('lock: ')}") from None
    log(f"locked {len(lock.packages)} packages as of {lock.header.as_of} (sha256 {lock.sha256[:12]}); the image "
        "keeps it at /opt/imagectl/lock.txt")
    return ChosenLock(lock, "build-time")
