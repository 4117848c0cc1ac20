"""What a repository holds: its immutable tags, where its moving tag and channels point, and past moves.

Everything is read from the tag store, so with a registry the registry is the source of truth: any machine
that can reach it reads the same history (the move log lives in the registry too, see :mod:`.store`).

:func:`read_listing` (what rollback, promotion and prune plan with) costs one tag listing and one digest read
per tag.  :func:`read_history` reads only what it shows: one tag listing, whose names alone order the immutable
tags (by the time in each name), then the digests of the newest ``limit`` of them and of at most ``limit``
pointers (the moving tag first), one config read per distinct image among those (per platform of an image
index: each child's manifest and config), and the newest ``limit`` records of the move log (a listing and one
GET per record, see :mod:`.store`).  So 100,000 tags cost two listings and a few dozen reads, not 100,000.
``History.hidden`` counts what was left out.  A log that cannot be read in part is no error: what was skipped
is in ``History.problems``.  Everything here returns data; the CLI formats it.

An entry that is an image index (a multi-platform image) lists its platforms; its creation time and versions
are its ``linux/amd64`` child's (:func:`.store.primary_image`), and a child whose labels record other versions
(or another profile) is named in the entry's ``differences``, one line each (:func:`platform_differences`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime

from ..errors import InputError, OperationError
from ..labels import PROFILE, label_versions
from .naming import MOVING_TAG, immutable_parts, is_immutable, tag_time
from .store import Move, PlatformImage, TagStore, primary_image


@dataclass(frozen=True)
class TagInfo:
    """One immutable tag: the image it points to and the time written into its name."""

    tag: str
    digest: str
    time: datetime


@dataclass(frozen=True)
class TagListing:
    """The tags of a repository: immutable ones (newest first) and pointers (moving tag, channels -> digest)."""

    immutable: tuple[TagInfo, ...]
    pointers: Mapping[str, str]

    def tags_of(self, digest: str) -> list[TagInfo]:
        """The immutable tags pointing to ``digest``, newest first."""
        return [t for t in self.immutable if t.digest == digest]


def read_listing(store: TagStore) -> TagListing:
    """Every tag of the store with its digest; tags deleted between listing and reading are left out.

    Raises RegistryError/EngineError when the store cannot be read.
    """
    return _listing_of(store, store.tags())


def read_shown(store: TagStore, limit: int | None) -> tuple[TagListing, int]:
    """The newest ``limit`` immutable tags of the store and at most ``limit`` pointers (the moving tag first),
    each with its digest, and how many tags were left out (None: every tag, none left out).  Only the tags
    shown are read; one listing orders them.  Raises RegistryError/EngineError when the store cannot be read."""
    names = store.tags()
    immutable = sorted((n for n in names if is_immutable(n)), key=lambda n: (tag_time(n), n), reverse=True)
    pointers = sorted((n for n in names if not is_immutable(n)), key=lambda n: (n != MOVING_TAG, n))
    shown = immutable[:limit] + pointers[:limit] if limit is not None else immutable + pointers
    listing = _listing_of(store, shown)
    return listing, len(names) - len(shown)


def _listing_of(store: TagStore, tags: Sequence[str]) -> TagListing:
    """``tags`` with their digests (one read each); tags deleted since they were listed are left out."""
    immutable, pointers = [], {}
    for tag in tags:
        digest = store.digest(tag)
        if digest is None:
            continue
        if is_immutable(tag):
            immutable.append(TagInfo(tag, digest, tag_time(tag)))  # type: ignore[arg-type]
        else:
            pointers[tag] = digest
    return TagListing(tuple(sorted_newest_first(immutable)), pointers)


def sorted_newest_first(tags: Sequence[TagInfo]) -> list[TagInfo]:
    """``tags`` by the time in their names, newest first (ties: by tag, descending)."""
    return sorted(tags, key=lambda t: (t.time, t.tag), reverse=True)


@dataclass(frozen=True)
class HistoryEntry:
    """One row of ``history``: an image, how it is tagged and what it contains."""

    tag: str
    digest: str
    created: str  # the image's creation time (its config), ISO 8601, or ""
    tagged: str  # the time in the immutable tag's name, ISO 8601 ("" for a pointer-only image)
    versions: Mapping[str, str]
    pointed_by: tuple[str, ...]
    _: KW_ONLY
    current: bool  # the moving tag points to it
    immutable: bool = True
    platforms: tuple[str, ...] = ()  # linux/amd64, linux/arm64, ... (an index: its children's; () unknown)
    differences: tuple[str, ...] = ()  # platforms whose labels say other versions than the shown ones


@dataclass(frozen=True)
class History:
    """A repository's history: entries newest first, pointers, the move log (oldest first), what of the log
    could not be read (one line each), and how many tags and logged moves were left out (``limit``)."""

    repository: str
    entries: tuple[HistoryEntry, ...]
    pointers: Mapping[str, str]
    moves: tuple[Move, ...] = field(default=())
    problems: tuple[str, ...] = field(default=())
    hidden: Hidden = field(default_factory=lambda: Hidden(0, False))


@dataclass(frozen=True)
class Hidden:
    """What ``history --limit`` left out: how many tags (immutable and pointers), and whether older moves."""

    tags: int
    older_moves: bool


DEFAULT_LIMIT = 20  # history --limit: rows of each table, newest first


def read_history(store: TagStore, limit: int | None = DEFAULT_LIMIT) -> History:
    """The history of the store's repository: its newest ``limit`` immutable images, at most ``limit`` pointers
    (the moving tag first) and its newest ``limit`` logged moves (None: everything).

    Images whose config cannot be read show no creation time and the versions their tag names carry; move log
    entries that cannot be read are left out and described in ``problems``.  Raises InputError for a ``limit``
    below 1, RegistryError/EngineError when the tags or the registry cannot be read at all.
    """
    if limit is not None and limit < 1:
        raise InputError(f"--limit {limit}: show at least 1 row (or 0 for all)")
    listing, hidden_tags = read_shown(store, limit)
    facts: dict[str, ImageFacts] = {}
    wanted = {t.digest for t in listing.immutable} | set(listing.pointers.values())
    for digest in sorted(wanted):
        facts[digest] = _image_facts(store, digest)
    moves = store.moves(None if limit is None else limit + 1)
    shown = tuple(moves[-limit:] if limit is not None else moves)
    return History(store.repository.familiar, tuple(history_entries(listing, facts)), dict(listing.pointers),
                   shown, tuple(store.problems), Hidden(hidden_tags, len(moves) > len(shown)))


@dataclass(frozen=True)
class ImageFacts:
    """What a history row shows of an image: creation time and labels (of an index: its primary child's), its
    platforms and where they disagree (:func:`platform_differences`)."""

    created: str
    labels: Mapping[str, str]
    platforms: tuple[str, ...] = ()
    differences: tuple[str, ...] = ()


_UNKNOWN = ImageFacts("", {})


def _image_facts(store: TagStore, digest: str) -> ImageFacts:
    try:
        images = store.platforms(digest)
    except OperationError:
        return _UNKNOWN
    primary = primary_image(images)
    if primary is None:
        return _UNKNOWN
    return ImageFacts(primary.created, primary.labels, tuple(i.platform for i in images if i.platform),
                      platform_differences(images, primary))


def platform_differences(images: Sequence[PlatformImage], primary: PlatformImage) -> tuple[str, ...]:
    """One line per image of ``images`` whose labels record other versions (or another profile) than
    ``primary``'s, e.g. ``linux/arm64: cudnn 9.1.0 (linux/amd64: 9.0.0)`` (pure)."""
    def facts(image: PlatformImage) -> dict[str, str]:
        return {**label_versions(image.labels), **({"profile": image.labels[PROFILE]} if PROFILE in image.labels
                                                   else {})}

    shown, lines = facts(primary), []
    for image in images:
        theirs = facts(image)
        keys = [k for k in sorted(set(shown) | set(theirs)) if shown.get(k) != theirs.get(k)]
        if image is not primary and keys:
            said = ", ".join(f"{k} {theirs.get(k) or 'none'} ({primary.platform or 'shown'}: {shown.get(k) or 'none'})"
                             for k in keys)
            lines.append(f"{image.platform or image.digest}: {said}")
    return tuple(lines)


def history_entries(listing: TagListing, facts: Mapping[str, ImageFacts]) -> list[HistoryEntry]:
    """The rows of a history (pure): one per immutable tag, newest first, then one per pointed-to image that
    no immutable tag names (its ``tag`` is the pointer's name)."""
    by_digest: dict[str, list[str]] = {}
    for pointer, digest in sorted(listing.pointers.items()):
        by_digest.setdefault(digest, []).append(pointer)
    current = listing.pointers.get(MOVING_TAG)
    rows = []
    for info in listing.immutable:
        seen = facts.get(info.digest, _UNKNOWN)
        rows.append(HistoryEntry(info.tag, info.digest, seen.created, info.time.isoformat(),
                                 image_versions(seen.labels, info.tag), tuple(by_digest.get(info.digest, ())),
                                 current=info.digest == current, platforms=seen.platforms,
                                 differences=seen.differences))
    named = {t.digest for t in listing.immutable}
    for digest, pointers in sorted(by_digest.items(), key=lambda item: item[1]):
        if digest not in named:
            seen = facts.get(digest, _UNKNOWN)
            rows.append(HistoryEntry(pointers[0], digest, seen.created, "", image_versions(seen.labels, pointers[0]),
                                     tuple(pointers), current=digest == current, immutable=False,
                                     platforms=seen.platforms, differences=seen.differences))
    return rows


def image_versions(labels: Mapping[str, str], tag: str) -> dict[str, str]:
    """The versions an image carries: from its imagectl labels, else what its immutable tag name says."""
    found = label_versions(labels)
    if found:
        return found
    parts = immutable_parts(tag)
    return {"version": parts["version"], "cuda": parts["cuda"], "python": parts["python"]} if parts else {}


def digest_names(history: History) -> dict[str, str]:
    """digest -> the newest immutable tag naming it (entries are newest first), else the tag a logged move
    named it by (an image pruned since)."""
    names = {m.previous: m.from_tag for m in history.moves if m.previous and m.from_tag and is_immutable(m.from_tag)}
    names.update({m.to: m.to_tag for m in history.moves if m.to_tag and is_immutable(m.to_tag)})
    names.update({e.digest: e.tag for e in reversed(history.entries) if e.immutable})
    return names
