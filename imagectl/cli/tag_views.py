"""Views of what the tag commands return, as text and as JSON: history, the move log, a prune plan and its
execution, a move.  The library returns data (:mod:`imagectl.tags`); every shape the tag commands print is made
here (``import``'s in :mod:`.import_views`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..tags.history import History, digest_names
from ..tags.moves import MoveResult
from ..tags.naming import short_digest
from ..tags.prune import Deletion, PruneReport
from ..tags.store import Move
from .printable import printable
from .table import format_table


def format_history(history: History) -> str:
    """``history`` as text: the images table (``CUR`` marks the image the moving tag names; ``PLATFORMS`` when
    some image's platforms are known), a note per image whose platforms disagree, then the moves table (newest
    first)."""
    rows = [{"cur": "*" if e.current else "", "tag": e.tag, "digest": short_digest(e.digest),
             "created": _short_time(e.created or e.tagged), "versions": format_versions(e.versions),
             "platforms": ",".join(e.platforms), "pointed by": ", ".join(e.pointed_by)} for e in history.entries]
    columns = ("cur", "tag", "digest", "created", "versions", "platforms", "pointed by")
    if not any(e.platforms for e in history.entries):
        columns = tuple(c for c in columns if c != "platforms")
    text = f"{printable(history.repository)}\n"
    text += format_table(rows, columns) if rows else "(no images)"
    notes = [f"note: {e.tag}: {line}" for e in history.entries for line in e.differences]
    text += "".join(f"\n{printable(line)}" for line in notes)
    return text + "\n\n" + format_moves(history)


def format_moves(history: History) -> str:
    """The move log as a table, newest first."""
    if not history.moves:
        return "no moves logged"
    names = digest_names(history)
    rows = [{"when": m.when, "tag": m.tag, "action": m.action, "from": m.from_tag or _name(m.previous, names),
             "to": m.to_tag or _name(m.to, names), "by": m.by} for m in reversed(history.moves)]
    return format_table(rows, ("when", "tag", "action", "from", "to", "by"))


def describe_hidden(history: History, limit: int, *, only_moves: bool) -> str:
    """What ``history --limit`` left out, as a note ("" when nothing)."""
    parts = [] if only_moves or not history.hidden.tags else [f"{history.hidden.tags} more tag(s)"]
    if history.hidden.older_moves:
        parts.append("older moves")
    if not parts:
        return ""
    return f"showing the newest {limit} of each; {' and '.join(parts)} not shown (--limit N, or --limit 0 for all)"


def history_json(history: History) -> list[dict[str, Any]]:
    """``history --json``: one object per entry; ``moves`` lists the logged moves onto that image."""
    names = digest_names(history)
    out = []
    for e in history.entries:
        arrived = [_move_json(m, names) for m in history.moves if m.to == e.digest and m.previous != m.to]
        out.append({"tag": e.tag, "digest": e.digest, "created": e.created or None, "tagged": e.tagged or None,
                    "current": e.current, "immutable": e.immutable, "pointed_by": list(e.pointed_by),
                    "versions": dict(e.versions), "platforms": list(e.platforms),
                    "platform_differences": list(e.differences), "moves": arrived})
    return out


def moves_json(history: History) -> list[dict[str, Any]]:
    """``history --moves --json``: every logged move, newest first."""
    names = digest_names(history)
    return [_move_json(m, names) for m in reversed(history.moves)]


def _move_json(move: Move, names: Mapping[str, str]) -> dict[str, Any]:
    return {"when": move.when, "tag": move.tag, "action": move.action, "by": move.by,
            "from": move.previous, "from_tag": move.from_tag or names.get(move.previous or ""),
            "to": move.to, "to_tag": move.to_tag or names.get(move.to)}


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


def plan_json(plan: Sequence[Deletion], *, dry_run: bool) -> list[dict[str, Any]]:
    """A prune plan as plain data: action (``delete``, ``delete (dry run)``, ``keep``), tag, digest, reason; a
    row of an index's child has ``tag`` null, ``index`` (the tag of the index that goes) and ``platform``."""
    return [{"action": ("delete" if d.delete else "keep") + (" (dry run)" if dry_run and d.delete else ""),
             "tag": d.tag or None, "digest": d.digest, "reason": d.reason,
             **({"index": d.index, "platform": d.platform or None} if d.index else {})} for d in plan]


def format_plan(plan: Sequence[Deletion], *, dry_run: bool) -> str:
    """A prune plan as a table (digests shortened; an index's child is named ``PLATFORM of TAG``)."""
    rows = [{**row, "digest": short_digest(row["digest"]),
             "tag": row["tag"] or f"{row.get('platform') or 'child'} of {row.get('index')}"}
            for row in plan_json(plan, dry_run=dry_run)]
    return format_table(rows, ("action", "tag", "digest", "reason")) if rows else "no immutable tags"


def prune_json(plan: Sequence[Deletion], report: PruneReport) -> dict[str, Any]:
    """``prune --json`` after deleting: the plan and what was done."""
    return {"plan": plan_json(plan, dry_run=False), "deleted": report.deleted, "restored": report.restored,
            "skipped": [{"tag": t, "reason": r} for t, r in report.skipped],
            "failed": [{"tag": t, "error": e} for t, e in report.failed],
            "deleted_children": report.deleted_children, "attestations_deleted": report.attestations_deleted,
            "skipped_children": [{"digest": d, "reason": r} for d, r in report.skipped_children],
            "marks_removed": report.marks_removed}


def describe_move(result: MoveResult, repository: str) -> str:
    """One line for the user about what a rollback, promotion or moving-tag update did."""
    where = f"{result.target_tag} ({short_digest(result.target)})" if result.target_tag else short_digest(result.target)
    if not result.changed:
        return f"{repository}:{result.tag} already points to {where}; nothing to do"
    line = f"{repository}:{result.tag}: {short_digest(result.previous)} -> {where}"
    return f"{line} ({result.note})" if result.note else line


def move_json(result: MoveResult, repository: str) -> dict[str, Any]:
    """``rollback --json`` and ``promote --json``: where the tag pointed, where it points now."""
    return {"repository": repository, "tag": result.tag, "from": result.previous, "to": result.target,
            "to_tag": result.target_tag, "changed": result.changed, "note": result.note or None}


def _name(digest: str | None, names: Mapping[str, str]) -> str:
    return names.get(digest or "") or short_digest(digest)


def _short_time(text: str) -> str:
    return text[:19].replace("T", " ") if text else "-"
