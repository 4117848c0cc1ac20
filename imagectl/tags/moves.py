"""Rollback and promotion: pointing the moving tag or a channel at an image that is already in the repository.

A move is "just switching a tag": in a registry one manifest GET (of the target, which is also the last check
that it still exists) and one manifest PUT (under the moving tag or channel); no layer is read or written,
whatever the image's size.  Reading the tags and the move log around it costs a tag listing, one HEAD per
tag and the log's manifest.

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

from dataclasses import dataclass
from typing import Sequence

from ..errors import InputError, NotFoundError, OperationError
from .history import TagInfo, TagListing, read_listing, short
from .naming import MOVING_TAG, check_channel, is_immutable
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

    def describe(self, repository: str) -> str:
        """One line for the user."""
        where = f"{self.target_tag} ({short(self.target)})" if self.target_tag else short(self.target)
        if not self.changed:
            return f"{repository}:{self.tag} already points to {where}; nothing to do"
        line = f"{repository}:{self.tag}: {short(self.previous)} -> {where}"
        return f"{line} ({self.note})" if self.note else line


def rollback(store: TagStore, to: str | None = None) -> MoveResult:
    """Point the moving tag at the previous image (see the module docstring) or at ``to``.

    Raises InputError for a ``to`` that names no immutable image of the repository, OperationError when
    there is nothing to roll back to or the target vanished, RegistryError/EngineError from the store.
    """
    listing = read_listing(store)
    if to:
        target = resolve_target(to, listing, str(store.repository))
    else:
        target = previous_target(listing.pointers.get(MOVING_TAG), store.moves(), listing)
    return guarded_move(store, MOVING_TAG, target.digest, target.tag, listing.pointers.get(MOVING_TAG), "rollback")


def promote(store: TagStore, channel: str, source: str = MOVING_TAG) -> MoveResult:
    """Point ``channel`` at ``source``: an immutable tag, a digest, ``latest`` (the image the moving tag points
    to now) or another channel.

    Raises ValidationError for a bad channel name, InputError for an unknown source, OperationError when the
    source tag does not exist or the target vanished, RegistryError/EngineError from the store.
    """
    check_channel(channel)
    listing = read_listing(store)
    if source == MOVING_TAG or (not is_immutable(source) and not source.startswith("sha256:")):
        digest = listing.pointers.get(source)
        if digest is None:
            if source != MOVING_TAG:
                raise InputError(f"--from {source!r}: {store.repository} has no such tag ({_choices(listing)})")
            raise OperationError(f"{store.repository}:{source} does not exist yet: nothing to promote (build or import first)")
        named = listing.tags_of(digest)
        to_tag = named[0].tag if named else None
    else:
        info = resolve_target(source, listing, str(store.repository))
        digest, to_tag = info.digest, info.tag
    return guarded_move(store, channel, digest, to_tag, listing.pointers.get(channel), "promote")


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
        raise OperationError(f"{tag} points to {short(current)} and no earlier immutable image is left to roll back to")
    return older[0]


def resolve_target(spec: str, listing: TagListing, repository: str = "the repository") -> TagInfo:
    """The immutable image ``spec`` names: one of the repository's immutable tags, or a digest (or unique
    prefix of 12+ hex digits) that one of them points to (pure).

    Raises InputError listing the valid choices otherwise.
    """
    if spec.startswith("sha256:"):
        found = {t.digest for t in listing.immutable if t.digest.startswith(spec)} if len(spec) >= _MIN_PREFIX else set()
        if len(found) == 1:
            return listing.tags_of(found.pop())[0]
        why = "is ambiguous" if found else "is not the digest of any immutable tag of"
        raise InputError(f"{spec!r} {why} {repository} ({_choices(listing)})")
    for info in listing.immutable:
        if info.tag == spec:
            return info
    raise InputError(f"{spec!r} is neither an immutable tag of {repository} nor a digest one points to ({_choices(listing)})")


def _choices(listing: TagListing) -> str:
    if not listing.immutable:
        return "it has no immutable tags"
    shown = [f"{t.tag} ({short(t.digest)})" for t in listing.immutable[:_CHOICES_SHOWN]]
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
        raise OperationError(f"{target_tag or 'image'} ({short(target)}) no longer exists (deleted by a concurrent "
                             f"prune?); {tag} stays on {short(current)}") from None
    note = _read_back(store, tag, target)
    store.record(Move(tag=tag, to=target, previous=current, action=action, when=now(), by=who(), to_tag=target_tag))
    return MoveResult(tag, current, target, target_tag, changed=True, note=note)


def _read_back(store: TagStore, tag: str, target: str) -> str:
    after = store.digest(tag)
    if after is None:  # a concurrent delete of the target's manifest took the tag with it: put it back
        store.point(tag, target)
        return "put back after a concurrent delete"
    if after != target:
        return f"another client moved it on to {short(after)} meanwhile"
    return ""
