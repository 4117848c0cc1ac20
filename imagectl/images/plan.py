"""A build, planned once: one :class:`BuildRequest` in, one :class:`Plan` out, and the same plan serves ``render``,
``build --plan`` and ``build``.

Planning resolves what the request leaves open, in this order: the lock (:func:`~imagectl.lock.make.lock_for_build`)
and the extras' closure on top of it (so a conflicting extra is refused before a registry or an engine is asked),
the base image's digest (one HEAD, and one at the team's copy of the base: a build pulls the base from there when
the team holds it, see :mod:`imagectl.bases`; ``render`` skips both), then the build context (rendered once, with
the pip netrc of index credentials computed once and kept apart from the files), the added context files and the
build key.  Nothing downstream derives any of it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..bases.eol import end_of_life
from ..config import Config
from ..engine.features import picks_buildah
from ..image_spec import ImageSpec
from ..lock.extras import lock_extras
from ..lock.lockfile import Lock
from ..lock.make import ChosenLock, lock_for_build
from ..lock.target import target_for
from ..matrix.model import AMD64, Profile
from ..reference import Reference, parse_reference
from ..render.context import NETRC_FILE
from ..render.dockerfile import context_files
from ..tags.naming import repository
from .base_digest import ResolvedBase
from .build_key import build_key
from .system_lock import check_system_base, with_system_lock
from .context_files import context_files_on_disk, file_digests
from .trace import Trace

# A base image (as pulled) pinned for a build: a ResolvedBase (maybe from the team's copy, with warnings), or a bare
# manifest digest (pulled as named; "" for none); raises BuildError
DigestOf = Callable[[Reference], "ResolvedBase | str"]


@dataclass(frozen=True)
class BuildOptions:
    """What the user asked of every profile of one ``build`` (validated by the CLI; never a secret)."""

    extras: tuple[str, ...] = ()
    base: str | None = None  # build --base, as written: layer the extras on this image instead of the profile's base
    suffix: str | None = None  # repository suffix for images with extras (default: x + hash of the extras)
    force: bool = False
    no_cache: bool = False
    gpu_check: bool = False


@dataclass(frozen=True)
class BuildRequest:
    """One profile to build with the options of its build."""

    profile: Profile
    options: BuildOptions = BuildOptions()
    platforms: tuple[str, ...] = (AMD64,)  # one image each; several: an OCI image index of them
    moves_latest: bool = True  # False: one platform of several (--platform), an image for `imagectl index`

    @property
    def repository_name(self) -> str:
        """The profile's name, or ``PROFILE-SUFFIX`` when extras are layered in (so a team's variant never moves
        the profile's own moving tag)."""
        extras, base = self.options.extras, self.options.base
        if not extras:
            return self.profile.name
        digest = hashlib.sha256("\n".join(sorted(extras) + [base or ""]).encode()).hexdigest()
        return f"{self.profile.name}-{self.options.suffix or 'x' + digest[:8]}"


@dataclass(frozen=True)
class Plan:
    """A planned build: what the image holds, the rendered context (``files``, no secret among them) with the
    team's added files (and their sha256), the build key and the repository.  ``netrc`` is the pip netrc of index
    credentials, held apart: it reaches the build context only (:meth:`context`), never a cache, a label or
    output."""

    request: BuildRequest
    spec: ImageSpec
    lock: ChosenLock
    files: Mapping[str, bytes]
    added: Mapping[str, Path]
    added_digests: Mapping[str, str]
    key: str
    repository: Reference
    netrc: bytes = field(default=b"", repr=False)
    notes: tuple[str, ...] = ()  # warnings about the base (end of life, moved or gone upstream), as build shows them
    platform: str = AMD64  # the OCI platform of the image (its lock is that platform's)

    def context(self) -> dict[str, bytes]:
        """Every file of the build context, the netrc of index credentials included."""
        return {**self.files, NETRC_FILE: self.netrc} if self.netrc else dict(self.files)

    @property
    def source_date_epoch(self) -> int:
        """Every timestamp of the image: see :func:`source_date_epoch`."""
        return source_date_epoch(self.lock.lock)


SOURCE_DATE_EPOCH = 0
"""Every timestamp of every image (layers, config, history): one constant, from no clock.  Not the lock's as-of date:
profiles that share a layer's inputs (torch 2.3.0 and 2.3.1 pin the same CUDA wheels) must get one digest for that
layer, and a per-lock date would stamp their file mtimes differently (buildah ``--timestamp``) and change the build
arg that Docker's layer cache keys on.  The dates an image was built from live in its labels and its lock."""


def source_date_epoch(lock: Lock) -> int:
    """The image's SOURCE_DATE_EPOCH: :data:`SOURCE_DATE_EPOCH`, whatever the lock (see there why)."""
    return SOURCE_DATE_EPOCH


def no_digest(base: Reference) -> str:
    """A base resolver that resolves nothing: ``render`` renders the base as the matrix names it."""
    return ""


def base_eol_notes(spec: ImageSpec) -> tuple[str, ...]:
    """The warning of a build on a base whose CUDA release is past end of life (none on a user's base) (pure)."""
    toolkit = spec.profile.toolkit
    if spec.on_user_base or not toolkit.end_of_life:
        return ()
    return (f"base {spec.public_base.familiar}: {end_of_life(toolkit).line()} (see 'imagectl bases status')",)


def pushed_compression(config: Config) -> str:
    """The compression of the layers a build with ``config`` pushes: ``[registry] compression`` on buildah (which
    compresses the system layers so, and the assembled layers are written so), gzip on Docker (which pushes gzip
    whatever is asked)."""
    return config.registry_compression if picks_buildah(config.build_engine) else "gzip"


def plan_build(request: BuildRequest, config: Config, digest_of: DigestOf, trace: Trace,
               platform: str | None = None) -> Plan:
    """Plan ``request`` for ``platform`` (default: its first) (see the module docstring), logging and timing the
    phases ``resolve``, ``lock`` and ``render`` into ``trace``.

    Raises BuildError when the base cannot be resolved, ExtrasConflictError for an extra that names a locked
    package at another version, InputError (a bad template, an extra the lock cannot take, a lock file that
    cannot be read), OperationError (the index or the resolver)."""
    profile, options = request.profile, request.options
    platform = platform or request.platforms[0]
    user_base = parse_reference(options.base) if options.base else None
    wanted = ImageSpec(profile, extras=options.extras, user_base=user_base,
                       title=request.repository_name if options.extras else None)
    base = wanted.pulled_base(config.mirrors)
    trace.log(f"base image {base}")
    with trace.timed("lock"):  # first: a conflicting extra is refused before any registry or engine is asked
        chosen = lock_for_build(profile, config, trace.log, platform=platform)
        closure = (lock_extras(options.extras, chosen.lock, target_for(profile, config, platform))
                   if options.extras else ())
        locked = with_system_lock(replace(wanted, lock=chosen.lock, extras_lock=closure), config, platform, trace.log)
        if options.extras:
            added = sorted(f"{name}=={version}" for name, version in locked.added.items())
            trace.log(f"extras locked on top of the lock: {', '.join(added) or 'nothing new'}")
    with trace.timed("resolve"):
        answer = digest_of(base)
        resolved = answer if isinstance(answer, ResolvedBase) else ResolvedBase(answer)
        digest = resolved.digest
        spec = replace(locked, base_digest=digest or None, base_source=resolved.source)
        check_system_base(spec)  # a system lock's versions were chosen against one base digest
        notes = (*base_eol_notes(spec), *resolved.notes)
        if resolved.source is not None:
            trace.log(f"base image from the team's copy: {spec.pulled_base(config.mirrors)}")
        for note in notes:
            trace.log(f"warning: {note}")
    with trace.timed("render"):
        files = context_files(spec, config)
        added_files = context_files_on_disk(config.context_dirs)
        digests = file_digests(added_files)
        # the key is the same wherever the base is pulled from: the context as if pulled through the mirrors
        key_files = context_files(replace(spec, base_source=None), config) if spec.base_source else files
        key = build_key(key_files, digest, config.build_args, digests, compression=pushed_compression(config))
    netrc = files.pop(NETRC_FILE, b"")
    return Plan(request, spec, chosen, files, added_files, digests, key,
                repository(request.repository_name, config), netrc, notes=notes, platform=platform)
