"""Making a profile's lock, and choosing the lock a build installs.

A lock is made in two steps.  :func:`lock_request` decides *what* to resolve: the profile's inputs
(:func:`~.target.lock_inputs`), its target and the ``--as-of`` policy turned into a date (``release`` asks the
index for the release's upload day).  :func:`resolve_lock` resolves that request and writes the header that is
the lock's source; it reads nothing but the request and the index.

:func:`lock_for_build` is what ``build``, ``render`` and ``--plan`` use: the lock found in a lock directory
(:mod:`.store`), else one made at build time (the build says so, and the image keeps the lock it installed, as
every image does).  A build-time lock is cached (:mod:`imagectl.cache`) under its request, which holds the
resolved *date*: the same request gives the same lock, because the index's files of a past day do not change.
A date that is today or later (inside a release's grace window), ``latest`` or ``none`` (an index without upload
times: see :mod:`.asof`) is not over yet, so such a lock is resolved afresh and never stored.

Security floors (``[lock] floors`` of the matrix: a package at a version or later, each with its advisory) are applied
after the as-of date: a resolution that locks a floored package below its floor is resolved once more with that
package at its floor, taken as of the floor release's own upload day (uv's ``--exclude-newer-package``), and every
other package preferred as it was; the header's ``floors:`` line says which floor lifted which package.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Literal

from packaging.version import Version

from ..cache import Kind, cached
from ..config import Config
from ..errors import OperationError
from ..matrix.model import Profile
from .asof import resolve_as_of, upload_date
from .layers import layer_of
from .lockfile import (DEFAULT_PLATFORM, UNDATED, Lock, LockedPackage, LockHeader, canonical_name, oci_platform,
                       parse_lock, platform_suffix)
from .resolve import ResolveError, resolve
from .store import LockOrigin, find_lock
from .target import Target, build_tag, lock_inputs, profile_lock_id, target_for

SOURCE = "resolved by uv pip compile from the index's metadata (no wheel downloaded); remake: imagectl lock {name}"
BUILD_TIME: Literal["build-time"] = "build-time"
BUILD_TIME_LOCKS: Kind[Lock] = Kind("lock", lambda lock: lock.text, lambda text: parse_lock(text, "cached lock"))


@dataclass(frozen=True)
class ChosenLock:
    """The lock a build installs and where it came from: ``team`` or ``shipped`` (a file, ``path``), or
    ``build-time`` (resolved for this build)."""

    lock: Lock
    origin: LockOrigin | Literal["build-time"]
    path: str = ""


@dataclass(frozen=True)
class LockRequest:
    """Everything a resolution reads besides the index's answers (no credential: the index URLs are the public
    ones; the secret ones go to the resolver from the :class:`~.target.Target`).  ``as_of`` is a resolved date
    (``YYYY-MM-DD``) or ``latest``; ``first_layer`` the pinned inputs of the first install layer, resolved first
    as of their own upload day (see :func:`first_layer_as_of`)."""

    framework: str
    version: str
    build: str
    python: str
    lock_id: str
    inputs: tuple[str, ...]
    first_layer: tuple[str, ...]
    first_layer_name: str
    index: str
    extra_indexes: tuple[str, ...]
    trusted_hosts: tuple[str, ...]
    platform: str
    as_of: str
    as_of_note: str
    grace_days: int
    # the matrix's security floors: (package, version, the day it was uploaded, the advisory)
    floors: tuple[tuple[str, str, str, str], ...] = ()

    def settled(self, today: dt.date) -> bool:
        """Whether the resolution can no longer change: its date is a day before ``today`` (UTC), so the index
        holds every file it will ever hold for it."""
        return self.as_of not in UNDATED and self.as_of < today.isoformat()

    def key(self) -> dict[str, object]:
        """The request as plain data: the cache key of its lock."""
        return asdict(self)


def first_layer_inputs(profile: Profile, inputs: tuple[str, ...]) -> list[str]:
    """The pinned inputs that go to the framework's first install layer (the CUDA libraries' wheels)."""
    layers = profile.framework.layers
    return [r for r in inputs
            if "==" in r and len(layers) > 1 and layer_of(requirement_name(r), layers) == layers[0][0]]


def requirement_name(requirement: str) -> str:
    """``nvidia-nccl-cu12`` of ``nvidia-nccl-cu12==2.20.5`` (or of ``name[extra]==v``), canonical."""
    return canonical_name(requirement.split("[", 1)[0].split("==", 1)[0])


def first_layer_as_of(target: Target, inputs: tuple[str, ...], grace_days: int, ceiling: str) -> str | None:
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


def lock_request(profile: Profile, config: Config, as_of: str | None, target: Target) -> LockRequest:
    """What to resolve for ``profile`` as of the policy ``as_of`` (default ``[lock] as_of``, which falls back to no
    cut-off on an index without upload times: see :mod:`.asof`), the date resolved; raises InputError for a bad
    policy, OperationError when ``release`` cannot read the release's upload day."""
    when = resolve_as_of(as_of or config.lock_as_of, profile, target, config.lock_grace_days, fallback=as_of is None)
    platform = oci_platform(target.platform)
    inputs = lock_inputs(profile, platform)
    return LockRequest(
        framework=profile.framework.name, version=profile.release.version, build=build_tag(profile),
        python=profile.python, lock_id=profile_lock_id(profile, platform), inputs=inputs,
        first_layer=tuple(first_layer_inputs(profile, inputs)), first_layer_name=profile.framework.layers[0][0],
        index=target.index, extra_indexes=target.extra_indexes, trusted_hosts=target.trusted_hosts,
        platform=target.platform, as_of=when.date, as_of_note=when.note, grace_days=config.lock_grace_days,
        floors=tuple((f.package, f.version, f.uploaded, f.source) for f in profile.framework.lock_floors))


def below_floors(packages: list[LockedPackage], request: LockRequest) -> dict[str, str]:
    """name -> locked version of each package of ``packages`` below its security floor (pure)."""
    floors = {name: version for name, version, _, _ in request.floors}
    return {p.name: p.version for p in packages if p.name in floors and Version(p.version) < Version(floors[p.name])}


def lift_floors(packages: list[LockedPackage], request: LockRequest, target: Target) -> tuple[list[LockedPackage], str]:
    """``packages`` (resolved as of the request's date) with every package below its security floor lifted to the
    floor, as of the floor release's upload day, the rest preferred as they were; and the header's ``floors:`` line
    ("" when no floor applied).  Raises ResolveError/OperationError (resolver, index)."""
    low = below_floors(packages, request)
    if not low:
        return packages, ""
    floors = [f for f in request.floors if f[0] in low]
    lifted_target = replace(target, exclude_newer_packages=tuple(f"{name}={day}" for name, _, day, _ in floors))
    kept = [p for p in packages if p.name not in low]
    lifted = resolve(request.inputs, lifted_target, request.as_of,
                     constraints=[f"{name}>={version}" for name, version, _, _ in floors], prefer=kept)
    now = {p.name: p.version for p in lifted}
    line = "; ".join(f"{name} {low[name]} -> {now.get(name, 'none')} ({source})" for name, _, _, source in floors)
    return lifted, line


def remake_arguments(request: LockRequest) -> str:
    """What ``imagectl lock`` is given to make the lock again: its id, and the platform when not linux/amd64."""
    platform = oci_platform(request.platform)
    if platform == DEFAULT_PLATFORM:
        return request.lock_id
    return f"{request.lock_id.removesuffix(platform_suffix(platform))} --platform {platform}"


def resolve_lock(request: LockRequest, target: Target, prefer: Lock | None = None) -> Lock:
    """Resolve ``request`` against ``target``'s indexes, keeping the versions of ``prefer`` where they still fit;
    raises ResolveError/OperationError (resolver, index).

    With a date and no preferred lock, the first install layer (the CUDA wheels) is resolved first, as of its
    pins' own upload day (:func:`first_layer_as_of`), and its versions are preferred in the whole resolution: the
    CUDA layer depends on the CUDA pins alone, not on the framework release's date."""
    preferred = list(prefer.packages) if prefer else []
    note = request.as_of_note
    if request.first_layer and request.as_of not in UNDATED and not preferred:
        day = first_layer_as_of(target, request.first_layer, request.grace_days, request.as_of)
        try:
            preferred = resolve(request.first_layer, target, day) if day is not None else []
        except ResolveError as exc:  # the index lacks what that day had: the layer is resolved with the rest
            if not exc.unsatisfiable:
                raise
        if preferred:
            note = "; ".join(filter(None, [note, f"{request.first_layer_name} layer as of {day}: its pins' upload, "
                                                 f"plus {request.grace_days} days"]))
    packages, floors = lift_floors(resolve(request.inputs, target, request.as_of, prefer=preferred), request, target)
    header = LockHeader(framework=request.framework, version=request.version, build=request.build,
                        python=request.python, index=request.index, platform=request.platform, as_of=request.as_of,
                        as_of_note=note, inputs=request.inputs, source=SOURCE.format(name=remake_arguments(request)),
                        floors=floors)
    return Lock(header, tuple(packages))


def make_lock(profile: Profile, config: Config, as_of: str | None = None, prefer: Lock | None = None,
              target: Target | None = None) -> Lock:
    """Resolve ``profile``'s lock as of ``as_of`` (a policy; default ``[lock] as_of``), keeping the versions of
    ``prefer`` where they still fit; raises ResolveError/OperationError (resolver, index), InputError (policy)."""
    target = target or target_for(profile, config)
    return resolve_lock(lock_request(profile, config, as_of, target), target, prefer)


def today_utc() -> dt.date:
    """Today's date in UTC (the day the index's upload times are counted in)."""
    return dt.datetime.now(dt.timezone.utc).date()


def lock_for(profile: Profile, platform: str, config: Config, log: Callable[[str], None] = lambda line: None,
             today: Callable[[], dt.date] = today_utc) -> ChosenLock:
    """The lock a build of ``profile`` for the OCI ``platform`` (``linux/arm64``) installs: :func:`lock_for_build`
    for that platform.  Raises InputError for a platform the build has no CUDA wheels for (:attr:`Profile.platforms`),
    a lock file that cannot be read or a bad policy, OperationError when the index or the resolver fails."""
    return lock_for_build(profile, config, log, today, platform=platform)


def lock_for_build(profile: Profile, config: Config, log: Callable[[str], None] = lambda line: None,
                   today: Callable[[], dt.date] = today_utc, *, platform: str = DEFAULT_PLATFORM) -> ChosenLock:
    """The lock a build of ``profile`` for ``platform`` installs (see the module docstring); logs where it came
    from.  Raises InputError for a platform the build has no CUDA wheels for, a lock file that cannot be read or a
    bad policy, OperationError when the index or the resolver fails."""
    target = target_for(profile, config, platform)
    found = find_lock(profile, config, target.index, platform)
    if found is not None:
        log(f"lock {found.lock.header.lock_id} ({found.origin}: {found.path}, sha256 {found.lock.sha256[:12]})")
        return ChosenLock(found.lock, found.origin, str(found.path))
    log(f"no lock of {profile_lock_id(profile, platform)} for {target.index}: locking at build time (as of "
        f"{config.lock_as_of})")
    try:
        request = lock_request(profile, config, None, target)
        if request.as_of == "none":
            log(f"{target.index} gives no upload times: locking at the newest versions it serves (set [lock] as_of "
                "to a date to lock as of that day)")
        if request.settled(today()):
            lock = cached(BUILD_TIME_LOCKS, request.key(), lambda: resolve_lock(request, target))
        else:  # the day is not over: what the index offers may still change
            lock = resolve_lock(request, target)
    except OperationError as exc:
        where = "[pip] index_url" if config.pip_index_url else "the matrix's index of this build; [pip] index_url"
        raise OperationError(f"cannot lock {profile_lock_id(profile, platform)} against {target.index} ({where} sets "
                             f"the index): {str(exc).removeprefix('lock: ')}") from None
    log(f"locked {len(lock.packages)} packages as of {lock.header.as_of} (sha256 {lock.sha256[:12]}); the image "
        "keeps it at /opt/imagectl/lock.txt")
    return ChosenLock(lock, BUILD_TIME)
