"""Resolving a profile's base image to a digest before building, through the configured mirror."""

from __future__ import annotations

from ..config import Config
from ..errors import BuildError, ImagectlError
from ..reference import Reference
from ..engine import Engine
from ..registry.access import client_for


def resolve_base_digest(base: Reference, config: Config, engine: Engine) -> str:
    """The manifest digest of ``base`` (already mirrored): asked of its registry with one HEAD, else
    taken from the engine's copy of the image.  Raises BuildError when neither knows it.
    """
    if base.digest:
        return base.digest
    registry_error: ImagectlError | None = None
    try:
        with client_for(base.domain, config.insecure_hosts, config.registry_timeout) as client:
            digest = client.head_manifest(base.path, base.tag or "latest")
        if digest:
            return digest
    except ImagectlError as exc:
        registry_error = exc
    info = engine.inspect(str(base))
    for repo_digest in info.repo_digests if info else ():
        name, _, digest = repo_digest.partition("@")
        if name in (base.repository, base.familiar.split(":")[0]):
            return digest
    why = f": {registry_error}" if registry_error else " (its registry has no such tag)"
    raise BuildError(f"base image {base} cannot be resolved to a digest{why}; {mirror_hint(base, config)}", "base")


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
