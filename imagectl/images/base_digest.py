"""Resolving a profile's base image to a digest before building: from the team's copy when it holds one (see
:mod:`imagectl.bases`), else through the configured mirror.

With ``[registry] url`` set and the team copy's tag present (``imagectl bases sync`` wrote it), the build pulls the
base from the team copy, pinned to the digest that tag names, and warns when the upstream tag has moved on (a rebuild
with fixes: ``bases sync`` takes it) or is gone, or upstream cannot be asked.  Without a team copy the digest is what
the upstream tag names now (one request through the mirror), else the engine's copy of the image.  A base already
pinned to a digest (``rebuild`` from an image's labels) is pulled from the team copy when that holds the digest.
The build key is the same wherever the base is pulled from (:func:`~imagectl.images.plan.plan_build`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..bases.custody import TeamPin, team_pin
from ..bases.naming import public_of, team_copy
from ..config import Config
from ..engine import Engine
from ..errors import BuildError, ImagectlError
from ..reference import Reference
from ..registry.access import client_for
from ..tags.naming import short_digest


@dataclass(frozen=True)
class ResolvedBase:
    """A base pinned for a build: its ``digest``, the team copy it is pulled from (``source``, tagged; None: as
    named, through the mirrors) and the warnings a build shows about it (``notes``)."""

    digest: str
    source: Reference | None = None
    notes: tuple[str, ...] = ()


def resolve_base_digest(base: Reference, config: Config, engine: Engine) -> ResolvedBase:
    """Pin ``base`` (as pulled: through the mirrors) for a build (see the module docstring).  Raises BuildError
    when neither the team copy, its registry, nor the engine knows it."""
    if base.digest:
        return resolve_pinned_base(base, base.digest, config)
    public = public_of(base, config.mirrors)
    pin = team_pin(public, config)
    registry_error: ImagectlError | None = None
    try:
        with client_for(base.domain, config.insecure_hosts, config.registry_timeout) as client:
            digest = client.head_manifest(base.path, base.tag or "latest")
    except ImagectlError as exc:
        digest, registry_error = None, exc
    if pin is not None and pin.pinned:
        return ResolvedBase(pin.pinned, pin.team, custody_notes(public, pin, digest, registry_error))
    notes = (f"base {public.familiar}: the team copy {pin.team} cannot be read ({pin.error})",) \
        if pin is not None and pin.error else ()
    if digest:
        return ResolvedBase(digest, notes=notes)
    known = engine_digest(base, engine)
    if known:
        return ResolvedBase(known, notes=notes)
    why = f": {registry_error}" if registry_error else " (its registry has no such tag)"
    raise BuildError(f"base image {base} cannot be resolved to a digest{why}; {mirror_hint(base, config)}", "base")


def resolve_pinned_base(base: Reference, digest: str, config: Config) -> ResolvedBase:
    """``base`` (as pulled) pinned to ``digest`` (``rebuild``'s labelled base, a ``--base`` named by digest): from
    the team copy when the team registry holds that digest (one HEAD), so it still builds after upstream deleted it;
    else as named.  Raises nothing of imagectl's own: a team registry that cannot be read is a note."""
    public = public_of(base, config.mirrors)
    team = team_copy(public, config)
    if team is None:
        return ResolvedBase(digest)
    try:
        with client_for(team.domain, config.insecure_hosts, config.registry_timeout) as client:
            held = client.head_manifest(team.path, digest) is not None
    except ImagectlError as exc:
        return ResolvedBase(digest, notes=(f"base {public.familiar}: the team copy {team} cannot be read ({exc})",))
    return ResolvedBase(digest, team if held else None)


def custody_notes(public: Reference, pin: TeamPin, upstream: str | None,
                  error: ImagectlError | None) -> tuple[str, ...]:
    """The warning of a build that takes ``public`` from its team copy ``pin`` while upstream names ``upstream``
    (None: no such tag, or ``error``) (pure)."""
    pinned = short_digest(pin.pinned or "")
    if error is not None:
        return (f"base {public.familiar}: upstream cannot be asked ({error}); building from the team copy "
                f"({pinned})",)
    if upstream is None:
        return (f"base {public.familiar} is gone upstream; building from the team copy ({pinned})",)
    if upstream != pin.pinned:
        return (f"base {public.familiar} moved upstream (now {short_digest(upstream)}; the team copy pins {pinned}): "
                "building from the team copy; 'imagectl bases sync' takes the new one",)
    return ()


def engine_digest(base: Reference, engine: Engine) -> str | None:
    """The repo digest the engine's copy of ``base`` has under its own name, if any."""
    info = engine.inspect(str(base))
    for repo_digest in info.repo_digests if info else ():
        name, _, digest = repo_digest.partition("@")
        if name in (base.repository, base.familiar.split(":")[0]):
            return digest
    return None


def mirror_hint(base: Reference, config: Config) -> str:
    """How to point the build at a reachable copy of ``base``'s registry: the mirror it went through, or the
    settings that set one."""
    mirrored = next((domain for domain, prefix in config.mirrors.items()
                     if str(base).startswith(prefix.rstrip("/") + "/")), None)
    if mirrored:
        return (f"it was pulled through the mirror of {mirrored} ([mirrors] in imagectl.toml or IMAGECTL_MIRRORS): "
                "check that the mirror is up and holds the image")
    return (f"if {base.domain} is not reachable from here, mirror it: [mirrors] \"{base.domain}\" = "
            "\"mirror.example.com/prefix\" in imagectl.toml, or IMAGECTL_MIRRORS")
