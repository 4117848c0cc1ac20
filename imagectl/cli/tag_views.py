"""Text views of what the tag commands return: history, the move log, a prune plan, a move, an import."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..tags.history import History, digest_names
from ..tags.moves import MoveResult
from ..tags.naming import short_digest
from ..tags.prune import Deletion, plan_json
from .table import format_table

if TYPE_CHECKING:  # the import command's modules load only for import
    from ..images.importer import ImportResult


def format_history(history: History) -> str:
    """``history`` as text: the images table (``CUR`` marks the image the moving tag names), then the moves table
    (newest first)."""
    rows = [{"cur": "*" if e.current else "", "tag": e.tag, "digest": short_digest(e.digest),
             "created": _short_time(e.created or e.tagged), "versions": format_versions(e.versions),
             "pointed by": ", ".join(e.pointed_by)} for e in history.entries]
    text = f"{history.repository}\n"
    text += format_table(rows, ("cur", "tag", "digest", "created", "versions", "pointed by")) if rows else "(no images)"
    return text + "\n\n" + format_moves(history)


def format_moves(history: History) -> str:
    """The move log as a table, newest first."""
    if not history.moves:
        return "no moves logged"
    names = digest_names(history)
    rows = [{"when": m.when, "tag": m.tag, "action": m.action, "from": m.from_tag or _name(m.previous, names),
             "to": m.to_tag or _name(m.to, names), "by": m.by} for m in reversed(history.moves)]
    return format_table(rows, ("when", "tag", "action", "from", "to", "by"))


def format_versions(versions: Mapping[str, str]) -> str:
    """``torch 2.3.1 cuda 12.1 cudnn 8.9.2.26 nccl 2.20.5 py3.11`` (what is known)."""
    parts = []
    if versions.get("version"):
        parts.append(f"{versions.get('framework', '')} {versions['version']}".strip())
    for key in ("cuda", "cudnn", "nccl"):
        if versions.get(key):
            parts.append(f"{key} {versions[key]}" if versions[key][0].isdigit() else versions[key])
    if versions.get("python"):
        parts.append(f"py{versions['python']}")
    return " ".join(parts)


def format_plan(plan: Sequence[Deletion], dry_run: bool) -> str:
    """A prune plan as a table (digests shortened)."""
    rows = [{**row, "digest": short_digest(row["digest"])} for row in plan_json(plan, dry_run)]
    return format_table(rows, ("action", "tag", "digest", "reason")) if rows else "no immutable tags"


def describe_move(result: MoveResult, repository: str) -> str:
    """One line for the user about what a rollback, promotion or moving-tag update did."""
    where = f"{result.target_tag} ({short_digest(result.target)})" if result.target_tag else short_digest(result.target)
    if not result.changed:
        return f"{repository}:{result.tag} already points to {where}; nothing to do"
    line = f"{repository}:{result.tag}: {short_digest(result.previous)} -> {where}"
    return f"{line} ({result.note})" if result.note else line


def format_import(result: "ImportResult") -> str:
    """The import's outcome as a few lines of text (the findings come first, one per line)."""
    from ..imagecheck.compare import format_findings

    lines = [format_findings(result.findings)] if result.findings else []
    verb = "already imported as" if result.reused else "imported as"
    lines.append(f"{result.source.reference.familiar}: {verb} {result.repository}:{result.tag} "
                 f"({short_digest(result.digest)})")
    if result.copied:
        lines.append(f"  {result.copied}")
    if result.move is not None:
        lines.append(f"  {describe_move(result.move, result.repository)}")
    return "\n".join(lines)


def _name(digest: str | None, names: Mapping[str, str]) -> str:
    return names.get(digest or "") or short_digest(digest)


def _short_time(text: str) -> str:
    return text[:19].replace("T", " ") if text else "-"
