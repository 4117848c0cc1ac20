"""Pruning old immutable tags: a pure plan, then a careful execution.

:func:`plan_prune` decides, for every immutable tag, whether it goes and why.  A tag is kept when it is one of
the newest ``keep`` (by the time in its name), when a moving tag or channel points to its image, when it is
younger than ``min_age``, or when its image is shared with a kept tag: a registry that cannot delete a tag
alone deletes the manifest, and with it every tag pointing to it, so an image goes only when all its tags go.
``--dry-run`` prints the plan and stops.

:func:`execute_prune` deletes image by image.  Right before each delete it re-reads where the moving tag and
channels point and skips an image one of them moved onto since the plan was made (a rollback, a promotion,
a build reusing an old image).  Right after, it reads them again: a pointer that vanished went down with the
manifest (it moved onto the image between the check and the delete) and is put back from the manifest bytes
kept before the delete.  In the local engine a prune only removes tags (``docker rmi`` of a tag), which never
touches another tag.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..errors import OperationError
from .history import TagInfo, read_listing, read_pointers, sorted_newest_first
from .naming import is_immutable, short_digest
from .store import TagStore


@dataclass(frozen=True)
class Deletion:
    """The plan's decision for one immutable tag: ``delete`` or keep, and why."""

    tag: str
    digest: str
    delete: bool
    reason: str


def plan_prune(tags: list[TagInfo], pointed: set[str], keep: int, min_age: timedelta, now: datetime) -> list[Deletion]:
    """One decision per immutable tag of ``tags``, newest first (pure).

    ``pointed``: the digests moving tags and channels point to.  ``keep``: how many of the newest tags stay
    whatever their age.  ``min_age``: a younger tag (by the time in its name, against ``now``) stays.  Raises
    ValueError for a negative ``keep``.
    """
    if keep < 0:
        raise ValueError("keep must be >= 0")
    ordered = sorted_newest_first(tags)
    decided = [_decide(info, rank, pointed, keep, min_age, now) for rank, info in enumerate(ordered)]
    kept = {d.digest: d.tag for d in decided if not d.delete}
    return [_share(d, kept) for d in decided]


def _decide(info: TagInfo, rank: int, pointed: Collection[str], keep: int, min_age: timedelta,
            now: datetime) -> Deletion:
    if rank < keep:
        return Deletion(info.tag, info.digest, False, f"one of the newest {keep}")
    if info.digest in pointed:
        return Deletion(info.tag, info.digest, False, "a moving tag or channel points to its image")
    if now - info.time < min_age:
        return Deletion(info.tag, info.digest, False, f"younger than {_age(min_age)}")
    return Deletion(info.tag, info.digest, True, f"older than the newest {keep} and than {_age(min_age)}")


def _share(decision: Deletion, kept: dict[str, str]) -> Deletion:
    if decision.delete and decision.digest in kept:
        reason = f"its image is shared with kept tag {kept[decision.digest]}"
        return Deletion(decision.tag, decision.digest, False, reason)
    return decision


def _age(age: timedelta) -> str:
    days = age.total_seconds() / 86400
    return f"{days:g} days" if days != 1 else "1 day"


def plan_for_store(store: TagStore, keep: int, min_age: timedelta, now: datetime) -> list[Deletion]:
    """:func:`plan_prune` over what ``store`` holds now (one listing, one digest read per tag).

    Raises RegistryError/EngineError when the tags cannot be read.
    """
    listing = read_listing(store)
    return plan_prune(list(listing.immutable), set(listing.pointers.values()), keep, min_age, now)


def plan_json(plan: Sequence[Deletion], dry_run: bool) -> list[dict[str, Any]]:
    """The plan as plain data: action (``delete``, ``delete (dry run)``, ``keep``), tag, digest, reason."""
    return [{"action": ("delete" if d.delete else "keep") + (" (dry run)" if dry_run and d.delete else ""),
             "tag": d.tag, "digest": d.digest, "reason": d.reason} for d in plan]


@dataclass
class PruneReport:
    """What an execution did: tags deleted, tags skipped (with why), pointers put back, failures."""

    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def execute_prune(store: TagStore, plan: Sequence[Deletion],
                  on_line: Callable[[str], None] = lambda line: None) -> PruneReport:
    """Delete what ``plan`` says, one image at a time, re-checking the pointers around each delete (see the
    module docstring).  A failure to delete one image is reported and the others still go.

    Raises RegistryError/EngineError only when the pointers cannot be read at all.
    """
    report = PruneReport()
    groups: dict[str, list[str]] = {}
    for d in plan:
        if d.delete:
            groups.setdefault(d.digest, []).append(d.tag)
    planned = {d.tag for d in plan}
    for digest, tags in groups.items():
        _delete_image(store, digest, tags, planned, report, on_line)
    return report


def _delete_image(store: TagStore, digest: str, tags: list[str], planned: set[str], report: PruneReport,
                  on_line: Callable[[str], None]) -> None:
    before, holders = _holders(store, digest, planned)
    if holders:
        report.skipped += [(t, f"{', '.join(holders)} now points to its image") for t in tags]
        on_line(f"kept {', '.join(tags)}: {', '.join(holders)} now points to {short_digest(digest)}")
        return
    try:
        for tag in tags:
            store.delete(tag)
            report.deleted.append(tag)
            on_line(f"deleted {tag} ({short_digest(digest)})")
    except OperationError as exc:
        report.failed += [(t, str(exc)) for t in tags if t not in report.deleted]
        on_line(f"could not delete {short_digest(digest)}: {exc}")
    for pointer in sorted(set(before) - set(read_pointers(store))):
        _put_back(store, pointer, digest, report, on_line)


def _holders(store: TagStore, digest: str, planned: set[str]) -> tuple[dict[str, str], list[str]]:
    """(where every pointer points now, the tags that now hold ``digest``: pointers, and immutable tags made
    since the plan by a build or an import); one listing, one read per pointer and per new tag."""
    pointers, holders = {}, []
    for tag in store.tags():
        if is_immutable(tag) and tag in planned:
            continue
        found = store.digest(tag)
        if found is None:
            continue
        if not is_immutable(tag):
            pointers[tag] = found
        if found == digest:
            holders.append(tag)
    return pointers, holders


def _put_back(store: TagStore, pointer: str, digest: str, report: PruneReport, on_line: Callable[[str], None]) -> None:
    """Put ``pointer``, which went down with ``digest``'s manifest, back on it from the kept bytes."""
    try:
        store.point(pointer, digest)
    except OperationError as exc:
        report.failed.append((pointer, f"went down with {short_digest(digest)} and could not be put back: {exc}"))
        return
    report.restored.append(pointer)
    on_line(f"put {pointer} back on {short_digest(digest)}: it moved onto the image while it was being deleted")


def report_json(plan: Sequence[Deletion], report: PruneReport) -> dict[str, Any]:
    """``prune --json`` after deleting: the plan and what was done."""
    return {"plan": plan_json(plan, False), "deleted": report.deleted, "restored": report.restored,
            "skipped": [{"tag": t, "reason": r} for t, r in report.skipped],
            "failed": [{"tag": t, "error": e} for t, e in report.failed]}
