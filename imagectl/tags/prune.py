"""Pruning old immutable tags: a pure plan, then a careful execution.

:func:`plan_prune` decides, for every immutable tag, whether it goes and why.  A tag is kept when it is one of
the newest ``keep`` (by the time in its name), when a moving tag or channel points to its image, when it is
younger than ``min_age``, or when its image is shared with a kept tag: a registry that cannot delete a tag
alone deletes the manifest, and with it every tag pointing to it, so an image goes only when all its tags go.
``--dry-run`` prints the plan and stops.

Image indexes (multi-platform images, see :mod:`.store`): an index names its children (one image manifest per
platform, untagged) by digest, so deleting a child breaks every index that names it.  The plan therefore keeps
every manifest reachable from what stays (the kept tags' images and what the moving tag and channels point
to, through indexes, :func:`reachable`): a tag whose image is in a kept index is kept too (until nothing more
changes), and the children of a deleted index get rows of their own (``index``: the deleted index's tag,
``platform``): deleted when nothing that stays reaches them, kept (and said why) when something does.  In the
execution they go last, after every tag, and each only when its index is gone from the repository (a registry
that deletes a tag alone keeps the index, and its children with it, for its garbage collection) and when,
right before its delete, no tag reaches it: one listing finds tags made since the plan, and the pointers are
re-read before each child as before each image.  What is left: an index pushed under a brand-new tag between
that listing and the child's delete, naming the child (a build puts its children before its index: when prune
deleted one in between, the registry refuses that index, so the build fails instead of leaving it broken).

:func:`execute_prune` deletes image by image, watching the tags that could hold an image it is about to delete:

- each image is deleted under a deletion mark (see "Deletion marks" in :mod:`.store`): the mark is put, then
  every tag is read again right before the delete (one listing, for tags made since the plan, and one read per
  moving tag and channel: the "pointers"), and the image is deleted only when none of them names it.  Whatever
  moves a tag onto the image after that read sees the mark and waits until the mark is removed, so "a tag names
  it at the moment of deletion" cannot happen unseen: the move either shows up in the read (the image is
  skipped) or waits for this prune to decide and then reads its tag back (:mod:`.moves`);
- after the delete the pointers are read again (and the listing too when one changed): a pointer that vanished
  went down with the manifest (it moved onto the image between the read and the delete) and is put back from
  the manifest bytes kept before the delete; when one was put back, or one now names the image (a move whose
  PUT brought the manifest back), the image stays after all: its immutable tags are put back too, its
  attestations are kept, and the report lists it as kept.  Only then are its attestations deleted and the mark
  removed.

Cost, in a registry that cannot delete a tag alone (CNCF distribution), with T tags in L listing pages, P
pointers and N images to delete: the plan is L + T requests (a listing, a HEAD per tag); the execution is L + P
(plus a HEAD per immutable tag made since the plan) and then per image 1 mark PUT, L + P reads right before the
delete, 4 requests to delete it (HEAD of the tag, a tag DELETE the registry refuses, a GET keeping the manifest,
the manifest DELETE; a HEAD for each further tag of the image), the reads that delete its attestations, P reads
after it and 1 DELETE of the mark, plus 2 per pointer put back and L + (new tags) per relisting.  That is linear
in the number of tags times the listing's pages: the listing right before each delete is what the mark needs (a
channel made since the last listing is found only by listing).  ``bench/prune_requests.py`` (100 images pruned
to the newest 5, ``latest`` and ``stable`` kept, one-page listings, CNCF distribution 2.8, 2026-12-06): 15.05
requests per deleted image in the execution, 1,533 in all, against 10.03 and 1,056 without the marks (the mark's
PUT and DELETE, the listing and the two pointer reads before each delete).
Every execution first removes the deletion marks older than ``DELETE_MARK_STALE`` (10 minutes) that prunes killed
mid-delete left (one listing, and a GET and a DELETE per mark; a tag under a mark's name that is no deletion
mark of imagectl's is reported as a failure and left).
In the local engine a prune only removes tags (``docker rmi`` of a tag), which never touches another tag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta

from ..errors import NotFoundError, OperationError
from .history import TagInfo, read_listing, sorted_newest_first
from .naming import is_immutable, short_digest
from .store import ChildManifest, TagStore

Contents = Mapping[str, Sequence[ChildManifest]]
"""digest of an index -> the manifests it names (image manifests are absent, or map to nothing)."""


@dataclass(frozen=True)
class Deletion:
    """The plan's decision for one immutable tag, or for one child manifest of an index that goes (``tag`` "",
    ``index`` the tag of that index, ``platform`` the child's): ``delete`` or keep, and why."""

    tag: str
    digest: str
    _: KW_ONLY
    delete: bool
    reason: str
    index: str = ""
    platform: str = ""


def plan_prune(tags: list[TagInfo], pointed: set[str], keep: int,  # noqa: PLR0913 - the plan's inputs, as is
               min_age: timedelta, now: datetime, *, contents: Contents | None = None) -> list[Deletion]:
    """One decision per immutable tag of ``tags``, newest first, then one per child manifest of the indexes
    that go (pure).

    ``pointed``: the digests moving tags and channels point to.  ``keep``: how many of the newest tags stay
    whatever their age.  ``min_age``: a younger tag (by the time in its name, against ``now``) stays.
    ``contents``: what each index among the digests names (see the module docstring).  Raises ValueError for a
    negative ``keep``.
    """
    if keep < 0:
        raise ValueError("keep must be >= 0")
    contents = contents or {}
    rule = _Rule(keep, min_age, now, frozenset(pointed))
    plan = [rule.decide(info, rank) for rank, info in enumerate(sorted_newest_first(tags))]
    while True:  # keeping a tag for an index it is in may keep another index, and its children: until it settles
        kept = {d.digest: d.tag for d in plan if not d.delete}
        held = reachable({**dict.fromkeys(pointed, ""), **kept}, contents)
        settled = [_share(d, kept, held) for d in plan]
        if settled == plan:
            return plan + _child_rows(plan, held, contents)
        plan = settled


def reachable(roots: Mapping[str, str], contents: Contents) -> dict[str, str]:
    """digest -> the name of the root that reaches it: every root (digest -> its name) and, through indexes,
    every manifest they name, at any depth (pure)."""
    held: dict[str, str] = {}
    todo = list(roots.items())
    while todo:
        digest, name = todo.pop(0)
        if digest not in held:
            held[digest] = name
            todo += [(c.digest, name) for c in contents.get(digest, ())]
    return held


def _child_rows(plan: Sequence[Deletion], held: Mapping[str, str], contents: Contents) -> list[Deletion]:
    """A row per child manifest of the indexes ``plan`` deletes (children with tags of their own have rows
    already): deleted when nothing that stays reaches it (``held``), else kept, saying what holds it."""
    tagged = {d.digest for d in plan}
    rows: dict[str, Deletion] = {}
    for d in (d for d in plan if d.delete):
        for child in _descendants(d.digest, contents):
            if child.digest in tagged or child.digest in rows:
                continue
            platform = child.platform or ("attachment" if child.attachment else "")
            holder = held.get(child.digest)
            if holder is None:
                reason = f"in index {d.tag}, which goes, and in nothing that stays"
            else:
                reason = (f"also in kept image {holder}" if holder
                          else "also in an image a moving tag or channel points to")
            rows[child.digest] = Deletion("", child.digest, delete=holder is None, reason=reason, index=d.tag,
                                          platform=platform)
    return list(rows.values())


def _descendants(digest: str, contents: Contents) -> list[ChildManifest]:
    found = []
    for child in contents.get(digest, ()):
        found += [child, *_descendants(child.digest, contents)]
    return found


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


def _share(decision: Deletion, kept: Mapping[str, str], held: Mapping[str, str]) -> Deletion:
    """``decision`` kept when its image stays anyway: shared with a kept tag, or in an index that stays."""
    if not decision.delete:
        return decision
    if decision.digest in kept:
        reason = f"its image is shared with kept tag {kept[decision.digest]}"
    elif decision.digest in held:
        holder = held[decision.digest]
        reason = (f"its image is in kept index {holder}" if holder
                  else "its image is in an index a moving tag or channel points to")
    else:
        return decision
    return Deletion(decision.tag, decision.digest, delete=False, reason=reason)


def _age(age: timedelta) -> str:
    days = age.total_seconds() / 86400
    return f"{days:g} days" if days != 1 else "1 day"


def plan_for_store(store: TagStore, keep: int, min_age: timedelta, now: datetime) -> list[Deletion]:
    """:func:`plan_prune` over what ``store`` holds now (one listing, one digest read per tag; an index's
    children come with its read, a nested index costs one GET).

    Raises RegistryError/EngineError when the tags (or an index) cannot be read.
    """
    listing = read_listing(store)
    digests = {t.digest for t in listing.immutable} | set(listing.pointers.values())
    return plan_prune(list(listing.immutable), set(listing.pointers.values()), keep, min_age, now,
                      contents=read_contents(store, digests))


def read_contents(store: TagStore, digests: set[str]) -> dict[str, tuple[ChildManifest, ...]]:
    """What each index among ``digests`` (and the indexes they name) names; a manifest deleted meanwhile names
    nothing.  Raises RegistryError for an index that cannot be read."""
    found: dict[str, tuple[ChildManifest, ...]] = {}
    todo = sorted(digests)
    while todo:
        digest = todo.pop()
        if digest in found:
            continue
        try:
            found[digest] = store.children(digest)
        except NotFoundError:
            found[digest] = ()
        todo += [c.digest for c in found[digest] if not c.attachment]
    return {d: c for d, c in found.items() if c}


@dataclass
class PruneReport:
    """What an execution did: tags deleted, tags skipped (with why), pointers put back, failures; index
    children deleted (digests) and kept (digest, why)."""

    deleted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    attestations_deleted: list[str] = field(default_factory=list)  # artifacts that referred to deleted images
    deleted_children: list[str] = field(default_factory=list)
    skipped_children: list[tuple[str, str]] = field(default_factory=list)
    marks_removed: list[str] = field(default_factory=list)  # deletion marks killed prunes left (see the docstring)


def execute_prune(store: TagStore, plan: Sequence[Deletion],
                  on_line: Callable[[str], None] = lambda line: None) -> PruneReport:
    """Delete what ``plan`` says, one image at a time, watching the pointers and new tags around each delete
    (see the module docstring).  A failure to delete one image is reported and the others still go.

    Raises RegistryError/EngineError only when the tags or the pointers cannot be read at all.
    """
    report = PruneReport()
    remove_stale_marks(store, report, on_line)
    groups: dict[str, list[str]] = {}
    for d in plan:
        if d.delete and d.tag:
            groups.setdefault(d.digest, []).append(d.tag)
    children = [d for d in plan if d.delete and not d.tag]
    if not groups and not children:
        return report
    watch = _Watch(store, {d.tag for d in plan if d.tag})
    watch.relist()
    execution = _Execution(store, watch, report, on_line)
    for digest, tags in groups.items():
        execution.delete_image(digest, tags)
    if children:
        execution.delete_children(children, plan)
    return report


def remove_stale_marks(store: TagStore, report: PruneReport, on_line: Callable[[str], None]) -> None:
    """Remove the deletion marks older than DELETE_MARK_STALE (prunes killed while deleting left them; every move
    already ignores them) into ``report``; one that cannot be removed is a failure of this prune."""
    for mark in store.stale_marks():
        try:
            removed = store.remove_stale_mark(mark)
        except OperationError as exc:
            report.failed.append((mark, str(exc)))
            continue
        if removed:
            report.marks_removed.append(mark)
            on_line(f"removed {mark}: the deletion mark of a prune that did not finish")


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
        """Delete ``tags`` (all of ``digest``'s planned tags) under a deletion mark, unless something holds the image
        right before the delete; then put back what went down with it (see the module docstring)."""
        try:
            mark = self.store.begin_delete(digest)
        except OperationError as exc:
            self.report.failed += [(t, f"cannot mark its image for deletion: {exc}") for t in tags]
            self.on_line(f"could not delete {short_digest(digest)}: cannot mark it for deletion: {exc}")
            return
        try:
            self._delete_marked(digest, tags)
        finally:
            try:
                self.store.end_delete(mark)
            except OperationError as exc:
                self.on_line(f"could not remove the deletion mark {mark}: {exc}")

    def _delete_marked(self, digest: str, tags: list[str]) -> None:
        watch, report = self.watch, self.report
        watch.reread()
        watch.relist()  # after the mark: every tag made since the last listing, read right before the delete
        holders = watch.holders(digest)
        if holders:
            report.skipped += [(t, f"{', '.join(holders)} now points to its image") for t in tags]
            self.on_line(f"kept {', '.join(tags)}: {', '.join(holders)} now points to {short_digest(digest)}")
            return
        deleted: list[str] = []
        try:
            for tag in tags:
                self.store.delete(tag)
                deleted.append(tag)
        except OperationError as exc:
            report.failed += [(t, str(exc)) for t in tags if t not in deleted]
            self.on_line(f"could not delete {short_digest(digest)}: {exc}")
        before = dict(watch.pointers)
        if watch.reread():
            watch.relist()  # someone is moving tags right now: look for new names too
        restored = [p for p in sorted(p for p, d in before.items() if d is not None and watch.pointers.get(p) is None)
                    if self.put_back(p, digest)]
        for pointer in restored:
            watch.pointers[pointer] = digest
        if deleted and watch.holders(digest):
            self.keep_after_all(digest, deleted, watch.holders(digest))
        elif deleted:
            self.deleted(digest, deleted)

    def deleted(self, digest: str, tags: list[str]) -> None:
        """Report ``tags`` of ``digest`` deleted and delete the image's attestations."""
        self.report.deleted += tags
        for tag in tags:
            self.on_line(f"deleted {tag} ({short_digest(digest)})")
        try:
            self.drop_attestations(digest)
        except OperationError as exc:
            self.report.failed.append((tags[0], f"deleted, but its attestations could not be: {exc}"))
            self.on_line(f"could not delete the attestations of {short_digest(digest)}: {exc}")

    def keep_after_all(self, digest: str, tags: list[str], holders: list[str]) -> None:
        """``holders`` moved onto ``digest`` while it was being deleted (and are on it again): put its immutable
        ``tags`` back too and report them kept; its attestations stay."""
        back = []
        for tag in tags:
            try:
                self.store.point(tag, digest)
                back.append(tag)
            except OperationError as exc:
                self.report.failed.append((tag, f"{', '.join(holders)} moved onto its image while it was being "
                                                f"deleted, and the tag could not be put back: {exc}"))
        self.report.skipped += [(t, f"{', '.join(holders)} moved onto its image while it was being deleted")
                                for t in back]
        if back:
            self.on_line(f"kept {', '.join(back)}: {', '.join(holders)} moved onto {short_digest(digest)} while it "
                         "was being deleted; put back")

    def delete_children(self, rows: Sequence[Deletion], plan: Sequence[Deletion]) -> None:
        """Delete the index children ``rows`` of ``plan``, each only when its index is gone and nothing reaches
        it right before its delete (see the module docstring)."""
        watch, report = self.watch, self.report
        watch.reread()
        watch.relist()  # tags made since the plan may name an index that holds a child
        indexes = {d.tag: d.digest for d in plan if d.tag}
        gone: dict[str, bool] = {}
        for row in rows:
            index = indexes.get(row.index, "")
            if index not in gone:
                gone[index] = self.store.digest(index) is None if index else True
            why = self._holder(row.digest, plan) if gone[index] else f"its index {row.index} is still in the repository"
            if why:
                report.skipped_children.append((row.digest, why))
                self.on_line(f"kept {short_digest(row.digest)} ({row.platform or 'child'} of {row.index}): {why}")
                continue
            try:
                self.store.delete_untagged(row.digest)
            except OperationError as exc:
                report.failed.append((f"{short_digest(row.digest)} ({row.platform or 'child'} of {row.index})",
                                      str(exc)))
                continue
            report.deleted_children.append(row.digest)
            self.on_line(f"deleted {short_digest(row.digest)} ({row.platform or 'child'} of {row.index})")
            if watch.reread():
                watch.relist()

    def _holder(self, digest: str, plan: Sequence[Deletion]) -> str:
        """What reaches ``digest`` now ("" when nothing): a kept tag's image, a tag whose delete did not happen,
        or a pointer or new tag as last read, through the indexes they are."""
        gone = set(self.report.deleted)
        roots = {d.digest: d.tag for d in plan if d.tag and d.tag not in gone}
        roots.update({d: t for t, d in [*self.watch.pointers.items(), *self.watch.unplanned.items()] if d})
        held = reachable(roots, read_contents(self.store, set(roots)))
        return f"{held[digest]} now reaches it" if digest in held else ""

    def drop_attestations(self, digest: str) -> None:
        """Delete the artifacts that refer to the deleted image ``digest`` (its SBOM, provenance, check report) and
        its referrers index, in a registry (:func:`imagectl.registry.referrers.delete_referrers`); only those.
        Raises RegistryError."""
        client = getattr(self.store, "client", None)
        if client is None:
            return  # the local engine keeps no referrers
        from ..registry.client import RegistryClient  # here: the registry package loads requests

        if not isinstance(client, RegistryClient):
            return  # the local engine keeps no referrers
        from ..registry.referrers import delete_referrers

        repository = self.store.repository.path
        for artifact in delete_referrers(client, repository, digest):
            self.report.attestations_deleted.append(artifact)
            self.on_line(f"deleted attestation {short_digest(artifact)} of {short_digest(digest)}")

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

