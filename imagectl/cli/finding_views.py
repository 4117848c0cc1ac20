"""Text views of in-image check findings, as ``test`` and ``import`` print them."""

from __future__ import annotations

from collections.abc import Sequence

from ..imagecheck.compare import Finding, finding_line
from .printable import printable_lines


def format_findings(findings: Sequence[Finding]) -> str:
    """A readable report: one line per finding (:func:`imagecheck.compare.finding_line`, the lines a build logs),
    each made printable (what an image reports is the image's)."""
    return printable_lines([finding_line(f) for f in findings])
