"""Rollback and promotion: pointing the moving tag or a channel at an image that is already in the repository.

A move is "just switching a tag": in a registry one manifest GET (of the target, which is also the last check
that it still exists) and one manifest PUT (under the moving tag or channel); no layer is read or written,
whatever the image's size.  Around it: a HEAD of the moving tag, the log's manifest, a HEAD of the one
immutable tag the target is named by, a HEAD reading the tag back, and the log's append (GET, PUT, GET).
Only a digest ``--to`` or a log that does not name the previous image reads the whole tag listing (one HEAD
per tag).  The engine store does the same with ``docker inspect`` and ``docker tag``.

Which image ``rollback`` goes back to (:func:`previous_target`):

1. the image the moving tag pointed to before its last move, per the move log (a second rollback therefore
   undoes the first, like ``cd -``; ``--to`` goes further back), when the log's last move of the tag is the
   one that put it where it is now and that earlier image still has an immutable tag;
2. otherwise (no log, a log that does not explain where the tag points), the newest immutable tag older, by
   the time in its name, than the newest immutable tag of the current image.

``--to`` (:func:`resolve_target`) names an immutable tag of the repository or a digest (``sha256:...``, or a
unique prefix of at least 12 hex digits) one of them points to; anything else is an InputError listing the
choices.  A move onto the image the tag already points to changes nothing and is not logged.

Races: the target's GET right before the PUT fails when a concurrent prune deleted it (OperationError, the
tag stays where it was); after the PUT the tag is read back, and if a concurrent manifest delete took it
down it is put back from the manifest bytes just written (the layers stay until garbage collection).  Two
concurrent moves both land on valid images; the last PUT wins and both are logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import ImagectlError, InputError, NotFoundError, OperationError
from ..reference import check_tag
from .history import TagInfo, TagListing, read_listing
from .naming import MOVING_TAG, check_channel, is_immutable, short_digest, tag_time
from .store import Move, TagStore, now, who

_CHOICES_SHOWN = 10
_MIN_PREFIX = len("sha256:") + 12


@dataclass(frozen=True)
class MoveResult:
    """What a rollback or promotion did."""

    tag: str  # the moving tag or channel
    previous: str | None  # the digest it pointed to before (None: it did not exist)
    target: str  # the digest it points to now
    target_tag: str | None  # the immutable tag of the target, when one names it
    changed: bool  # False: it already pointed there (nothing written, nothing logged)
    note: str = ""  # e.g. another client moved the tag again right after


def rollback(store: TagStore, to: str | None = None) -> MoveResult:
    """Point the moving tag at the previous image (see the module docstring) or at ``to``.

    The usual cases read no tag listing: the moving tag, the log and the one immutable tag the target is named
    by are read directly; only a digest ``to``, or a log that does not name the previous image, reads every
    tag.  Raises InputError for a ``to`` that names no immutable image of the repository, OperationError when
    there is nothing to roll back to or the target vanished, RegistryError/EngineError from the store.
    """
    current = store.digest(MOVING_TAG)
    if to:
        target = _named_target(store, to)
    else:
        moves = store.moves()
        target = _logged_previous(store, current, moves) or previous_target(current, moves, read_listing(store))
    return guarded_move(store, MOVING_TAG, target.digest, target.tag, current, "rollback")


def promote(store: TagStore, channel: str, source: str = MOVING_TAG) -> MoveResult:
    """Point ``channel`` at ``source``: an immutable tag, a digest, ``latest`` (the image the moving tag points
    to now) or another channel.

    Raises ValidationError for a bad channel name, InputError for an unknown source, OperationError when the
    source tag does not exist or the target vanished, RegistryError/EngineError from the store.
    """
    check_channel(channel)
    current = store.digest(channel)
    if is_immutable(source) or source.startswith("sha256:"):
        info = _named_target(store, source)
        return guarded_move(store, channel, info.digest, info.tag, current, "promote")
    digest = store.digest(check_tag(source))
    if digest is None:
        if source != MOVING_TAG:
            choices = _choices(read_listing(store))
            raise InputError(f"--from {source!r}: {store.repository.familiar} has no such tag ({choices})")
        raise OperationError(f"{store.repository.familiar}:{source} does not exist yet:"
                             " nothing to promote (build or import first)")
    return guarded_move(store, channel, digest, logged_name(digest, store.moves()), current, "promote")


def _named_target(store: TagStore, spec: str) -> TagInfo:
    """The image ``spec`` names (see :func:`resolve_target`); an existing immutable tag costs one read."""
    if is_immutable(spec):
        digest = store.digest(spec)
        if digest is not None:
            return TagInfo(spec, digest, tag_time(spec))  # type: ignore[arg-type]
    return resolve_target(spec, read_listing(store), store.repository.familiar)


def _logged_previous(store: TagStore, current: str | None, moves: Sequence[Move]) -> TagInfo | None:
    """Rule 1 of :func:`previous_target` read cheaply: the previous image by the immutable tag the log named
    it by, if that tag still points to it; None when the log does not tell (then the listing decides)."""
    real = [m for m in moves if m.tag == MOVING_TAG and m.previous != m.to]
    if current is None or not real or real[-1].to != current or not real[-1].previous:
        return None
    previous = real[-1].previous
    name = logged_name(previous, moves)
    if name is None or store.digest(name) != previous:
        return None
    return TagInfo(name, previous, tag_time(name))  # type: ignore[arg-type]


def logged_name(digest: str, moves: Sequence[Move]) -> str | None:
    """The immutable tag the newest logged move onto ``digest`` named it by, or None (pure)."""
    for m in reversed(moves):
        if m.to == digest and m.to_tag and is_immutable(m.to_tag):
            return m.to_tag
    return None


def previous_target(current: str | None, moves: Sequence[Move], listing: TagListing, tag: str = MOVING_TAG) -> TagInfo:
    """The image a rollback of ``tag`` goes back to (pure; rules in the module docstring).

    Raises OperationError when ``tag`` does not exist or no earlier image is left.
    """
    if current is None:
        raise OperationError(f"{tag} does not exist yet: nothing to roll back (name an image with --to)")
    real = [m for m in moves if m.tag == tag and m.previous != m.to]
    last = real[-1] if real else None
    if last is not None and last.to == current and last.previous:
        earlier = listing.tags_of(last.previous)
        if earlier:
            return earlier[0]
    mine = listing.tags_of(current)
    older = [t for t in listing.immutable if t.digest != current and (not mine or t.time < mine[0].time)]
    if not older:
        raise OperationError(f"{tag} points to {short_digest(current)}"
                             " and no earlier immutable image is left to roll back to")
    return older[0]


def resolve_target(spec: str, listing: TagListing, repository: str = "the repository") -> TagInfo:
    """The immutable image ``spec`` names: one of the repository's immutable tags, or a digest (or unique
    prefix of 12+ hex digits) that one of them points to (pure).

    Raises InputError listing the valid choices otherwise.
    """
    if spec.startswith("sha256:"):
        if len(spec) >= _MIN_PREFIX:
            found = {t.digest for t in listing.immutable if t.digest.startswith(spec)}
        else:
            found = set()
        if len(found) == 1:
            return listing.tags_of(found.pop())[0]
        why = "is ambiguous" if found else "is not the digest of any immutable tag of"
        raise InputError(f"{spec!r} {why} {repository} ({_choices(listing)})")
    for info in listing.immutable:
        if info.tag == spec:
            return info
    raise InputError(f"{spec!r} is neither an immutable tag of {repository}"
                     f" nor a digest one points to ({_choices(listing)})")


def _choices(listing: TagListing) -> str:
    if not listing.immutable:
        return "it has no immutable tags"
    shown = [f"{t.tag} ({short_digest(t.digest)})" for t in listing.immutable[:_CHOICES_SHOWN]]
    more = len(listing.immutable) - len(shown)
    return "choose one of: " + ", ".join(shown) + (f" and {more} older" if more > 0 else "")


def guarded_move(store: TagStore, tag: str, target: str, target_tag: str | None, current: str | None,
                 action: str) -> MoveResult:
    """Point ``tag`` at image ``target`` (named by immutable tag ``target_tag``) unless it is there already;
    read it back, repair it if a concurrent manifest delete took it down, and log the move as ``action``.

    Raises OperationError when the target no longer exists (the tag is left where it was).
    """
    if current == target:
        return MoveResult(tag, current, target, target_tag, changed=False)
    try:
        store.point(tag, target)
    except NotFoundError:
        raise OperationError(f"{target_tag or 'image'} ({short_digest(target)}) no longer exists"
                             f" (deleted by a concurrent prune?); {tag} stays on {short_digest(current)}") from None
    note = _read_back(store, tag, target)
    try:
        store.record(Move(tag=tag, to=target, previous=current, action=action, when=now(), by=who(), to_tag=target_tag))
    except ImagectlError as exc:  # the move is done: a lost log entry must not report it as failed
        note = "; ".join(filter(None, [note, f"moved, but the move log could not be written: {exc}"]))
    return MoveResult(tag, current, target, target_tag, changed=True, note=note)


def _read_back(store: TagStore, tag: str, target: str) -> str:
    after = store.digest(tag)
    if after is None:  # a concurrent delete of the target's manifest took the tag with it: put it back
        store.point(tag, target)
        return "put back after a concurrent delete"
    if after != target:
        return f"another client moved it on to {short_digest(after)} meanwhile"
    return ""
