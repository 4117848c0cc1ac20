"""Advisories over the locks and profiles: which findings a lock or a profile carries, which profile is the nearest
one its framework's advisories do not mark."""

from __future__ import annotations

from typing import Sequence

from packaging.version import Version

from ..config import Config
from ..lock.lockfile import canonical_name
from ..lock.store import find_lock
from ..matrix.model import Profile
from ..pip_index import index_url
from .match import Finding, affects
from .record import SEVERITIES
from .snapshot import Advisories


def profile_versions(profile: Profile, config: Config) -> dict[str, str]:
    """The package versions a build of ``profile`` installs: its lock file's, or where the build locks at build
    time, the matrix's pins (the framework, its companions, the CUDA wheels); raises InputError for a lock file that
    cannot be read."""
    found = find_lock(profile, config, index_url(profile, config))
    return dict(found.lock.versions) if found else {canonical_name(n): v for n, v in profile.packages}


def profile_findings(profile: Profile, config: Config, known: Advisories) -> list[Finding]:
    """The advisories of the packages a build of ``profile`` installs (see :func:`profile_versions`)."""
    return known.findings(profile_versions(profile, config))


def worst_first(found: Sequence[Finding], framework: str = "") -> list[Finding]:
    """``found`` by severity (critical first), the framework package's first within one severity, then by id."""
    def key(f: Finding) -> tuple[int, bool, str]:
        return (-SEVERITIES.index(f.severity) if f.severity else 1, f.package != framework, f.id)

    return sorted(found, key=key)


def framework_affected(profile: Profile, known: Advisories) -> bool:
    """Whether an advisory marks the framework release of ``profile`` itself (no floor can lift it)."""
    package, version = canonical_name(profile.framework.package), Version(profile.release.version)
    return any(affects(part, version) for adv in known.by_package.get(package, ()) for part in adv.affected
               if part.package == package)


def nearest_unaffected(profile: Profile, listed: Sequence[Profile], known: Advisories) -> Profile | None:
    """The profile of ``listed`` with the lowest framework release above ``profile``'s that no advisory of the
    framework package marks (the same CUDA major preferred), or None."""
    above = [p for p in listed if p.framework.name == profile.framework.name
             and Version(p.release.version) > Version(profile.release.version) and not framework_affected(p, known)]
    major = profile.toolkit.version.split(".")[0]
    return min(above, key=lambda p: (Version(p.release.version), p.toolkit.version.split(".")[0] != major),
               default=None)
