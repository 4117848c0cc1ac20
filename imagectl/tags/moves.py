"""Rollback and promotion: pointing the moving tag or a channel at an image that is already in the repository.

A move is "just switching a tag": in a registry one manifest GET (of the target, which is also the last check
that it still exists) and one manifest PUT (under the moving tag or channel); no layer is read or written,
whatever the image's size.  Around it, a rollback reads: the moving tag (a manifest GET: a digest is taken
from the bytes), the log's last move of it (one tag listing and usually one record GET, see :mod:`.store`), the
one immutable tag the log names the target by, the log's position (one listing), the moving tag again right
before the PUT, the listing for a prune's deletion mark on the target after the PUT (see step 3 of the races
below), the tag back, the target's immutable tag (when the move names one), the log again (one listing; a GET
per record another writer added), and writes the log's record (one PUT).  Only a digest ``--to`` or a log that
does not name the previous image reads the whole tag listing with one read per tag.  A promotion reads the last
logged move of its source and of its channel (to name both images in the log).  The engine store
does the same with ``docker inspect`` and ``docker tag``.

Which image ``rollback`` goes back to (:func:`previous_target`), from the log's last move of the tag that
changed where it points:

1. when that move put the tag where it is now: the image it pointed to before (a second rollback therefore
   undoes the first, like ``cd -``; ``--to`` goes further back);
2. when the tag moved again since without a log entry (a process killed between its tag PUT and its log record,
   or a push by another tool): the image that move left it on, the log's last known position, which is where
   the tag was before the unlogged move;
3. otherwise (no log, an image of rule 1 or 2 that lost its immutable tags), the newest immutable tag older,
   by the time in its name, than the newest immutable tag of the current image.

Why the log is written after the tag PUT, not before: an entry written first would claim a move that never
happened whenever the process died, or the PUT was refused, in between, and the next rollback would take that
claim for the tag's last move.  Written after, the log only holds moves that happened; the one gap a kill can
leave (rule 2) is visible, because the tag no longer points where the log's last move put it.

A log that cannot be read (a corrupt record or ``imagectl-history`` written by another tool) is skipped: the
rules fall back to the immutable tags alone and the result's note says so.

``--to`` (:func:`resolve_target`) names an immutable tag of the repository or a digest (``sha256:...``, or a
unique prefix of at least 12 hex digits) one of them points to; anything else is an InputError listing the
choices.  Reserved names (``imagectl-*``, :func:`.naming.check_source`) are refused as ``--to`` and
``--from`` and as channels (:func:`.naming.check_channel`).  A move onto the image the tag already points to
changes nothing and is not logged.

Races: registries have no compare-and-swap on tags, so a move reads, verifies, writes and verifies
(:func:`guarded_move`).  What it does when another writer moved the tag meanwhile depends on the target: a
plain ``rollback`` goes to "the image before this one", worked out from where the tag pointed, so it fails (exit
1, naming the other writer) rather than undo a move it never saw; a build, an import, ``rollback --to`` and a
promotion name their image whatever the tag pointed to, so they re-plan from where the other writer left it.

1. it notes what the log holds of the tag (one tag listing), then reads the tag again right before the PUT:
   when it no longer points where the plan started from, a plain rollback stops with an OperationError naming
   the image (and the writer, when the log tells) before anything is written; any other move starts from there;
2. the target's GET right before the PUT fails when a concurrent prune deleted it (OperationError, the tag
   stays where it was) or when it is no image (a move record, a signature: NotAnImageError);
3. after the PUT it looks for a prune's deletion mark on the target (one listing, see "Deletion marks" in
   :mod:`.store`) and, while there is one, waits (at most :data:`DELETE_WAIT_S`) for that prune to decide; then the
   tag is read back, and the target's immutable tag too.  When the tag is gone, or that immutable tag no longer
   names the target, a concurrent prune deleted the image under the move: the tag is put back where it was (or
   left absent when it did not exist) and the move fails (OperationError, exit 1), naming the image, with nothing
   logged; it never reports a move onto an image that is gone, nor leaves a tag on a manifest whose immutable
   tag and attestations a prune deleted.  A tag another writer moved on right after is a note, not a failure;
4. then the log is read again: a move of the tag logged meanwhile from the same starting point means two
   writers moved it at once (a PUT held up in the network lands after another writer's whole move).  A plain
   rollback that finds the other's record loses: it puts the tag back where the other left it, logs nothing and
   fails with an OperationError naming the other; the other's move and record stand.  Any other move whose PUT
   landed last is logged as coming from where the other left the tag, so the log stays one chain.  Only two
   moves whose PUTs both land before either reads the log again are both logged from the same image; the one
   whose PUT landed first then says, in its note, that the tag moved on.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace

from ..errors import ImagectlError, InputError, NotFoundError, OperationError
from ..reference import check_tag
from .history import TagInfo, TagListing, read_listing
from .naming import MOVING_TAG, check_channel, check_source, is_immutable, short_digest, tag_time
from .store import Move, MoveAction, TagStore, last_real_move, now, who

_CHOICES_SHOWN = 10
_MIN_PREFIX = len("sha256:") + 12
DELETE_WAIT_S = 60.0  # how long a move waits for a prune that marked its target to decide
_DELETE_POLL_S = 0.1


@dataclass(frozen=True)
class MoveResult:
    """What a rollback or promotion did."""

    tag: str  # the moving tag or channel
    previous: str | None  # the digest it pointed to before (None: it did not exist)
    target: str  # the digest it points to now
    target_tag: str | None  # the immutable tag of the target, when one names it
    _: KW_ONLY
    changed: bool  # False: it already pointed there (nothing written, nothing logged)
    note: str = ""  # e.g. another client moved the tag again right after


def rollback(store: TagStore, to: str | None = None) -> MoveResult:
    """Point the moving tag at the previous image (see the module docstring) or at ``to``.

    The usual cases read one tag listing and no HEAD per tag: the moving tag, its last logged move and the one
    immutable tag the target is named by are read directly; only a digest ``to``, or a log that does not name
    the previous image, reads every tag.  Raises ValidationError for a reserved ``to``, InputError for a ``to``
    that names no immutable image of the repository, OperationError when there is nothing to roll back to or
    the target vanished, RegistryError/EngineError from the store.
    """
    if to:
        check_source(to, "--to")
    current = store.digest(MOVING_TAG)
    last = store.last_move(MOVING_TAG)
    if to:
        target = _named_target(store, to)
    else:
        logged = [last] if last else []
        target = _logged_previous(store, current, last) or previous_target(current, logged, read_listing(store))
    result = guarded_move(store, MOVING_TAG, target.digest, target.tag, current, "rollback",
                          position_name(last, current), derived=not to)
    return _with_log_problems(result, store)


def promote(store: TagStore, channel: str, source: str = MOVING_TAG) -> MoveResult:
    """Point ``channel`` at ``source``: an immutable tag, a digest, ``latest`` (the image the moving tag points
    to now) or another channel.

    Raises ValidationError for a bad channel name or a reserved source, InputError for an unknown source,
    OperationError when the source tag does not exist or the target vanished, RegistryError/EngineError from
    the store.
    """
    check_channel(channel)
    check_source(source)
    current = store.digest(channel)
    if is_immutable(source) or source.startswith("sha256:"):
        info = _named_target(store, source)
        return _with_log_problems(guarded_move(store, channel, info.digest, info.tag, current, "promote"), store)
    digest = store.digest(check_tag(source))
    if digest is None:
        if source != MOVING_TAG:
            choices = _choices(read_listing(store))
            raise InputError(f"--from {source!r}: {store.repository.familiar} has no such tag ({choices})")
        raise OperationError(f"{store.repository.familiar}:{source} does not exist yet:"
                             " nothing to promote (build or import first)")
    name = position_name(store.last_move(source), digest)
    return _with_log_problems(guarded_move(store, channel, digest, name, current, "promote"), store)


def _with_log_problems(result: MoveResult, store: TagStore) -> MoveResult:
    """``result`` with a note when reading the move log skipped something (then the immutable tags decided)."""
    if not store.problems:
        return result
    note = f"the move log has {len(store.problems)} unreadable part(s), ignored (see imagectl history)"
    return replace(result, note="; ".join(filter(None, [result.note, note])))


def _named_target(store: TagStore, spec: str) -> TagInfo:
    """The image ``spec`` names (see :func:`resolve_target`); an existing immutable tag costs one read."""
    if is_immutable(spec):
        digest = store.digest(spec)
        if digest is not None:
            return TagInfo(spec, digest, tag_time(spec))  # type: ignore[arg-type]
    return resolve_target(spec, read_listing(store), store.repository.familiar)


def logged_previous(last: Move | None, current: str | None) -> str | None:
    """The image a rollback from ``current`` goes back to per the log's last real move ``last`` of the tag (rules
    1 and 2 of the module docstring), or None when the log does not tell (pure)."""
    if last is None or current is None:
        return None
    if last.to == current:
        return last.previous
    return last.to


def position_name(last: Move | None, digest: str | None) -> str | None:
    """The immutable tag the log's last move ``last`` of a tag names ``digest`` by, when that move left the tag
    on ``digest`` (its ``to_tag``), or None (pure)."""
    if last is None or digest is None or last.to != digest:
        return None
    return last.to_tag if last.to_tag and is_immutable(last.to_tag) else None


def _logged_previous(store: TagStore, current: str | None, last: Move | None) -> TagInfo | None:
    """Rules 1 and 2 of :func:`previous_target` read cheaply: the previous image by the immutable tag the log
    named it by, if that tag still points to it; None when the log does not tell (then the listing decides)."""
    previous = logged_previous(last, current)
    if last is None or previous is None:
        return None
    name = last.from_tag if last.to == current else last.to_tag
    if not name or not is_immutable(name) or store.digest(name) != previous:
        return None
    return TagInfo(name, previous, tag_time(name))  # type: ignore[arg-type]


def previous_target(current: str | None, moves: Sequence[Move], listing: TagListing, tag: str = MOVING_TAG) -> TagInfo:
    """The image a rollback of ``tag`` goes back to (pure; rules in the module docstring).

    Raises OperationError when ``tag`` does not exist or no earlier image is left.
    """
    if current is None:
        raise OperationError(f"{tag} does not exist yet: nothing to roll back (name an image with --to)")
    previous = logged_previous(last_real_move(moves, tag), current)
    if previous is not None:
        earlier = listing.tags_of(previous)
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


def guarded_move(  # noqa: PLR0913 - the facts of one move; build, import, the tests and bench pass them as is
        store: TagStore, tag: str, target: str, target_tag: str | None, current: str | None, action: MoveAction,
        current_tag: str | None = None, *, derived: bool = False) -> MoveResult:
    """Point ``tag`` at image ``target`` (named by immutable tag ``target_tag``) unless it is there already;
    read it back, repair it if a concurrent manifest delete took it down, and log the move as ``action``.

    ``current_tag`` names ``current`` in the log entry; when not given it is looked up in the log's last move of
    ``tag`` (one listing and usually one record read in a registry).  The log is written after the move (why:
    the module docstring); a log that cannot be written leaves the move done, with a note.

    Another writer moving ``tag`` meanwhile (the races in the module docstring): when the target was ``derived``
    from where the tag pointed (a plain rollback: "the image before this one"), the move fails, naming that
    writer, and leaves the tag where the other move put it.  Otherwise (a build, an import, ``rollback --to``, a
    promotion) the target does not depend on where the tag was: the move re-plans from where the other writer
    left the tag, and its record follows the other's.  Raises OperationError when the target no
    longer exists (the tag is left where it was), when a derived move lost a race, NotAnImageError for a target
    that is no image.
    """
    if current == target:
        return MoveResult(tag, current, target, target_tag, changed=False)
    if current_tag is None and current is not None:
        current_tag = _current_name(store, tag, current)
    position = store.log_position(tag)
    now_at = store.digest(tag)
    if now_at != current:
        if derived:
            raise _moved_since(store, tag, current, now_at, action)
        if now_at == target:
            return MoveResult(tag, now_at, target, target_tag, changed=False, note="another writer moved it there")
        current, current_tag = now_at, _current_name(store, tag, now_at) if now_at else None
    try:
        store.point(tag, target)
    except NotFoundError:
        raise OperationError(f"{target_tag or 'image'} ({short_digest(target)}) no longer exists"
                             f" (deleted by a concurrent prune?); {tag} stays on {short_digest(current)}") from None
    _await_prune(store, tag, target, action)
    stands, note = _read_back(store, tag, target, target_tag, current, action)
    rival = _rival(store.moves_since(tag, position), current)
    if rival is not None and derived:
        raise _lost_race(store, tag, target, rival, action)
    if rival is not None and stands:  # its PUT landed after the rival's: it follows that move in the log
        current, current_tag = rival.to, rival.to_tag
        note = "; ".join(filter(None, [note, f"after {_describe(rival)} moved it to {short_digest(rival.to)}"]))
    move = Move(tag=tag, to=target, previous=current, action=action, when=now(), by=who(), to_tag=target_tag,
                from_tag=current_tag)
    try:
        store.record(move)
    except ImagectlError as exc:  # the move is done: a lost log entry must not report it as failed
        note = "; ".join(filter(None, [note, f"moved, but the move log could not be written: {exc}"]))
    return MoveResult(tag, current, target, target_tag, changed=True, note=note)


def _current_name(store: TagStore, tag: str, current: str) -> str | None:
    """The immutable tag the log's last move of ``tag`` names ``current`` by; None when the log cannot tell."""
    try:
        return position_name(store.last_move(tag), current)
    except ImagectlError:  # only a name for the log entry: the move itself must not fail for it
        return None


def _moved_since(store: TagStore, tag: str, current: str | None, now_at: str | None,
                 action: MoveAction) -> OperationError:
    """The error of a derived move whose tag no longer points to ``current``, where its plan started from (step 1
    of the races in the module docstring), naming the image (and its writer when the log tells)."""
    last = _last_move_quietly(store, tag)
    by = f" by {_describe(last)}" if last is not None and last.to == now_at else ""
    where = f"to {short_digest(now_at)}" if now_at else "away (it is gone)"
    return OperationError(f"{store.repository.familiar}:{tag} was moved from {short_digest(current)} {where}{by} "
                          f"since this {action} read it; nothing changed: look at imagectl history, then run it again")


def _rival(moves: Sequence[Move], current: str | None) -> Move | None:
    """The newest of ``moves`` (logged by others during this move) that moved the tag away from ``current`` too:
    another writer's move from the same starting point, whose PUT met this one's (pure)."""
    return next((m for m in reversed(moves) if m.previous == current and m.to != current), None)


def _lost_race(store: TagStore, tag: str, target: str, rival: Move, action: MoveAction) -> OperationError:
    """Undo this move's PUT for ``rival``'s (step 4 of the races): put ``tag`` back where ``rival`` left it when
    this PUT overwrote it; the error to fail with, naming the rival."""
    done = f"{tag} stays on {_named(rival.to, rival.to_tag)}, where it left it"
    if rival.to != target:
        try:
            if store.digest(tag) == target:
                store.point(tag, rival.to)
                done = f"{tag} is put back on {_named(rival.to, rival.to_tag)}, where it left it"
        except ImagectlError as exc:
            done = f"{tag} could not be put back on {_named(rival.to, rival.to_tag)} ({exc})"
    return OperationError(
        f"{store.repository.familiar}:{tag}: {_describe(rival)} moved it from {short_digest(rival.previous)} to "
        f"{_named(rival.to, rival.to_tag)} while this {action} was under way; {done}, and this {action} is not "
        "logged: look at imagectl history, then run it again if it is still wanted")


def _describe(move: Move) -> str:
    return f"{move.by} ({move.action} at {move.when})"


def _named(digest: str, tag: str | None) -> str:
    return f"{tag} ({short_digest(digest)})" if tag else short_digest(digest)


def _last_move_quietly(store: TagStore, tag: str) -> Move | None:
    try:
        return store.last_move(tag)
    except ImagectlError:  # only to name a writer in a message
        return None


def _await_prune(store: TagStore, tag: str, target: str, action: MoveAction) -> None:
    """Wait while a prune has marked ``target`` for deletion (step 3 of the races: one listing when none has).
    Raises OperationError when a mark is still there after DELETE_WAIT_S (``tag`` is left as it is)."""
    deadline = time.monotonic() + DELETE_WAIT_S
    while store.deleting(target):
        if time.monotonic() > deadline:
            raise OperationError(f"{store.repository.familiar}:{tag}: a prune has been deleting {short_digest(target)} "
                                 f"for over {DELETE_WAIT_S:g} s while this {action} pointed {tag} at it; whether the "
                                 "image stays is not known: look at imagectl history, then run it again")
        time.sleep(_DELETE_POLL_S)


def _read_back(store: TagStore, tag: str, target: str, target_tag: str | None, current: str | None,  # noqa: PLR0913
               action: MoveAction) -> tuple[bool, str]:
    """(whether ``tag`` points to ``target`` after the PUT, a note).  Raises OperationError when a concurrent prune
    deleted ``target`` under the move (the tag gone with it, or its immutable tag gone): ``tag`` is put back on
    ``current`` first (left absent when it had none)."""
    after = store.digest(tag)
    pruned = after is None or (after == target and target_tag is not None and is_immutable(target_tag)
                               and store.digest(target_tag) != target)
    if pruned:
        raise _pruned_under(store, tag, target, target_tag, current, action)
    if after != target:
        return False, f"another client moved it on to {short_digest(after)} meanwhile"
    return True, ""


def _pruned_under(store: TagStore, tag: str, target: str, target_tag: str | None, current: str | None,  # noqa: PLR0913
                  action: MoveAction) -> OperationError:
    """The error of a move whose target a concurrent prune deleted, after putting ``tag`` back on ``current``."""
    if current is None:
        done = _take_down(store, tag, target)
    else:
        try:
            store.point(tag, current)
            done = f"{tag} is back on {short_digest(current)}"
        except ImagectlError as exc:
            done = f"{tag} could not be put back on {short_digest(current)} ({exc})"
    return OperationError(f"{store.repository.familiar}:{tag}: {_named(target, target_tag)} was deleted by a concurrent"
                          f" prune while this {action} pointed {tag} at it; {done}; nothing is logged: pick another "
                          "image (imagectl history)")


def _take_down(store: TagStore, tag: str, target: str) -> str:
    """Remove ``tag``, which did not exist before this move, from the deleted ``target``; what was done.

    Either the PUT brought ``target``'s manifest back (the tag names it) or, landing in the middle of the prune's
    manifest delete (a registry writes a manifest, then its tag; and deletes a manifest, then its tags), it left
    the tag naming nothing: listed, unreadable.  Then the manifest is put back first (from the bytes read for the
    PUT), so that deleting it takes the tag with it."""
    try:
        if store.digest(tag) is None:
            if tag not in store.tags():
                return f"{tag} does not exist, as before"
            store.point(tag, target)
        store.delete(tag)
    except ImagectlError as exc:
        return f"{tag} is left naming the deleted image ({exc})"
    return f"{tag} does not exist, as before"
