"""Which versions an advisory affects, and what it finds in a lock (pure functions).

A version is affected by an ECOSYSTEM range when, walking the range's events in version order, the last
``introduced`` at or below it is not followed by a ``fixed`` at or below it or a ``last_affected`` below it (the OSV
specification's evaluation), or when the record's ``versions`` list names it.  Records that name each other
(``id`` and ``aliases``: GitHub's GHSA and PyPA's PYSEC record of one CVE) are one finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from packaging.version import InvalidVersion, Version

from .record import SEVERITIES, Advisory, Affected, Event, Severity


@dataclass(frozen=True)
class Finding:
    """One vulnerability of one locked package: its ids (the one shown first), the fixed version above the locked
    one (None: no fixed release is known), the highest severity its records give (None: none gives one)."""

    package: str
    version: str
    ids: tuple[str, ...]
    fixed: str | None
    severity: Severity | None
    summary: str

    @property
    def id(self) -> str:
        """The id it is shown by: its CVE where it has one, else its GHSA, else the first record's id."""
        return self.ids[0]

    def as_dict(self) -> dict[str, object]:
        """The finding in ``--json`` outputs."""
        return {"id": self.id, "aliases": list(self.ids[1:]), "package": self.package, "version": self.version,
                "fixed": self.fixed, "severity": self.severity, "summary": self.summary}

    def line(self) -> str:
        """``CVE-2025-32434 (GHSA-53q9-r3pm-6pq6, PYSEC-2025-41; critical): torch 2.3.1, fixed in 2.6.0``."""
        extra = ", ".join(self.ids[1:]) + (f"; {self.severity}" if self.severity else "")
        fix = f"fixed in {self.fixed}" if self.fixed else "no fixed release"
        return f"{self.id}{f' ({extra})' if extra else ''}: {self.package} {self.version}, {fix}"


def _sorted_events(events: Sequence[Event]) -> list[Event]:
    return sorted(events, key=lambda e: (e.version is not None, e.version or Version("0")))


def range_affects(events: Sequence[Event], version: Version) -> bool:
    """Whether ``version`` is inside the ECOSYSTEM range ``events``."""
    affected = False
    for event in _sorted_events(events):
        if event.kind == "introduced" and (event.version is None or version >= event.version):
            affected = True
        elif event.version is not None and _ends(event.kind, event.version, version):
            affected = False
    return affected


def _ends(kind: str, at: Version, version: Version) -> bool:
    """Whether a ``fixed`` (at or below ``version``) or ``last_affected`` (below it) event ends the range there."""
    return (kind == "fixed" and version >= at) or (kind == "last_affected" and version > at)


def _listed(versions: Iterable[str], version: Version) -> bool:
    for text in versions:
        try:
            if Version(text) == version:
                return True
        except InvalidVersion:
            continue
    return False


def affects(affected: Affected, version: Version) -> bool:
    """Whether the package part ``affected`` of a record covers ``version``."""
    return any(range_affects(r, version) for r in affected.ranges) or _listed(affected.versions, version)


def fixed_above(affected: Affected, version: Version) -> Version | None:
    """The lowest ``fixed`` version above ``version`` in the record's ranges (None: none)."""
    fixes = [e.version for r in affected.ranges for e in r if e.kind == "fixed" and e.version and e.version > version]
    return min(fixes, default=None)


def package_hits(advisories: Sequence[Advisory], package: str, version: str) -> list[tuple[Advisory, Version | None]]:
    """Each advisory that affects ``package`` at ``version`` (canonical name) with its fixed version above it;
    nothing for a version that is not PEP 440."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return []
    return [(adv, fixed_above(part, parsed)) for adv in advisories for part in adv.affected
            if part.package == package and affects(part, parsed)]


def _display_order(ids: Iterable[str]) -> tuple[str, ...]:
    rank = {"CVE": 0, "GHSA": 1, "PYSEC": 2}
    return tuple(sorted(set(ids), key=lambda i: (rank.get(i.split("-", 1)[0], 3), i)))


def _groups(hits: list[tuple[Advisory, Version | None]]) -> list[list[tuple[Advisory, Version | None]]]:
    """``hits`` joined where their records share an id or alias (transitively)."""
    groups: list[list[tuple[Advisory, Version | None]]] = []
    for hit in hits:
        joined = [g for g in groups if set(hit[0].ids) & {i for a, _ in g for i in a.ids}]
        merged = [hit, *(h for g in joined for h in g)]
        groups = [g for g in groups if g not in joined] + [merged]
    return groups


def _finding(package: str, version: str, group: list[tuple[Advisory, Version | None]]) -> Finding:
    fixes = [fixed for _, fixed in group if fixed is not None]
    levels = [a.severity for a, _ in group if a.severity]
    summary = next((a.summary for a, _ in sorted(group, key=lambda h: h[0].id) if a.summary), "")
    return Finding(package, version, _display_order(i for a, _ in group for i in a.ids),
                   str(max(fixes)) if fixes else None, max(levels, key=SEVERITIES.index) if levels else None, summary)


def findings(advisories: Sequence[Advisory], versions: Mapping[str, str]) -> list[Finding]:
    """Every vulnerability of the locked ``versions`` (canonical name -> version) that ``advisories`` name, by
    package and id."""
    out = []
    for package, version in sorted(versions.items()):
        out += [_finding(package, version, g) for g in _groups(package_hits(advisories, package, version))]
    return sorted(out, key=lambda f: (f.package, f.id))
