"""Where a profile's tags live: a registry repository, or the local engine when no registry is configured.

Both stores offer the same small interface, so history, rollback, promotion and pruning are written once:

- ``tags()``: every tag of the repository;
- ``digest(tag)``: what a tag points to (manifest digest in a registry, image id in the engine), or None;
- ``exists(target)``: whether the image ``target`` (a digest/id) is still there;
- ``point(tag, target)``: move ``tag`` to the image ``target`` (a digest/id) — in a registry one manifest GET
  and one manifest PUT, no layer moves;
- ``delete(tag)``, ``labels(target)`` and ``created(target)``;
- ``moves()`` and ``record(move)``: the log of past moves of moving tags and channels;
- ``tag_with_key(key)``: the newest immutable tag whose key part is ``key``'s (a build with that build key,
  or an import of that source, exists): one tag listing.

The registry keeps the log itself, as the annotations of a small manifest tagged ``imagectl-history`` in the
same repository, so any machine that can reach the registry sees the same history.  The local engine keeps it
in a JSON file under ``$XDG_STATE_HOME/imagectl/history`` (appends are serialised with a lock file).

Races: a registry that cannot delete a tag alone deletes the manifest, and with it every tag pointing to it.
A :class:`RegistryTagStore` therefore keeps the bytes of every manifest it has read for ``point`` or deleted,
so ``point`` can put such a manifest back (the layers stay in the repository until garbage collection) when
a moving tag that moved onto it meanwhile went down with it; see :mod:`imagectl.tags.prune`.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import socket
import threading
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Protocol

from ..errors import NotFoundError, OperationError, RegistryError
from ..reference import Reference
from .naming import tags_with_key

HISTORY_TAG = "imagectl-history"
HISTORY_ANNOTATION = "org.imagectl.history"
HISTORY_KEEP = 500
_EMPTY_CONFIG = b"{}"
_EMPTY_CONFIG_DIGEST = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


@dataclass(frozen=True)
class Move:
    """One move of a moving tag or channel."""

    tag: str
    to: str  # digest (registry) or image id (engine)
    previous: str | None
    action: str  # build, rollback, promote, import
    when: str
    by: str
    to_tag: str | None = None  # the immutable tag moved to, when known


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

    def tags(self) -> list[str]: ...
    def digest(self, tag: str) -> str | None: ...
    def exists(self, target: str) -> bool: ...
    def point(self, tag: str, target: str) -> None: ...
    def delete(self, tag: str) -> None: ...
    def labels(self, target: str) -> Mapping[str, str]: ...
    def created(self, target: str) -> str: ...
    def moves(self) -> list[Move]: ...
    def record(self, move: Move) -> None: ...
    def tag_with_key(self, key: str) -> str | None: ...


class RegistryTagStore:
    """Tags of one repository in a registry, through :class:`imagectl.registry.RegistryClient`."""

    def __init__(self, client: Any, repository: Reference) -> None:
        self.client = client
        self.repository = repository
        self._path = repository.path
        self._configs: dict[str, Any] = {}
        self._manifests: dict[str, Any] = {}  # digest -> Manifest read for point() or kept before a delete

    def tags(self) -> list[str]:
        """Every tag but the history tag; [] for a repository that does not exist yet."""
        try:
            return sorted(t for t in self.client.list_tags(self._path) if t != HISTORY_TAG)
        except NotFoundError:
            return []

    def tag_with_key(self, key: str) -> str | None:
        """The newest immutable tag with ``key``'s key part, or None (one tag listing)."""
        return next(iter(tags_with_key(self.tags(), key)), None)

    def digest(self, tag: str) -> str | None:
        """The manifest digest ``tag`` points to, or None."""
        return self.client.head_manifest(self._path, tag)

    def exists(self, target: str) -> bool:
        """Whether manifest ``target`` (a digest) is in the repository: one HEAD."""
        return self.client.head_manifest(self._path, target) is not None

    def point(self, tag: str, target: str) -> None:
        """Move ``tag`` to manifest ``target``: one GET and one PUT of the manifest, no blob moves.

        The GET is also the last check that ``target`` still exists.  When it is gone but this store read or
        deleted it earlier, the kept bytes are put back instead (the repair of a tag a concurrent manifest
        delete took down).  Raises NotFoundError if ``target`` is gone and unknown, RegistryError otherwise.
        """
        try:
            manifest = self.client.get_manifest(self._path, target)
        except NotFoundError:
            if target not in self._manifests:
                raise
            manifest = self._manifests[target]
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
            self._delete_manifest(digest)

    def _delete_manifest(self, digest: str, tries: int = 3) -> None:
        """Delete manifest ``digest``, making a half-done delete whole.

        Distribution 2.x deletes the manifest first and then looks up and removes its tags; a tag written at
        that moment can fail the second half, leaving tags that point to nothing.  Then the manifest is put
        back by digest (from the kept bytes) and deleted again.  Raises RegistryError after ``tries``.
        """
        for attempt in range(tries):
            try:
                self.client.delete_manifest(self._path, digest)
                return
            except NotFoundError:
                return
            except RegistryError:
                if attempt == tries - 1:
                    raise
                if self.client.head_manifest(self._path, digest) is None:
                    self.client.put_manifest(self._path, digest, self._manifests[digest])

    def _config(self, target: str) -> Any:
        if target not in self._configs:
            manifest = self.client.get_manifest(self._path, target)
            self._configs[target] = self.client.get_image_config(self._path, manifest)
        return self._configs[target]

    def labels(self, target: str) -> Mapping[str, str]:
        """The labels of image ``target``."""
        return self._config(target).labels

    def created(self, target: str) -> str:
        """The creation time of image ``target`` (ISO 8601, or '')."""
        created = self._config(target).created
        return created.isoformat() if created else ""

    def moves(self) -> list[Move]:
        """The move log, oldest first ([] when there is none yet)."""
        return self._read_log()[0]

    def _read_log(self) -> tuple[list[Move], bool]:
        """(moves, whether the history manifest exists)."""
        try:
            manifest = self.client.get_manifest(self._path, HISTORY_TAG)
        except NotFoundError:
            return [], False
        text = (manifest.json().get("annotations") or {}).get(HISTORY_ANNOTATION, "[]")
        return _parse_moves(text, f"{self.repository}:{HISTORY_TAG}"), True

    def record(self, move: Move) -> None:
        """Append ``move`` to the log: read, append, write; checked once and retried on a lost race.

        Raises RegistryError when the move cannot be recorded after three tries.
        """
        from ..registry.manifest import OCI_MANIFEST, Manifest

        for _ in range(3):
            logged, exists = self._read_log()
            moves = (logged + [move])[-HISTORY_KEEP:]
            if not exists and not self.client.blob_exists(self._path, _EMPTY_CONFIG_DIGEST):
                self.client.upload_blob(self._path, _EMPTY_CONFIG, _EMPTY_CONFIG_DIGEST)
            body = {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "artifactType": "application/vnd.imagectl.history.v1+json",
                "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": _EMPTY_CONFIG_DIGEST, "size": 2},
                "layers": [],
                "annotations": {HISTORY_ANNOTATION: json.dumps([asdict(m) for m in moves], sort_keys=True)},
            }
            raw = json.dumps(body, sort_keys=True).encode()
            self.client.put_manifest(self._path, HISTORY_TAG, Manifest.from_bytes(raw, OCI_MANIFEST))
            if move in self.moves():
                return
        raise RegistryError(f"{self.repository}: could not record the move of {move.tag} (concurrent writers)")


class EngineTagStore:
    """Tags of one repository in the local engine; the move log in a local JSON file."""

    def __init__(self, engine: Any, repository: Reference, state_dir: Path | None = None) -> None:
        self.engine = engine
        self.repository = repository
        self._name = repository.familiar
        base = state_dir or (
            Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "imagectl" / "history"
        )
        self._log = base / (self._name.replace("/", "_").replace(":", "_") + ".json")

    def tags(self) -> list[str]:
        """Every local tag of the repository."""
        found = self.engine.list_tags(self._name)
        return sorted(found)

    def tag_with_key(self, key: str) -> str | None:
        """The newest local immutable tag with ``key``'s key part, or None (one image listing)."""
        return next(iter(tags_with_key(self.tags(), key)), None)

    def digest(self, tag: str) -> str | None:
        """The image id ``tag`` points to, or None."""
        info = self.engine.inspect(f"{self._name}:{tag}")
        return info.id if info else None

    def exists(self, target: str) -> bool:
        """Whether the local image ``target`` (an id) is still there."""
        return self.engine.inspect(target) is not None

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

    def moves(self) -> list[Move]:
        """The local move log, oldest first."""
        if not self._log.is_file():
            return []
        return _parse_moves(self._log.read_text(encoding="utf-8"), str(self._log))

    def record(self, move: Move) -> None:
        """Append ``move`` to the local log (written to a temporary file, then renamed).

        Concurrent appends (other processes or threads) are serialised by an exclusive lock on a file beside
        the log, so none is lost.  Raises OperationError if the state directory cannot be written.
        """
        try:
            self._log.parent.mkdir(parents=True, exist_ok=True)
            with open(self._log.with_suffix(".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                moves = (self.moves() + [move])[-HISTORY_KEEP:]
                tmp = self._log.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps([asdict(m) for m in moves], indent=1, sort_keys=True), encoding="utf-8")
                tmp.replace(self._log)
        except OSError as exc:
            raise OperationError(f"cannot write the move log {self._log}: {exc.strerror or exc}") from None


_MOVE_FIELDS = frozenset(f.name for f in fields(Move))


def _parse_moves(text: str, where: str) -> list[Move]:
    """The moves of a log; keys a newer imagectl may add are ignored, so older clients can still read it."""
    try:
        items = json.loads(text)
        return [Move(**{k: v for k, v in item.items() if k in _MOVE_FIELDS}) for item in items]
    except (ValueError, TypeError, AttributeError) as exc:
        raise OperationError(f"{where}: unreadable move log ({exc})") from None
