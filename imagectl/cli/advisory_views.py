"""What ``list``, ``show``, ``compat``, ``lock --check`` and ``build`` say of the advisories of a profile: plain data
and lines (see :mod:`imagectl.advisories`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

from ..advisories.gate import describe_fail_on, gate_hits
from ..advisories.locks import framework_affected, nearest_unaffected, profile_findings, worst_first
from ..advisories.match import Finding
from ..advisories.snapshot import Advisories
from ..config import Config
from ..errors import OperationError
from ..matrix.compat import Verdict
from ..matrix.model import Profile


def advisory_cell(found: Sequence[Finding], framework: str = "") -> str | None:
    """The ``advisories`` cell of a table row, one word: the worst finding's id and the version that fixes it, and
    how many more (``CVE-2025-32434(torch>=2.6.0)+15``, ``CVE-2025-3730(torch:no-fix)``); None when there are
    none."""
    if not found:
        return None
    worst = worst_first(found, framework)[0]
    fix = f">={worst.fixed}" if worst.fixed else ":no-fix"
    return f"{worst.id}({worst.package}{fix})" + (f"+{len(found) - 1}" if len(found) > 1 else "")


def finding_rows(found: Sequence[Finding], framework: str = "") -> list[dict[str, Any]]:
    """The findings in ``--json`` outputs, worst first."""
    return [f.as_dict() for f in worst_first(found, framework)]


def gate_build(profiles: Sequence[Profile], config: Config, known: Advisories,
               warn: Callable[[str], None]) -> None:
    """Before a build: one warning line per affected profile naming its advisory ids; raises OperationError (exit 1)
    naming the profiles and ids that ``[advisories] fail_on`` refuses."""
    refused = []
    for profile in profiles:
        found = worst_first(profile_findings(profile, config, known), profile.framework.package)
        if found:
            warn(f"imagectl: warning: {profile.name}: {len(found)} advisories: "
                 + ", ".join(f.id + (f" ({f.package}>={f.fixed})" if f.fixed else f" ({f.package}, no fix)")
                             for f in found))
        hits = gate_hits(found, config.advisories_fail_on)
        if hits:
            refused.append(f"{profile.name} ({', '.join(f.id for f in hits)})")
    if refused and config.advisories_fail_on is not None:
        raise OperationError(f"build: {describe_fail_on(config.advisories_fail_on)} refuses {'; '.join(refused)}: "
                             "nothing was built")


def show_advisories(profile: Profile, config: Config, known: Advisories,
                    listed: Sequence[Profile]) -> dict[str, Any]:
    """``show``'s ``advisories`` (worst first) and ``unaffected_profile``: where an advisory marks the framework
    release itself (no floor can lift it), the nearest listed profile none of the framework's advisories marks."""
    found = profile_findings(profile, config, known)
    nearest = nearest_unaffected(profile, listed, known) if framework_affected(profile, known) else None
    return {"advisories": finding_rows(found, profile.framework.package),
            "unaffected_profile": nearest.name if nearest else None}


def show_advisory_lines(info: dict[str, Any]) -> list[str]:
    """``show``'s text lines of :func:`show_advisories`: one per finding, then the nearest unaffected profile."""
    rows = info["advisories"]
    if not rows:
        return [f"{'advisories':20} none known"]
    lines = [f"{'advisories' if i == 0 else '':20} {_row_line(r)}" for i, r in enumerate(rows)]
    if info["unaffected_profile"]:
        lines.append(f"{'unaffected_profile':20} {info['unaffected_profile']} (the framework itself is affected: "
                     "a newer release, not a floor, lifts it)")
    return lines


def _row_line(row: dict[str, Any]) -> str:
    extra = ", ".join(row["aliases"]) + (f"; {row['severity']}" if row["severity"] else "")
    fix = f"fixed in {row['fixed']}" if row["fixed"] else "no fixed release"
    return f"{row['id']}{f' ({extra})' if extra else ''}: {row['package']} {row['version']}, {fix}"


def compat_marks(profiles: Sequence[Profile], verdicts: Sequence[Verdict], config: Config) -> dict[str, list[Finding]]:
    """The findings (worst first) of each profile ``verdicts`` names."""
    from ..advisories.snapshot import known_advisories

    known, named = known_advisories(config), {v.profile for v in verdicts}
    return {p.name: worst_first(profile_findings(p, config, known), p.framework.package)
            for p in profiles if p.name in named}


def with_advisory_notes(verdicts: Sequence[Verdict], marks: dict[str, list[Finding]]) -> list[Verdict]:
    """``verdicts``, each affected one with a note ``advisories: CVE-2025-32434(torch>=2.6.0)+15``."""
    return [replace(v, notes=(*v.notes, f"advisories: {advisory_cell(marks[v.profile])}")) if marks.get(v.profile)
            else v for v in verdicts]
