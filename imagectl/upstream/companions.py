"""Which companion release goes with a framework release, as an index publishes them.

A companion release *pins* a framework release when its metadata requires exactly that version
(``torch==2.9.1``); it *admits* one when its requirement on the framework has a specifier that the version
satisfies (``torch>=2.14.0`` admits 2.15.0) without pinning it.  torchvision 0.29.1 and later and torchaudio
2.11.1 state only floors, so a rule that accepted pins alone never matched them.  A pin wins over an
admission; of the releases that admit, the newest does (the one pip would install with the framework).  A
release that does not name the framework at all (torchaudio 2.11.0), or names it without a specifier, says
nothing and is never taken.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from ..errors import PackageIndexError
from .index_builds import IndexReader, applicable, exact_version, find_build, requirements_on, wheel_candidates, \
    yanked_reason

MAX_COMPANION_READS = 40  # companion releases whose metadata is read while looking for one release's match

Relation = Literal["pins", "admits"]


@dataclass(frozen=True)
class CompanionMatch:
    """A companion release found for a framework release, and why it goes with it."""

    name: str
    version: str
    relation: Relation
    requirement: str  # the companion's requirement on the framework, verbatim ("torch>=2.14.0")

    @property
    def note(self) -> str:
        """One line for a proposal: what the companion requires and that it is not a pin (empty for a pin)."""
        if self.relation == "pins":
            return ""
        return (f"{self.name} {self.version} requires {self.requirement} (admits the release; not an == pin:"
                " the newest such release on the index)")


def relation(requirements: Iterable[Requirement], package: str, version: str) -> tuple[Relation | None, str]:
    """How requirements (already evaluated for the platform) relate to ``package==version``: ``pins`` (an
    exact pin of that version, ``2.15`` equal to ``2.15.0``), ``admits`` (every requirement on ``package``
    has a specifier and all hold for it), else None; with the requirements verbatim.  Never raises."""
    on = requirements_on(requirements, package)
    text = "; ".join(f"{r.name}{r.specifier}" for r in on)
    try:
        target = Version(version)
    except InvalidVersion:
        return None, text
    pins = [Version(Version(p).public) for r in on if (p := exact_version(r)) is not None]
    if target in pins:
        return "pins", text
    if on and not pins and all(str(r.specifier) and r.specifier.contains(target, prereleases=True) for r in on):
        return "admits", text
    return None, text


def _pinned_below(requirements: Iterable[Requirement], package: str, version: str) -> bool:
    """Whether the requirements pin ``package`` exactly, below ``version`` (older companions pin older ones)."""
    pins = [Version(p) for r in requirements_on(requirements, package) if (p := exact_version(r)) is not None]
    return bool(pins) and max(pins) < Version(version)


def published_versions(builds: dict) -> list[Version]:
    """The unlabelled releases of a project with a usable wheel that are not entirely yanked."""
    return [version for (version, label), files in builds.items()
            if not label and wheel_candidates(files) and yanked_reason(files) is None]


def find_companion(package: str, name: str, version: str, since: str | None,
                   reader: IndexReader) -> tuple[CompanionMatch | None, str]:
    """The release of companion ``name`` that goes with ``package==version`` (see the module docstring), or
    None and why not.  Reads releases newer than ``since`` newest first (at most MAX_COMPANION_READS), and stops
    at one that pins an older framework release.  An index error is a reason, never raised."""
    try:
        builds = reader.project(name)
    except PackageIndexError as exc:
        return None, str(exc)
    floor = Version(since) if since else None
    candidates = sorted((v for v in published_versions(builds) if floor is None or v > floor), reverse=True)
    admitting: CompanionMatch | None = None
    for candidate in candidates[:MAX_COMPANION_READS]:
        try:
            companion = reader.read(name, (candidate, ""), find_build(builds, str(candidate), "", plain_ok=True))
        except PackageIndexError:
            continue
        requirements = applicable(companion.requirements, companion.python)
        kind, text = relation(requirements, package, version)
        if kind == "pins":
            return CompanionMatch(name, str(candidate), "pins", text), ""
        if kind == "admits" and admitting is None:
            admitting = CompanionMatch(name, str(candidate), "admits", text)
        if _pinned_below(requirements, package, version):
            break
    if admitting is not None:
        return admitting, ""
    return None, f"no {name} release on the index requires or admits {package}=={version}"


__all__ = ["CompanionMatch", "MAX_COMPANION_READS", "find_companion", "published_versions", "relation"]
