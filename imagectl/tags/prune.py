"""Pruning old immutable tags: a pure plan, then a careful execution.

:func:`plan_prune` decides, for every immutable tag, whether it goes and why.  A tag is kept when it is one of
the newest ``keep`` (by the time in its name), when a moving tag or channel points to its image, when it is
younger than ``min_age``, or when its image is shared with a kept tag: a registry that cannot delete a tag
alone deletes the manifest, and with it every tag pointing to it, so an image goes only when all its tags go.
``--dry-run`` prints the plan and stops.

:func:`execute_prune` deletes image by image, watching the tags that could hold an image it is about to delete:

- the moving tag and channels ("pointers"): where each points is re-read (one HEAD each) after every delete,
  and that read is the check before the next one.  An image a pointer moved onto since the plan (a rollback, a
  promotion, a build reusing an old image) is skipped.  A pointer that vanished in a delete went down with the
  manifest (it moved onto the image between the check and the delete) and is put back from the manifest
  bytes kept before the delete;
- new tag names: one listing at the start finds the immutable tags made since the plan (by a build or an
  import; immutable, so each is read once) and the pointers; the listing is read again whenever a pointer
  changed between two deletes (someone is moving tags right now), to find new channels and immutable tags.
  What is left: a tag name that did not exist at the last listing, made on an image right before its delete
  while no pointer moved (a build or import moves ``latest`` right after it pushes; a promotion onto a brand
  new channel does not), goes down with it.

Cost, in a registry that cannot delete a tag alone (CNCF distribution), with T tags in L listing pages, P
pointers and N images to delete: the plan is L + T requests (a listing, a HEAD per tag); the execution is L + P
(plus a HEAD per immutable tag made since the plan) and then per image P HEADs and 4 requests to delete it
(HEAD of the tag, a tag DELETE the registry refuses, a GET keeping the manifest, the manifest DELETE; a HEAD
for each further tag of the image), plus 2 per pointer put back and L + (new tags) per relisting.  That is
linear in the number of tags; the per-delete listing and pointer reads before (two listings per image) made it
quadratic in the pages.  ``bench/prune_requests.py`` measures it against CNCF distribution 2.8: 325 tags (323
images, ``latest``, ``stable``) pruned to the newest 5 (318 images deleted) cost 2,237 requests in all with
one-page listings and 2,249 with 50-tag pages (the execution: 6.0 per deleted image), against 3,506 and 5,306
before (10.0 and 15.6 per deleted image).
In the local engine a prune only removes tags (``docker rmi`` of a tag), which never touches another tag.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta

from ..errors import OperationError
from .history import TagInfo, read_listing, sorted_newest_first
from .naming import is_immutable, short_digest
from .store import TagStore


@dataclass(frozen=True)
class Deletion:
    """The plan's decision for one immutable tag: ``delete`` or keep, and why."""

    tag: str
    digest: str
    _: KW_ONLY
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
    rule = _Rule(keep, min_age, now, frozenset(pointed))
    decided = [rule.decide(info, rank) for rank, info in enumerate(sorted_newest_first(tags))]
    kept = {d.digest: d.tag for d in decided if not d.delete}
    return [_share(d, kept) for d in decided]


@dataclass(frozen=True)
class _Rule:
    """What keeps a tag (see :func:`plan_prune`): the newest ``keep``, a younger age than ``min_age`` at ``now``,
    an image in ``pointed``."""

    keep: int
    min_age: timedelta
    now: datetime
    pointed: frozenset[str]

    def decide(self, info: TagInfo, rank: int) -> Deletion:
        """The decision for ``info``, the ``rank``-th newest tag (0: the newest)."""
        if rank < self.keep:
            return Deletion(info.tag, info.digest, delete=False, reason=f"one of the newest {self.keep}")
        if info.digest in self.pointed:
            return Deletion(info.tag, info.digest, delete=False, reason="a moving tag or channel points to its image")
        if self.now - info.time < self.min_age:
            return Deletion(info.tag, info.digest, delete=False, reason=f"younger than {_age(self.min_age)}")
        return Deletion(info.tag, info.digest, delete=True,
                        reason=f"older than the newest {self.keep} and than {_age(self.min_age)}")


def _share(decision: Deletion, kept: dict[str, str]) -> Deletion:
    if decision.delete and decision.digest in kept:
        reason = f"its image is shared with kept tag {kept[decision.digest]}"
        return Deletion(decision.tag, decision.digest, delete=False, reason=reason)
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


@dataclass
class PruneReport:
    """What an execution did: tags deleted, tags skipped (with why), pointers put back, failures."""

    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def execute_prune(store: TagStore, plan: Sequence[Deletion],
                  on_line: Callable[[str], None] = lambda line: None) -> PruneReport:
    """Delete what ``plan`` says, one image at a time, watching the pointers and new tags around each delete
    (see the module docstring).  A failure to delete one image is reported and the others still go.

    Raises RegistryError/EngineError only when the tags or the pointers cannot be read at all.
    """
    report = PruneReport()
    groups: dict[str, list[str]] = {}
    for d in plan:
        if d.delete:
            groups.setdefault(d.digest, []).append(d.tag)
    if not groups:
        return report
    watch = _Watch(store, {d.tag for d in plan})
    watch.relist()
    execution = _Execution(store, watch, report, on_line)
    for digest, tags in groups.items():
        execution.delete_image(digest, tags)
    return report


class _Watch:
    """During one execution: where each pointer points (as last read) and the immutable tags that were not in
    the plan (made since it; immutable, so read once), i.e. everything that may hold an image about to go."""

    def __init__(self, store: TagStore, planned: set[str]) -> None:
        self.store = store
        self.planned = planned
        self.pointers: dict[str, str | None] = {}  # None: gone at the last read
        self.unplanned: dict[str, str] = {}

    def relist(self) -> None:
        """One listing; every tag not seen yet (neither planned nor known) is read once."""
        for tag in self.store.tags():
            if tag in self.planned or tag in self.unplanned or tag in self.pointers:
                continue
            digest = self.store.digest(tag)
            if digest is not None:
                (self.unplanned if is_immutable(tag) else self.pointers)[tag] = digest

    def reread(self) -> bool:
        """One read per pointer; whether any points elsewhere than at the last read."""
        before = dict(self.pointers)
        self.pointers = {tag: self.store.digest(tag) for tag in before}
        return self.pointers != before

    def holders(self, digest: str) -> list[str]:
        """The pointers and unplanned immutable tags on ``digest``, as last read."""
        return sorted(t for t, d in [*self.pointers.items(), *self.unplanned.items()] if d == digest)


@dataclass(frozen=True)
class _Execution:
    """One execution of a plan: the store, the watch over it, the report being filled and where lines go."""

    store: TagStore
    watch: _Watch
    report: PruneReport
    on_line: Callable[[str], None]

    def delete_image(self, digest: str, tags: list[str]) -> None:
        """Delete ``tags`` (all of ``digest``'s planned tags) unless something now holds the image; then reread
        the pointers and put back any that went down with it."""
        watch, report = self.watch, self.report
        holders = watch.holders(digest)
        if holders:
            report.skipped += [(t, f"{', '.join(holders)} now points to its image") for t in tags]
            self.on_line(f"kept {', '.join(tags)}: {', '.join(holders)} now points to {short_digest(digest)}")
            return
        try:
            for tag in tags:
                self.store.delete(tag)
                report.deleted.append(tag)
                self.on_line(f"deleted {tag} ({short_digest(digest)})")
        except OperationError as exc:
            report.failed += [(t, str(exc)) for t in tags if t not in report.deleted]
            self.on_line(f"could not delete {short_digest(digest)}: {exc}")
        before = dict(watch.pointers)
        if watch.reread():
            watch.relist()  # someone is moving tags right now: look for new names too
        for pointer in sorted(p for p, d in before.items() if d is not None and watch.pointers.get(p) is None):
            if self.put_back(pointer, digest):
                watch.pointers[pointer] = digest

    def put_back(self, pointer: str, digest: str) -> bool:
        """Put ``pointer``, which went down with ``digest``'s manifest, back on it from the kept bytes; whether it
        worked (a failure is reported)."""
        try:
            self.store.point(pointer, digest)
        except OperationError as exc:
            self.report.failed.append((pointer, f"went down with {short_digest(digest)} and could not be put back:"
                                                f" {exc}"))
            return False
        self.report.restored.append(pointer)
        self.on_line(f"put {pointer} back on {short_digest(digest)}: it moved onto the image while it was being"
                     " deleted")
        return True

