"""What ``import`` prints, as text and as JSON (the library returns an :class:`ImportResult`)."""

from __future__ import annotations

from typing import Any

from ..images.importer import ImportResult
from ..tags.naming import short_digest
from .finding_views import format_findings
from .printable import printable_lines
from .tag_views import describe_move


def format_import(result: ImportResult) -> str:
    """The import's outcome as a few lines of text (the findings come first, one per line), each printable."""
    verb = "already imported as" if result.reused else "imported as"
    lines = [f"{result.source.reference.familiar}: {verb} {result.repository}:{result.tag} "
             f"({short_digest(result.digest)})"]
    if result.copied:
        lines.append(f"  {result.copied}")
    if result.move is not None:
        lines.append(f"  {describe_move(result.move, result.repository)}")
    findings = [format_findings(result.findings)] if result.findings else []
    return "\n".join([*findings, printable_lines(lines)])


def import_json(result: ImportResult) -> dict[str, Any]:
    """``import --json``."""
    return {
        "source": result.source.reference.familiar, "source_digest": result.source.digest,
        "repository": result.repository, "tag": result.tag, "digest": result.digest, "reused": result.reused,
        "copied": result.copied, "checked": result.checked, "matches": result.matches,
        "ok": result.checked and not result.disagreements,
        "findings": [f.as_dict() for f in result.findings], "notes": result.notes,
        "moved": bool(result.move and result.move.changed), "platforms": list(result.source.platforms),
    }
