"""Views of ``matrix verify``'s report (:class:`imagectl.upstream.verify.VerifyReport`): the findings table, the
JSON document, the JUnit cases and the summary line."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the report's module reads package indexes (requests): only matrix verify loads it
    from ..upstream.verify import VerifyReport

COLUMNS = ("framework", "release", "variant", "what", "matrix", "index")


def finding_rows(report: VerifyReport, *, notes: bool = False) -> list[dict[str, str]]:
    """The table rows of the failing findings (and of the notes when ``notes``)."""
    return [asdict(f) for f in report.findings if notes or f.failing]


def report_json(report: VerifyReport) -> dict[str, object]:
    """Everything ``verify --json`` prints."""
    return {
        "indexes": dict(report.indexes),
        "checked": [{"framework": f, "release": r, "variant": v} for f, r, v in report.checked],
        "findings": [asdict(f) for f in report.findings],
        "differences": len(report.failures),
    }


def junit_cases(report: VerifyReport) -> list[tuple[str, str, str | None]]:
    """One JUnit case per build checked, failing with its differences (notes do not fail)."""
    by_build: dict[tuple[str, str, str], list[str]] = {key: [] for key in report.checked}
    for finding in report.failures:
        by_build.setdefault((finding.framework, finding.release, finding.variant), []).append(str(finding))
    return [(f"imagectl.matrix.verify.{fw}", f"{fw} {release} {tag}", "\n".join(lines) or None)
            for (fw, release, tag), lines in by_build.items()]


def summary(report: VerifyReport) -> str:
    """``N builds checked against INDEX: D differences, M notes``."""
    notes = len(report.findings) - len(report.failures)
    where = ", ".join(sorted(set(report.indexes.values()))) or "no index"
    return f"{len(report.checked)} builds checked against {where}: {len(report.failures)} differences, {notes} notes"
