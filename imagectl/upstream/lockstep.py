"""Packages released in lockstep with a framework, and what ``matrix sync`` says when they drift apart.

A package is in lockstep with a framework when the framework's newest release in the matrix pins it at the
framework's own version (jax 0.12.0.1: ``jaxlib``, ``jax-cuda12-plugin``, ``jax-cuda13-plugin``,
``jax-cuda13-pjrt`` = 0.12.0.1).  Two things follow, both pure here:

- a lockstep release newer than every framework release on the index (``jax-cuda13-plugin 0.12.1`` without a
  ``jax 0.12.1``) is a *notice*: nothing can be proposed for it, and sync says so in one line;
- a proposed release whose own metadata pins a lockstep package at a version the index does not publish is
  *broken* (its plugin, pjrt or jaxlib cannot be installed with it) and is not proposed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..matrix.model import Framework, Release


def lockstep_packages(fw: Framework) -> tuple[str, ...]:
    """The packages the framework's newest matrix release pins at its own version (companions and every
    variant's pins), as normalised names, sorted; () for a framework without releases."""
    if not fw.releases:
        return ()
    newest: Release = max(fw.releases, key=lambda r: Version(r.version))
    version = Version(newest.version)
    pinned = [*newest.companions, *(pin for variant in newest.variants for pin in variant.pins)]
    return tuple(sorted({canonicalize_name(name) for name, pin in pinned
                         if _same(pin, version) and canonicalize_name(name) != canonicalize_name(fw.package)}))


def _same(text: str, version: Version) -> bool:
    try:
        return Version(text) == version
    except ValueError:
        return False


def orphans(fw: Framework, framework_releases: Sequence[Version],
            published: Mapping[str, Sequence[Version]]) -> list[str]:
    """One line per lockstep release newer than every framework release on the index (final releases only):
    ``jax-cuda13-plugin 0.12.1 is on the index, but jax 0.12.1 is not: nothing proposed for it``."""
    if not framework_releases:
        return []
    newest = max(framework_releases)
    lines = []
    for name in sorted(published):
        for version in sorted(v for v in published[name] if v > newest and not v.is_prerelease and not v.is_devrelease):
            lines.append(f"{fw.name}: {name} {version} is on the index, but {fw.package} {version} is not:"
                         " nothing proposed for it")
    return lines


def unpublished_pins(version: str, pins: Iterable[tuple[str, str]], lockstep: Iterable[str],
                     published: Mapping[str, Sequence[Version]]) -> list[str]:
    """The ``name==version`` pins of a proposed release on lockstep packages (or on any package pinned at
    the release's own version) whose version the index does not publish, sorted."""
    own = Version(version)
    watched = set(lockstep)
    missing = []
    for name, pin in pins:
        key = canonicalize_name(name)
        if key not in watched and not _same(pin, own):
            continue
        if key in published and Version(pin) not in published[key]:
            missing.append(f"{key}=={pin}")
    return sorted(missing)


__all__ = ["lockstep_packages", "orphans", "unpublished_pins"]
