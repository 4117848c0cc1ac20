"""Making a profile's lock, and choosing the lock a build installs.

:func:`make_lock` resolves a profile's inputs (:func:`~.target.lock_inputs`) for its target as of the
``--as-of`` policy and writes the header that is the lock's source.  :func:`lock_for_build` is what ``build``,
``render`` and ``--plan`` use: the lock found in a lock directory (:mod:`.store`), else one made at build
time (the build says so, and the image keeps the lock it installed, as every image does).  Build-time locks
as of a date are cached: the same inputs and date give the same lock (the index's files do not change).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable

from ..cache import cached
from ..config import Config
from ..errors import OperationError
from ..matrix.model import Profile
from .asof import resolve_as_of, upload_date
from .layers import layer_of
from .lockfile import Lock, LockHeader, canonical_name
from .resolve import ResolveError, resolve
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


def first_layer_inputs(profile: Profile, inputs: tuple[str, ...]) -> list[str]:
    """The pinned inputs that go to the framework's first install layer (the CUDA libraries' wheels)."""
    layers = profile.framework.layers
    return [r for r in inputs
            if "==" in r and len(layers) > 1 and layer_of(requirement_name(r), layers) == layers[0][0]]


def requirement_name(requirement: str) -> str:
    """``nvidia-nccl-cu12`` of ``nvidia-nccl-cu12==2.20.5`` (or of ``name[extra]==v``), canonical."""
    return canonical_name(requirement.split("[", 1)[0].split("==", 1)[0])


def first_layer_as_of(profile: Profile, target: Target, inputs: list[str], grace_days: int,
                      ceiling: str) -> str | None:
    """The day the first layer's own dependencies are resolved as of: the newest upload day of its pinned
    wheels plus ``grace_days``, no later than ``ceiling``; None when the index gives no upload times.  Two
    releases with the same CUDA pins (torch 2.3.0 and 2.3.1) then lock the same unpinned CUDA wheels
    (nvidia-nvjitlink-cu12, which the pinned cusolver and cusparse require without a version): their CUDA
    layer is one layer, shared."""
    days = [upload_date(target, requirement_name(r), r.split("==", 1)[1]) for r in inputs]
    if not days or None in days:
        return None
    day = (max(d for d in days if d) + dt.timedelta(days=grace_days)).isoformat()
    return min(day, ceiling)


def make_lock(profile: Profile, config: Config, as_of: str | None = None, prefer: Lock | None = None,
              target: Target | None = None) -> Lock:
    """Resolve ``profile``'s lock as of ``as_of`` (a policy; default ``[lock] as_of``), keeping the versions of
    ``prefer`` where they still fit; raises ResolveError/OperationError (resolver, index), InputError (policy).

    With a dated policy the first install layer (the CUDA wheels) is resolved first, as of its pins' own upload
    day (:func:`first_layer_as_of`), and its versions are preferred in the whole resolution: the CUDA layer
    depends on the CUDA pins alone, not on the framework release's date."""
    target = target or target_for(profile, config)
    when = resolve_as_of(as_of or config.lock_as_of, profile, target, config.lock_grace_days)
    inputs = lock_inputs(profile)
    preferred = list(prefer.packages) if prefer else []
    note = when.note
    cuda = first_layer_inputs(profile, inputs)
    if cuda and when.date != "latest" and not preferred:
        day = first_layer_as_of(profile, target, cuda, config.lock_grace_days, when.date)
        layer = profile.framework.layers[0][0]
        try:
            preferred = resolve(cuda, target, day) if day is not None else []
        except ResolveError as exc:  # the index lacks what that day had: the layer is resolved with the rest
            if not exc.unsatisfiable:
                raise
        if preferred:
            note = "; ".join(filter(None, [note, f"{layer} layer as of {day}: its pins' upload, plus "
                                                 f"{config.lock_grace_days} days"]))
    packages = resolve(inputs, target, when.date, prefer=preferred)
    header = LockHeader(framework=profile.framework.name, version=profile.release.version, build=build_tag(profile),
                        python=profile.python, index=target.index, platform=target.platform, as_of=when.date,
                        as_of_note=note, inputs=inputs, source=SOURCE.format(name=profile_lock_id(profile)))
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
