"""Where a profile's tags live: a registry repository, or the local engine when no registry is configured.

Both stores offer the same small interface, so history, rollback, promotion and pruning are written once:

- ``tags()``: every tag of the repository but imagectl's own records (``imagectl-*``, see
  :func:`.naming.is_reserved`), so no listing, plan or prune ever sees them;
- ``digest(tag)``: what a tag points to (manifest digest in a registry, read from the manifest's bytes, never a
  header alone; image id in the engine), or None;
- ``point(tag, target)``: move ``tag`` to the image ``target`` (a digest/id) — in a registry one manifest GET
  and one manifest PUT, no layer moves; a target that is no image (an artifact) is refused;
- ``delete(tag)``, ``labels(target)`` and ``created(target)``;
- images for several platforms (an OCI image index or a Docker manifest list, see "Indexes" below):
  ``children(target)`` (the manifests an index points to, each with its platform; none for an image),
  ``platforms(target)`` (one :class:`PlatformImage` per platform: an image has one) and
  ``delete_untagged(digest)`` (the child manifest of an index prune deleted);
- the log of past moves of moving tags and channels: ``moves(newest)`` (oldest first, at most the newest
  ``newest`` and :data:`MOVES_READ`), ``last_move(tag)`` (the newest logged move that took ``tag`` somewhere
  else, read cheaply), ``log_position(tag)`` and ``moves_since(tag, position)`` (what other writers logged
  of ``tag`` meanwhile: how :func:`.moves.guarded_move` tells a concurrent move) and ``record(move)``;
  ``problems`` collects what reading the log skipped (a corrupt or foreign record) so ``history`` can report it;
- ``tag_with_key(key)``: the newest immutable tag whose key part is ``key``'s (a build with that build key,
  or an import of that source, exists): one tag listing.

The move log in a registry
--------------------------
The registry keeps the log itself, in the profile's own repository, so any machine that can reach it sees the
same history.  Each move is its own record: a small OCI artifact manifest (``artifactType``
``application/vnd.imagectl.move.v1+json``, the empty config ``{}``, no layers) whose annotation
``org.imagectl.move`` holds the move as JSON, under the tag :func:`record_tag` makes::

    imagectl-move-<UTC time with microseconds>-<12 random hex digits>-<the tag moved>

(a moved tag too long for that is replaced by ``_`` and 24 hex digits of its sha256).  The time is a logical
clock (:func:`record_time`): the writer's clock, or one microsecond after the newest record its last listing
showed when that is later, so names sort in the order records were written whatever the writers' clocks (a
record from a machine a year ahead is followed, not preceded, by the moves made after it; ``when`` in the
record keeps the writer's own clock), and the log is the set of these tags read back in name order.  The single manifest
``imagectl-history`` earlier versions kept (every move in one annotation, rewritten on each move) is still
read, as the oldest part of the log, and never written again: a repository migrates by simply being used.

Guarantee: a move whose record PUT the registry answered stays in the log while it is among the newest
:data:`MOVES_KEEP` records.  Writers never read, merge or rewrite each other's records, so concurrent
writers (processes, machines, any number) cannot erase each other's entries; each record's manifest is unique
(it carries its own tag name), so a manifest delete never takes another record down; ``prune`` never sees
``imagectl-*`` tags.  Not guaranteed: a process killed between moving a tag and writing its record leaves that
move unlogged (``rollback`` then starts from the log's last known position, see :mod:`.moves`), and two records
written at once by writers that had not seen each other's are ordered by their clocks.  ``record`` deletes a few
records beyond the newest MOVES_KEEP per call, so the repository does not fill up with them.  A record or legacy
log that cannot be read (corrupt, written by another tool) is skipped and described in ``problems``, never an
error.

Requests (registry): ``record`` is one manifest PUT (the first time in a repository without the empty config
blob: a failed PUT, one blob upload and the PUT again; with more than MOVES_KEEP records, one GET and one
DELETE per old record removed, at most :data:`TRIM_PER_RECORD`).  ``last_move(tag)`` is one tag listing and
one manifest GET per record of ``tag`` (its name says which tag it moved), newest first, until one moved it:
usually one GET, plus one GET of ``imagectl-history`` only when no record moved ``tag`` and that tag exists.
``moves(newest)`` (``history``) is one tag listing, one GET per record read (the newest ``newest``, at most
MOVES_READ) and one GET of ``imagectl-history`` when the repository still has one and fewer records than that.
``log_position(tag)`` is one tag listing; ``moves_since(tag, position)`` one tag listing and one GET per new
record of ``tag`` (usually none).  ``begin_delete`` is one manifest PUT (as ``record``), ``end_delete`` one
DELETE, ``deleting`` one tag listing, ``image_id`` one GET.

The local engine keeps its log in a JSON file under ``$XDG_STATE_HOME/imagectl/history`` (appends are
serialised with a lock file, so none is lost; a file that cannot be read is kept beside it as ``.unreadable``
before the next append).

Indexes
-------
A tag may point to an image index (or a Docker manifest list): one manifest naming one image manifest per
platform by digest, the children untagged.  Moving such a tag is still one GET and one PUT, of the index: every
platform moves at once.  ``labels`` and ``created`` of an index are those of its :func:`primary_image`, the
``linux/amd64`` child (else the first), whatever the host, so every machine reads the same; ``platforms`` reads
every child's config (one manifest GET and one blob GET each) so history can show the platforms and say where
children disagree.  Entries that are no platform's image (BuildKit's attestation manifests, platform
``unknown/unknown``) are children but not platforms.  ``digest(tag)`` reads the tag's manifest anyway (the digest
comes from its bytes): the store notes which digests are indexes then (keeping only the indexes' bytes), so
``children`` of a digest read that way costs nothing more.

Deletion marks
--------------
Registries have no compare-and-swap, so ``prune`` and a move agree through the registry itself, as two writers
of Dekker's algorithm do: before it deletes an image, prune puts a *deletion mark* (:meth:`begin_delete`), a
small artifact manifest under ``imagectl-deleting-<12 hex digits of the image's digest>-<UTC time>-<12 random hex
digits>``, then reads every tag (a listing, and the moving tag and channels again), deletes the image only when
none of them names it, and removes the mark when it has put back whatever went down with it
(:meth:`end_delete`).  A move writes its tag first and then looks for a mark on its target (:meth:`deleting`, one
listing), waiting while there is one.  Whichever writes first is seen by the other: either prune's reads show the
moved tag (and prune keeps the image), or the move sees the mark and reads its tag back only when prune has
decided (see :mod:`.moves` and :mod:`.prune`).  A mark older than :data:`DELETE_MARK_STALE` (a prune killed in
between) is ignored, and the next prune of the repository removes it (:meth:`stale_marks`,
:meth:`remove_stale_mark`); a mark's manifest carries its own name, so removing one never takes another tag down.  The
local engine needs none: removing one of its tags never touches another.

Races: a registry that cannot delete a tag alone deletes the manifest, and with it every tag pointing to it.
A :class:`RegistryTagStore` therefore keeps the bytes of every manifest it has read for ``point`` or deleted,
so ``point`` can put such a manifest back (the layers stay in the repository until garbage collection) when
a moving tag that moved onto it meanwhile went down with it; see :mod:`imagectl.tags.prune`.
"""

from __future__ import annotations

import fcntl
import getpass
import hashlib
import json
import os
import re
import secrets
import socket
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Protocol

from ..engine import Engine
from ..errors import AuthError, NotFoundError, OperationError, RegistryError
from ..paths import is_file
from ..reference import Reference
from .naming import RESERVED_PREFIX, is_immutable, is_reserved, short_digest, tags_with_key

if TYPE_CHECKING:  # the registry package loads requests: only a registry store needs it (see RegistryTagStore.record)
    from ..registry.manifest import ImageConfig, Manifest

MOVE_PREFIX = f"{RESERVED_PREFIX}move-"
MOVE_ARTIFACT = "application/vnd.imagectl.move.v1+json"
MOVE_ANNOTATION = "org.imagectl.move"
RECORD_ANNOTATION = "org.imagectl.move.record"  # the record's own tag: makes every record's manifest unique
DELETING_PREFIX = f"{RESERVED_PREFIX}deleting-"  # a prune's deletion mark (see "Deletion marks")
DELETING_ARTIFACT = "application/vnd.imagectl.deleting.v1+json"
DELETE_MARK_STALE = timedelta(minutes=10)  # an older mark is a killed prune's: ignored
_MARK_HEX = 12
HISTORY_TAG = f"{RESERVED_PREFIX}history"  # the single-manifest log of earlier versions: read, never written
HISTORY_ANNOTATION = "org.imagectl.history"
HISTORY_KEEP = 500  # moves the local engine's log file keeps
MOVES_READ = 500  # the newest records moves() and last_move() read
MOVES_KEEP = 2000  # records older than the newest MOVES_KEEP are deleted by record(), a few at a time
TRIM_PER_RECORD = 10
_MAX_TAG = 128
_RECORD_RE = re.compile(r"^imagectl-move-(?P<time>[0-9]{8}T[0-9]{12})Z-[0-9a-f]{12}-(?P<key>[A-Za-z0-9_.-]+)$")
_RECORD_TIME = "%Y%m%dT%H%M%S%f"
_TICK = timedelta(microseconds=1)
_KEY_ROOM = _MAX_TAG - len("imagectl-move-20240101T000000000000Z-000000000000-")
_EMPTY_CONFIG = b"{}"
_EMPTY_CONFIG_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@dataclass(frozen=True)
class ChildManifest:
    """One entry of an image index: the digest of the manifest it names, its platform (``linux/arm64``; "" when
    the index names none) and whether it is an attachment, no platform's image (an attestation manifest)."""

    digest: str
    platform: str
    attachment: bool = False


@dataclass(frozen=True)
class PlatformImage:
    """One platform's image of a tag's target: its platform (``linux/amd64``; "" when unknown, as in the local
    engine), the digest of its image manifest (the target itself for a plain image), its creation time (ISO 8601,
    or "") and its labels."""

    platform: str
    digest: str
    created: str
    labels: Mapping[str, str]


PRIMARY_PLATFORM = "linux/amd64"


def primary_image(images: Sequence[PlatformImage]) -> PlatformImage | None:
    """The image whose labels and creation time stand for a target of several platforms: the ``linux/amd64``
    one, else the first; None for none (pure).  The same on every host, so every machine shows the same facts."""
    return next((i for i in images if i.platform == PRIMARY_PLATFORM), images[0] if images else None)


LogPosition = frozenset[str]
"""What the move log held of one tag at some moment: the ids of its entries (record tags in a registry), so
:meth:`TagStore.moves_since` can tell which moves were logged after it (by other writers)."""

MoveAction = Literal["build", "rollback", "promote", "import"]
"""What moved a tag: the four actions imagectl logs.  A Literal, not an Enum: a log written by a newer imagectl
may name another action, which is read back as written (:func:`move_from_json`)."""


@dataclass(frozen=True)
class Move:
    """One move of a moving tag or channel."""

    tag: str
    to: str  # digest (registry) or image id (engine)
    previous: str | None
    action: MoveAction
    when: str
    by: str
    to_tag: str | None = None  # the immutable tag moved to, when known
    from_tag: str | None = None  # the immutable tag of ``previous``, when known


def who() -> str:
    """``user@host`` for the move log."""
    try:
        user = getpass.getuser()
    except Exception:  # getuser raises various errors without a passwd entry
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def now() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


class TagStore(Protocol):
    """The tag operations history, rollback, promotion and prune need."""

    repository: Reference
    problems: list[str]

    def tags(self) -> list[str]: ...
    def digest(self, tag: str) -> str | None: ...
    def point(self, tag: str, target: str) -> None: ...
    def delete(self, tag: str) -> None: ...
    def labels(self, target: str) -> Mapping[str, str]: ...
    def created(self, target: str) -> str: ...
    def children(self, target: str) -> tuple[ChildManifest, ...]: ...
    def platforms(self, target: str) -> tuple[PlatformImage, ...]: ...
    def delete_untagged(self, digest: str) -> None: ...
    def moves(self, newest: int | None = None) -> list[Move]: ...
    def last_move(self, tag: str) -> Move | None: ...
    def log_position(self, tag: str) -> LogPosition: ...
    def moves_since(self, tag: str, position: LogPosition) -> list[Move]: ...
    def record(self, move: Move) -> None: ...
    def tag_with_key(self, key: str) -> str | None: ...
    def image_id(self, target: str) -> str | None: ...
    def begin_delete(self, digest: str) -> str | None: ...
    def end_delete(self, mark: str | None) -> None: ...
    def deleting(self, digest: str) -> bool: ...
    def stale_marks(self) -> list[str]: ...
    def remove_stale_mark(self, mark: str) -> bool: ...


class TagRegistry(Protocol):
    """What a :class:`RegistryTagStore` asks of a registry (:class:`imagectl.registry.RegistryClient` is one).

    Each method raises RegistryError (NotFoundError, AuthError) as the client documents."""

    def list_tags(self, repository: str) -> list[str]: ...
    def head_manifest(self, repository: str, reference: str) -> str | None: ...
    def get_manifest(self, repository: str, reference: str) -> Manifest: ...
    def put_manifest(self, repository: str, reference: str, manifest: Manifest) -> str: ...
    def delete_tag(self, repository: str, tag: str) -> bool: ...
    def delete_manifest(self, repository: str, digest: str) -> None: ...
    def get_image_config(self, repository: str, manifest: Manifest) -> ImageConfig: ...
    def upload_blob(self, repository: str, data: bytes, digest: str | None = None) -> str: ...


# --------------------------------------------------------------------------------------------- the log, pure


def record_key(tag: str) -> str:
    """How a record's tag names the tag moved: the tag itself, or ``_`` and 24 hex digits of its sha256 when it
    is too long to fit (pure)."""
    return tag if len(tag) <= _KEY_ROOM else "_" + hashlib.sha256(tag.encode()).hexdigest()[:24]


def record_tag(tag: str, when: datetime, nonce: str) -> str:
    """The tag of the log record of a move of ``tag`` written at ``when`` (UTC) with ``nonce`` (12 hex digits):
    names sort by ``when`` (pure)."""
    return f"{MOVE_PREFIX}{when.astimezone(timezone.utc).strftime('%Y%m%dT%H%M%S%fZ')}-{nonce}-{record_key(tag)}"


def key_of_record(name: str) -> str | None:
    """The :func:`record_key` a record tag ``name`` carries, or None for a name :func:`record_tag` did not make."""
    match = _RECORD_RE.fullmatch(name)
    return match["key"] if match else None


def time_of_record(name: str) -> datetime | None:
    """The time a record tag ``name`` carries (UTC), or None for a name :func:`record_tag` did not make."""
    match = _RECORD_RE.fullmatch(name)
    if not match:
        return None
    try:
        return datetime.strptime(match["time"], _RECORD_TIME).replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def record_time(now: datetime, names: Sequence[str]) -> datetime:
    """The time to name a new record by: ``now``, or one microsecond after the newest of the record tags ``names``
    when that is not earlier (pure).

    So a record always sorts after every record its writer has seen, whatever the clocks: one written by a machine
    whose clock ran a year ahead is followed, not preceded, by the moves made after it (a logical clock).
    """
    newest = max(filter(None, map(time_of_record, names)), default=None)
    return now if newest is None or now > newest else newest + _TICK


def _artifact_body(artifact_type: str, annotations: dict[str, str]) -> bytes:
    """The manifest bytes of an empty OCI artifact of ``artifact_type`` carrying ``annotations`` (pure): what a move
    record and a deletion mark are, never an image."""
    body = {
        "schemaVersion": 2,
        "mediaType": _OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": _EMPTY_CONFIG_DIGEST, "size": 2},
        "layers": [],
        "annotations": annotations,
    }
    return json.dumps(body, sort_keys=True).encode()


def record_body(move: Move, name: str) -> bytes:
    """The manifest bytes of the record ``name`` of ``move`` (pure; see the module docstring)."""
    return _artifact_body(MOVE_ARTIFACT, {MOVE_ANNOTATION: json.dumps(asdict(move), sort_keys=True),
                                          RECORD_ANNOTATION: name})


def mark_prefix(digest: str) -> str:
    """The start of every deletion mark's tag of the image ``digest`` (pure; see "Deletion marks")."""
    return f"{DELETING_PREFIX}{digest.rpartition(':')[2][:_MARK_HEX]}-"


def mark_tag(digest: str, when: datetime, nonce: str) -> str:
    """The tag of a deletion mark of image ``digest`` put at ``when`` (UTC) with ``nonce`` (12 hex digits) (pure)."""
    return f"{mark_prefix(digest)}{when.astimezone(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{nonce}"


def fresh_marks(names: Sequence[str], digest: str, now: datetime) -> list[str]:
    """The deletion marks of image ``digest`` among the tags ``names`` not older than DELETE_MARK_STALE at ``now``;
    a mark whose time cannot be read counts (pure)."""
    prefix, found = mark_prefix(digest), []
    for name in names:
        if not name.startswith(prefix):
            continue
        try:
            when = datetime.strptime(name[len(prefix):].partition("-")[0], "%Y%m%dT%H%M%SZ")
        except ValueError:
            found.append(name)
            continue
        if now - when.replace(tzinfo=timezone.utc) <= DELETE_MARK_STALE:
            found.append(name)
    return found


def stale_marks(names: Sequence[str], now: datetime) -> list[str]:
    """The deletion marks among the tags ``names`` older than DELETE_MARK_STALE at ``now``: a killed prune's (pure).
    A mark whose time cannot be read is not among them (:func:`fresh_marks` counts it as fresh)."""
    found = []
    for name in names:
        if not name.startswith(DELETING_PREFIX):
            continue
        stamp = name[len(DELETING_PREFIX) + _MARK_HEX + 1:].partition("-")[0]
        try:
            when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        if now - when > DELETE_MARK_STALE:
            found.append(name)
    return found


def mark_body(digest: str, name: str) -> bytes:
    """The manifest bytes of the deletion mark ``name`` of image ``digest`` (pure): an artifact, never an image."""
    return _artifact_body(DELETING_ARTIFACT, {"org.imagectl.deleting": digest, RECORD_ANNOTATION: name})


def last_real_move(moves: Sequence[Move], tag: str) -> Move | None:
    """The newest of ``moves`` (oldest first) that took ``tag`` somewhere else (pure)."""
    return next((m for m in reversed(moves) if m.tag == tag and m.previous != m.to), None)


def with_from_tags(moves: Sequence[Move]) -> list[Move]:
    """``moves`` (oldest first) with ``from_tag`` filled in where the log names the image a move left: the
    immutable tag of the newest earlier move onto it (pure; for logs written before moves carried it)."""
    names: dict[str, str] = {}
    out = []
    for m in moves:
        if m.from_tag is None and m.previous in names:
            m = replace(m, from_tag=names[m.previous])
        out.append(m)
        if m.to_tag and is_immutable(m.to_tag):
            names[m.to] = m.to_tag
    return out


_MOVE_FIELDS = frozenset(f.name for f in fields(Move))
_REQUIRED = ("tag", "to", "action", "when", "by")


def move_from_json(item: object) -> Move:
    """A Move from its JSON object; keys a newer imagectl may add are ignored, and an action it may add is kept as
    written, so older clients can still read it.

    Raises ValueError for anything that is not a move (not an object, a missing or non-text field).
    """
    if not isinstance(item, dict):
        raise ValueError("a move is not a JSON object")
    values = {k: v for k, v in item.items() if k in _MOVE_FIELDS}
    for name in _MOVE_FIELDS:
        required = name in _REQUIRED
        value = values.get(name)
        if (required and not (isinstance(value, str) and value)) or not (value is None or isinstance(value, str)):
            raise ValueError(f"a move without a text {name!r}")
    return Move(**values)


def parse_moves(text: object, where: str) -> tuple[list[Move], list[str]]:
    """(the moves of a whole-log JSON list, what was skipped): never raises; an unreadable log or entry (or a
    ``text`` that is no text at all) is described in the second list, one line each."""
    try:
        items = json.loads(text)  # type: ignore[arg-type]  # not text: a TypeError, reported below
    except (ValueError, TypeError) as exc:
        return [], [f"{where}: unreadable move log ({_first_line(exc)}); ignored"]
    if not isinstance(items, list):
        return [], [f"{where}: the move log is not a JSON list; ignored"]
    moves, bad = [], 0
    for item in items:
        try:
            moves.append(move_from_json(item))
        except ValueError:
            bad += 1
    return moves, ([f"{where}: {bad} of {len(items)} move entries unreadable; ignored"] if bad else [])


def _entry_id(move: Move) -> str:
    """How a local log entry is told from another: all it says."""
    return json.dumps(asdict(move), sort_keys=True)


class NotAnImageError(OperationError):
    """A tag was to be pointed at a manifest that is no image (exit 1)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _annotations(manifest: Manifest) -> Mapping[str, Any]:
    """The annotations of a manifest; raises RegistryError for bytes that are not a JSON object."""
    found = manifest.json().get("annotations")
    return found if isinstance(found, dict) else {}


# --------------------------------------------------------------------------------------------- registry


class RegistryTagStore:
    """Tags of one repository in a registry, through :class:`imagectl.registry.RegistryClient`."""

    def __init__(self, client: TagRegistry, repository: Reference,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.client = client
        self.repository = repository
        self.problems: list[str] = []
        self._path = repository.path
        self._clock = clock
        self._configs: dict[str, ImageConfig] = {}
        self._indexes: dict[str, Manifest | None] = {}  # digest -> its bytes if an index, None if an image manifest
        self._manifests: dict[str, Manifest] = {}  # digest -> Manifest read for point() or kept before a delete
        self._records: list[str] = []  # the record tags the last listing showed, oldest first
        self._written: set[str] = set()  # the record tags this store wrote
        self._marks: dict[str, str] = {}  # deletion mark tag -> its manifest's digest, for marks this store put

    def tags(self) -> list[str]:
        """Every tag but imagectl's own records; [] for a repository that does not exist yet."""
        return sorted(t for t in self._all_tags() if not is_reserved(t))

    def _all_tags(self) -> list[str]:
        try:
            return list(self.client.list_tags(self._path))
        except NotFoundError:
            return []

    def tag_with_key(self, key: str) -> str | None:
        """The newest immutable tag with ``key``'s key part, or None (one tag listing)."""
        return next(iter(tags_with_key(self.tags(), key)), None)

    def digest(self, tag: str) -> str | None:
        """The manifest digest ``tag`` points to (from the manifest's bytes: one GET), or None; a digest is
        asked with one HEAD.  Notes whether it is an index (see "Indexes" in the module docstring)."""
        if tag.startswith("sha256:"):
            return self.client.head_manifest(self._path, tag)
        try:
            manifest = self.client.get_manifest(self._path, tag)
        except NotFoundError:
            return None
        self._indexes[manifest.digest] = manifest if manifest.is_index else None
        return manifest.digest

    def point(self, tag: str, target: str) -> None:
        """Move ``tag`` to manifest ``target``: one GET and one PUT of the manifest, no blob moves.

        The GET is also the last check that ``target`` still exists, and is an image.  When it is gone but this
        store read or deleted it earlier, the kept bytes are put back instead (the repair of a tag a concurrent
        manifest delete took down).  Raises NotFoundError if ``target`` is gone and unknown, NotAnImageError if it
        is an artifact (a move record, a signature: :meth:`~imagectl.registry.manifest.Manifest.artifact_kind`),
        RegistryError otherwise.
        """
        try:
            manifest = self.client.get_manifest(self._path, target)
        except NotFoundError:
            if target not in self._manifests:
                raise
            manifest = self._manifests[target]
        kind = manifest.artifact_kind()
        if kind is not None:
            raise NotAnImageError(f"{self.repository.familiar}: {short_digest(target)} is not an image ({kind[:100]}); "
                                  f"refusing to point {tag} at it")
        self._manifests[target] = manifest
        self.client.put_manifest(self._path, tag, manifest)

    def delete(self, tag: str) -> None:
        """Delete ``tag``; where the registry cannot delete a tag alone, delete its manifest.

        The manifest's bytes are kept first, so :meth:`point` can put it back under a moving tag that moved
        onto it meanwhile.  The caller (prune) only deletes tags whose image no other tag shares.  Raises
        RegistryError (AuthError when deletes are refused).
        """
        digest = self.digest(tag)
        if digest is None:
            return
        if not self.client.delete_tag(self._path, tag):
            try:
                self._manifests[digest] = self.client.get_manifest(self._path, digest)
            except NotFoundError:
                return  # deleted meanwhile, with the tag
            self._delete_manifest(digest, tag)

    def _delete_manifest(self, digest: str, tag: str | None = None, tries: int = 3) -> None:
        """Delete manifest ``digest`` (which ``tag``, when given, named), making a half-done delete whole.

        Distribution 2.x deletes the manifest first and then looks up and removes its tags; a tag written at
        that moment can fail the second half (500), leaving tags that are listed but name nothing.  The client
        sends a DELETE answered 5xx again by itself, and that second try answers 404 (the manifest is gone), so a
        404 is not taken for "done" by itself: when ``tag`` is still listed and names nothing, the first try was
        half-done.  Either way the manifest is then put back by digest (from the kept bytes), which makes every
        tag left naming it whole again, and deleted again, which takes them all.  Raises RegistryError after
        ``tries``.
        """
        for attempt in range(tries):
            try:
                self.client.delete_manifest(self._path, digest)
                return
            except NotFoundError:
                if tag is None or not self._left_naming_nothing(tag):
                    return  # deleted, by this try or by another writer, tags and all
                if attempt == tries - 1:
                    raise OperationError(f"{self.repository.familiar}: deleting {short_digest(digest)} left {tag} "
                                         f"listed but naming nothing, {tries} times (the registry deletes a manifest"
                                         " and then its tags; something kept failing the second half)") from None
            except RegistryError:
                if attempt == tries - 1:
                    raise
            if self.client.head_manifest(self._path, digest) is None:
                self.client.put_manifest(self._path, digest, self._manifests[digest])

    def _left_naming_nothing(self, tag: str) -> bool:
        """Whether ``tag`` is listed but names no manifest (a half-done manifest delete's leftover).  One listing,
        and one read of the tag when it is listed."""
        return tag in self.client.list_tags(self._path) and self.client.head_manifest(self._path, tag) is None

    def delete_untagged(self, digest: str) -> None:
        """Delete the manifest ``digest`` no tag points to (a child of an index prune deleted), its bytes kept
        first as :meth:`delete` keeps them; gone already is done.  Raises RegistryError (AuthError)."""
        try:
            self._manifests[digest] = self.client.get_manifest(self._path, digest)
        except NotFoundError:
            return
        self._delete_manifest(digest)

    def image_id(self, target: str) -> str | None:
        """The image id of manifest ``target``: its config's digest, what Docker and buildah call the image's id
        (a digest of its config: every label and every layer's diff id, whatever the layers' compression); None for
        an index or a manifest without a config.  One GET.  Raises NotFoundError, RegistryError."""
        manifest = self.client.get_manifest(self._path, target)
        config = None if manifest.is_index else manifest.config()
        return config.digest if config is not None else None

    def _index(self, target: str) -> Manifest | None:
        """The index ``target`` is, or None for an image manifest (one GET unless :meth:`digest` read it)."""
        if target not in self._indexes:
            manifest = self.client.get_manifest(self._path, target)
            self._indexes[target] = manifest if manifest.is_index else None
        return self._indexes[target]

    def children(self, target: str) -> tuple[ChildManifest, ...]:
        """The manifests the index ``target`` points to, with their platforms; () for an image manifest.
        Raises NotFoundError when ``target`` is gone, RegistryError for a malformed index."""
        from ..registry.manifest import is_platform_entry, platform_name  # the registry package loads requests

        index = self._index(target)
        if index is None:
            return ()
        return tuple(ChildManifest(c.digest, platform_name(c.platform), attachment=not is_platform_entry(c))
                     for c in index.children())

    def platforms(self, target: str) -> tuple[PlatformImage, ...]:
        """One :class:`PlatformImage` per platform of ``target``: its own for an image manifest, each platform
        child's for an index (a child without a platform in the index is named by its config's).  Raises
        NotFoundError, RegistryError for a manifest or config that cannot be read."""
        if self._index(target) is None:
            return (self._platform_image(target, ""),)
        return tuple(self._platform_image(c.digest, c.platform) for c in self.children(target) if not c.attachment)

    def _platform_image(self, digest: str, platform: str) -> PlatformImage:
        config = self._config(digest)
        name = platform or "/".join(p for p in (config.os, config.architecture) if p)
        return PlatformImage(name, digest, config.created.isoformat() if config.created else "", config.labels)

    def _config(self, target: str) -> ImageConfig:
        if target not in self._configs:
            manifest = self.client.get_manifest(self._path, target)
            self._configs[target] = self.client.get_image_config(self._path, manifest)
        return self._configs[target]

    def _primary(self, target: str) -> PlatformImage:
        found = primary_image(self.platforms(target))
        if found is None:
            raise RegistryError(f"{self.repository.familiar}: the index {short_digest(target)} lists no image")
        return found

    def labels(self, target: str) -> Mapping[str, str]:
        """The labels of image ``target`` (of an index: its :func:`primary_image`'s)."""
        return self._primary(target).labels

    def created(self, target: str) -> str:
        """The creation time of image ``target`` (ISO 8601, or ''; of an index: its :func:`primary_image`'s)."""
        return self._primary(target).created

    # -- deletion marks (see "Deletion marks")

    def begin_delete(self, digest: str) -> str | None:
        """Put a deletion mark of image ``digest``; its tag, for :meth:`end_delete`.  One manifest PUT (the first
        time in a repository without the empty config blob: one blob upload and the PUT again).  Raises
        RegistryError (AuthError) when it cannot be written."""
        from ..registry.manifest import Manifest  # here: the registry package loads requests (see the top)

        name = mark_tag(digest, self._clock(), secrets.token_hex(6))
        mark = Manifest.from_bytes(mark_body(digest, name), _OCI_MANIFEST)
        self._put_artifact(name, mark)
        self._marks[name], self._manifests[mark.digest] = mark.digest, mark  # the bytes: see _delete_manifest
        return name

    def _put_artifact(self, name: str, manifest: Manifest) -> None:
        """PUT one of imagectl's own artifacts (a move record, a deletion mark) under ``name``."""
        try:
            self.client.put_manifest(self._path, name, manifest)
        except AuthError:
            raise
        except RegistryError:  # most likely the empty config blob is not in this repository yet
            self.client.upload_blob(self._path, _EMPTY_CONFIG, _EMPTY_CONFIG_DIGEST)
            self.client.put_manifest(self._path, name, manifest)

    def end_delete(self, mark: str | None) -> None:
        """Remove the deletion mark ``mark`` this store put: one DELETE of its own manifest (unique: it carries its
        name), gone already is done.  Raises RegistryError when it cannot be deleted."""
        digest = self._marks.pop(mark, None) if mark is not None else None
        if digest is not None:
            self._delete_manifest(digest, mark)

    def deleting(self, digest: str) -> bool:
        """Whether a prune is deleting image ``digest`` right now: a fresh deletion mark of it (one tag listing)."""
        return bool(fresh_marks(self._all_tags(), digest, self._clock()))

    def stale_marks(self) -> list[str]:
        """The deletion marks older than DELETE_MARK_STALE: left by prunes that were killed (one tag listing)."""
        return stale_marks(self._all_tags(), self._clock())

    def remove_stale_mark(self, mark: str) -> bool:
        """Remove the deletion mark ``mark`` (from :meth:`stale_marks`); False when it is gone already.  Its
        manifest is read first and deleted only when it is a deletion mark carrying this very name (its bytes are
        then unique to it, so the delete takes no other tag).  Raises OperationError for a tag under a mark's
        name that is not one (left as it is), RegistryError."""
        try:
            manifest = self.client.get_manifest(self._path, mark)
        except NotFoundError:
            return False
        body = manifest.json()
        if body.get("artifactType") != DELETING_ARTIFACT or _annotations(manifest).get(RECORD_ANNOTATION) != mark:
            raise OperationError(f"{self.repository.familiar}:{mark} has a deletion mark's name but is no deletion "
                                 "mark of imagectl's; left as it is")
        self._manifests[manifest.digest] = manifest
        self._delete_manifest(manifest.digest, mark)
        return True

    # -- the move log

    def moves(self, newest: int | None = None) -> list[Move]:
        """The move log, oldest first: the legacy ``imagectl-history`` moves, then the records; at most the
        newest ``newest`` (and never more than MOVES_READ), and only those are read (a GET each).

        Unreadable records are skipped (see ``problems``).  Raises RegistryError when the registry cannot be read.
        """
        count = min(newest or MOVES_READ, MOVES_READ)
        names, legacy = self._log_tags()
        found = self._legacy_moves() if legacy and len(names) < count else []
        found += [m for m in map(self._read_record, names[-count:]) if m is not None]
        return found[-count:]

    def last_move(self, tag: str) -> Move | None:
        """The newest logged move that took ``tag`` somewhere else, or None: reads only records of ``tag``,
        newest first (see the module docstring).  Raises RegistryError when the registry cannot be read."""
        names, legacy = self._log_tags()
        key = record_key(tag)
        for name in reversed(names[-MOVES_READ:]):
            if key_of_record(name) in (key, None):
                move = self._read_record(name)
                if move is not None and move.tag == tag and move.previous != move.to:
                    return move
        return last_real_move(self._legacy_moves(), tag) if legacy else None

    def log_position(self, tag: str) -> LogPosition:
        """The records of ``tag`` the log holds now (one tag listing)."""
        names, _ = self._log_tags()
        return frozenset(self._records_of(tag, names))

    def moves_since(self, tag: str, position: LogPosition) -> list[Move]:
        """The moves of ``tag`` other writers logged since ``position``, oldest first: one tag listing and one GET
        per new record of ``tag`` (usually none).  Raises RegistryError when the registry cannot be read."""
        names, _ = self._log_tags()
        new = [n for n in self._records_of(tag, names) if n not in position and n not in self._written]
        return [m for m in map(self._read_record, new) if m is not None and m.tag == tag]

    @staticmethod
    def _records_of(tag: str, names: Sequence[str]) -> list[str]:
        key = record_key(tag)
        return [n for n in names if key_of_record(n) in (key, None)]

    def record(self, move: Move) -> None:
        """Add ``move`` to the log as a record of its own (see the module docstring), then delete a few records
        beyond the newest MOVES_KEEP.  The record is named after every record the store's last listing showed
        (:func:`record_time`).  Raises RegistryError (AuthError) when the record cannot be written."""
        from ..registry.manifest import Manifest  # here: the registry package loads requests (see the top)

        name = record_tag(move.tag, record_time(self._clock(), self._records), secrets.token_hex(6))
        self._put_artifact(name, Manifest.from_bytes(record_body(move, name), _OCI_MANIFEST))
        self._written.add(name)
        self._trim()
        self._records.append(name)

    def _log_tags(self) -> tuple[list[str], bool]:
        """(the record tags, oldest first; whether ``imagectl-history`` exists): one tag listing."""
        tags = self._all_tags()
        self._records = sorted(t for t in tags if t.startswith(MOVE_PREFIX))
        return self._records, HISTORY_TAG in tags

    def _read_record(self, name: str) -> Move | None:
        """The move record ``name`` holds: None when it was deleted meanwhile, or (noted) when it is no record."""
        try:
            text = _annotations(self.client.get_manifest(self._path, name)).get(MOVE_ANNOTATION)
            if not isinstance(text, str):
                raise ValueError(f"no {MOVE_ANNOTATION} annotation")
            return move_from_json(json.loads(text))
        except NotFoundError:
            return None
        except AuthError:
            raise
        except (RegistryError, ValueError) as exc:
            self._note(f"{self.repository.familiar}:{name}: not a readable move record ({_first_line(exc)});"
                       " ignored")
            return None

    def _legacy_moves(self) -> list[Move]:
        """The moves of ``imagectl-history`` (earlier versions' log), oldest first; [] (noted) if unreadable."""
        where = f"{self.repository.familiar}:{HISTORY_TAG}"
        try:
            text = _annotations(self.client.get_manifest(self._path, HISTORY_TAG)).get(HISTORY_ANNOTATION, "[]")
        except NotFoundError:
            return []
        except AuthError:
            raise
        except RegistryError as exc:
            self._note(f"{where}: unreadable move log ({_first_line(exc)}); ignored")
            return []
        moves, problems = parse_moves(text, where)
        for problem in problems:
            self._note(problem)
        return with_from_tags(moves)

    def _trim(self) -> None:
        """Delete the oldest records beyond the newest MOVES_KEEP the last listing showed, TRIM_PER_RECORD at
        most, and only manifests that are records (their annotation names their own tag).  A registry that
        refuses deletes keeps them all: the log stays right, only longer."""
        excess = self._records[:max(0, len(self._records) - MOVES_KEEP)][:TRIM_PER_RECORD]
        for name in excess:
            try:
                manifest = self.client.get_manifest(self._path, name)
                if _annotations(manifest).get(RECORD_ANNOTATION) == name:
                    self.client.delete_manifest(self._path, manifest.digest)
            except NotFoundError:
                continue
            except RegistryError:
                return
            self._records.remove(name)

    def _note(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)


# --------------------------------------------------------------------------------------------- local engine


class EngineTagStore:
    """Tags of one repository in the local engine; the move log in a local JSON file."""

    def __init__(self, engine: Engine, repository: Reference, state_dir: Path | None = None) -> None:
        self.engine = engine
        self.repository = repository
        self.problems: list[str] = []
        self._name = repository.familiar
        base = state_dir or (
            Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "imagectl" / "history"
        )
        self._log = base / (self._name.replace("/", "_").replace(":", "_") + ".json")
        self._written: set[str] = set()

    def tags(self) -> list[str]:
        """Every local tag of the repository but reserved ones."""
        return sorted(t for t in self.engine.list_tags(self._name) if not is_reserved(t))

    def tag_with_key(self, key: str) -> str | None:
        """The newest local immutable tag with ``key``'s key part, or None (one image listing)."""
        return next(iter(tags_with_key(self.tags(), key)), None)

    def digest(self, tag: str) -> str | None:
        """The image id ``tag`` points to, or None."""
        info = self.engine.inspect(f"{self._name}:{tag}")
        return info.id if info else None

    def point(self, tag: str, target: str) -> None:
        """Tag image ``target`` as ``tag``."""
        self.engine.tag(target, self._name, tag)

    def delete(self, tag: str) -> None:
        """Remove the local tag (the image stays while another tag uses it)."""
        self.engine.untag(f"{self._name}:{tag}")

    def labels(self, target: str) -> Mapping[str, str]:
        """The labels of image ``target``."""
        info = self.engine.inspect(target)
        if info is None:
            raise NotFoundError(f"{self._name}: no local image {target}")
        return info.labels

    def created(self, target: str) -> str:
        """The creation time of image ``target``."""
        info = self.engine.inspect(target)
        return info.created if info else ""

    def children(self, target: str) -> tuple[ChildManifest, ...]:
        """(): a local engine's image is one platform's."""
        return ()

    def platforms(self, target: str) -> tuple[PlatformImage, ...]:
        """The image ``target`` alone, its platform unknown (the engine's inspect does not say it here)."""
        info = self.engine.inspect(target)
        if info is None:
            raise NotFoundError(f"{self._name}: no local image {target}")
        return (PlatformImage("", target, info.created, info.labels),)

    def delete_untagged(self, digest: str) -> None:
        """Nothing: the local engine holds no index children (see :meth:`children`)."""

    def image_id(self, target: str) -> str | None:
        """``target`` itself: the local engine's digests are image ids."""
        return target

    def begin_delete(self, digest: str) -> str | None:
        """None: removing a local tag never touches another, so a prune needs no deletion mark here."""
        return None

    def end_delete(self, mark: str | None) -> None:
        """Nothing (see :meth:`begin_delete`)."""

    def deleting(self, digest: str) -> bool:
        """False (see :meth:`begin_delete`)."""
        return False

    def stale_marks(self) -> list[str]:
        """None (see :meth:`begin_delete`)."""
        return []

    def remove_stale_mark(self, mark: str) -> bool:
        """False (see :meth:`begin_delete`)."""
        return False

    def moves(self, newest: int | None = None) -> list[Move]:
        """The local move log, oldest first (the newest ``newest`` only, when given); what cannot be read is
        skipped and noted in ``problems``."""
        moves = self._read()[0]
        return moves[-newest:] if newest else moves

    def last_move(self, tag: str) -> Move | None:
        """The newest logged move that took ``tag`` somewhere else, or None."""
        return last_real_move(with_from_tags(self.moves()), tag)

    def log_position(self, tag: str) -> LogPosition:
        """The logged moves of ``tag`` now (read from the local log)."""
        return frozenset(_entry_id(m) for m in self.moves() if m.tag == tag)

    def moves_since(self, tag: str, position: LogPosition) -> list[Move]:
        """The moves of ``tag`` logged since ``position`` (by other processes), oldest first."""
        return [m for m in self.moves() if m.tag == tag and _entry_id(m) not in position
                and _entry_id(m) not in self._written]

    def _read(self) -> tuple[list[Move], str | None]:
        """(the logged moves, the file's text when some of it could not be read)."""
        if not is_file(self._log, what="the move log"):  # a folder on the way the user may not enter: one line
            return [], None
        try:
            text = self._log.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self._note(f"{self._log}: unreadable move log ({_first_line(exc)}); ignored")
            return [], None
        moves, problems = parse_moves(text, str(self._log))
        for problem in problems:
            self._note(problem)
        return moves, (text if problems else None)

    def record(self, move: Move) -> None:
        """Append ``move`` to the local log (written to a temporary file, then renamed).

        Concurrent appends (other processes or threads) are serialised by an exclusive lock on a file beside
        the log, so none is lost.  A log that cannot be read in full is copied to ``.unreadable`` first, never
        lost silently.  Raises OperationError if the state directory cannot be written.
        """
        try:
            self._log.parent.mkdir(parents=True, exist_ok=True)
            with open(self._log.with_suffix(".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                logged, unreadable = self._read()
                if unreadable is not None:
                    self._log.with_suffix(".unreadable").write_text(unreadable, encoding="utf-8")
                moves = (logged + [move])[-HISTORY_KEEP:]
                tmp = self._log.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps([asdict(m) for m in moves], indent=1, sort_keys=True), encoding="utf-8")
                tmp.replace(self._log)
            self._written.add(_entry_id(move))
        except OSError as exc:
            raise OperationError(f"cannot write the move log {self._log}: {exc.strerror or exc}") from None

    def _note(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)
