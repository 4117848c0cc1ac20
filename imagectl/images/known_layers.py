"""Which compressed blob each layer became, remembered across pushes, so that a push compresses only new layers.

The Docker engine's export (:mod:`imagectl.engine.docker_save`) compresses every layer with imagectl's own gzip
writer, and that writer is deterministic: a layer's uncompressed tar (its diff_id) and the writer's name
(:data:`~imagectl.engine.docker_save.SAVE_WRITER`) fix the blob, digest and size.  So the blob of a layer pushed once
need not be made again: :class:`LayerDigests` keeps ``diff_id -> (digest, size)`` per writer in one small JSON file of
imagectl's cache folder (``layer-digests.json``), and :class:`RegistryLayers` answers the export's question (does the
registry hold this layer's blob?) with one cache look-up and one ``HEAD``: the target repository's, else that of a
repository of the registry it can be mounted from.

Why a wrong entry cannot publish a wrong image.  A manifest names a blob for each layer; the config names each
layer's diff_id; every pulling engine (Docker, containerd, CRI-O, buildah) checks the uncompressed digest of each
layer it pulls against the config's diff_id and refuses the image otherwise.  The config is always the daemon's own
(its digest the image id, checked), so a wrong mapping makes an image that cannot be pulled, never another image.
That would still be a broken push, so what is cheap is checked too:

- the file is authenticated: an HMAC-SHA256 under this user's cache secret (:func:`imagectl.cache.cache_secret`,
  kept outside the cache folder); a file planted in a cache folder restored from a shared CI cache, or written by
  another machine, is not used at all;
- it is plain JSON, parsed, never executed; each entry must have the shape ``"sha256:HEX": ["sha256:HEX", SIZE]``
  and is dropped otherwise (never an error);
- the registry's ``HEAD`` must answer the entry's size, and the blob's first bytes (64 KiB, read from the registry)
  must be those the writer makes of the layer's own first bytes (its first gzip member, made from the layer the
  daemon sent): a digest of another blob the registry holds is caught unless that blob has the same size and the
  same beginning, which only a registry writer who built it for the purpose could arrange.  An entry the registry
  contradicts is removed.

A missing, unreadable or unauthenticated file is an empty cache (every layer is compressed, as on a first push);
``IMAGECTL_NO_CACHE=1`` turns it off.  Writes go through a temporary file renamed into place; two pushes writing at
once lose one's new entries, which only costs a compression later.  At most :data:`KEEP_PER_WRITER` entries are kept
per writer, the oldest dropped first.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..cache import cache_dir, cache_secret, canonical
from ..errors import AuthError, NotFoundError
from ..progress.units import human_bytes
from ..registry.client import RegistryClient
from ..registry.layout_push import MountSources
from ..registry.manifest import DOCKER_LAYER, Descriptor

FORMAT = 1
FILE_NAME = "layer-digests.json"
KEEP_PER_WRITER = 4096
MAX_FILE_BYTES = 4 * 1024 * 1024
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
Entries = dict[str, dict[str, list[object]]]  # writer -> diff_id -> [digest, size]


def layer_digests_path() -> Path:
    """Where the mapping lives."""
    return cache_dir() / FILE_NAME


def _valid(diff_id: object, entry: object) -> bool:
    return (isinstance(diff_id, str) and bool(_DIGEST.fullmatch(diff_id)) and isinstance(entry, list)
            and len(entry) == 2 and isinstance(entry[0], str) and bool(_DIGEST.fullmatch(entry[0]))
            and type(entry[1]) is int and 0 < entry[1] < 1 << 50)


class LayerDigests:
    """The mapping of the module docstring, read once: :meth:`get`, :meth:`put` and :meth:`forget` change it in
    memory, :meth:`save` writes it.  ``secret`` None: no cache (nothing is read or written)."""

    def __init__(self, path: Path, secret: bytes | None) -> None:
        self._path, self._secret = path, secret
        self._entries: Entries = self._load() if secret is not None else {}
        self._changed = False

    @classmethod
    def default(cls) -> LayerDigests:
        """The user's mapping (none with ``IMAGECTL_NO_CACHE=1`` or without a cache secret)."""
        return cls(layer_digests_path(), None if os.environ.get("IMAGECTL_NO_CACHE") else cache_secret())

    def get(self, writer: str, diff_id: str) -> Descriptor | None:
        """The blob ``writer`` made of layer ``diff_id``, as remembered; None when it is not."""
        entry = self._entries.get(writer, {}).get(diff_id)
        if entry is None or not _valid(diff_id, entry):
            return None
        return Descriptor(DOCKER_LAYER, str(entry[0]), int(entry[1]))  # type: ignore[call-overload]

    def put(self, writer: str, diff_id: str, blob: Descriptor) -> None:
        """Remember that ``writer`` made ``blob`` of layer ``diff_id``."""
        if self._secret is None or not _valid(diff_id, [blob.digest, blob.size]):
            return
        layers = self._entries.setdefault(writer, {})
        layers.pop(diff_id, None)  # to the end: the newest
        layers[diff_id] = [blob.digest, blob.size]
        for old in list(layers)[:max(len(layers) - KEEP_PER_WRITER, 0)]:
            del layers[old]
        self._changed = True

    def forget(self, writer: str, diff_id: str) -> None:
        """Drop the entry of layer ``diff_id`` (the registry contradicted it)."""
        if self._entries.get(writer, {}).pop(diff_id, None) is not None:
            self._changed = True

    def save(self) -> None:
        """Write the mapping if it changed (atomically for readers); never raises: an unwritable cache goes
        unused."""
        if self._secret is None or not self._changed:
            return
        body = {"format": FORMAT, "writers": self._entries}
        data = json.dumps({**body, "mac": self._mac(body)}, sort_keys=True)
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=f"{self._path.stem}.", suffix=".tmp")
        except OSError:
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
            Path(tmp).replace(self._path)
            self._changed = False
        except OSError:
            Path(tmp).unlink(missing_ok=True)

    def _mac(self, body: dict[str, object]) -> str:
        assert self._secret is not None
        return hmac.new(self._secret, canonical(body).encode(), hashlib.sha256).hexdigest()

    def _load(self) -> Entries:
        """The file's entries of a valid shape; none when it is missing, too large, not JSON or not ours."""
        try:
            with self._path.open("rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
            found = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else {}
            writers, mac = found["writers"], found["mac"]
            if found.get("format") != FORMAT or not isinstance(writers, dict) or not isinstance(mac, str) \
                    or not hmac.compare_digest(mac, self._mac({"format": FORMAT, "writers": writers})):
                return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}
        return {str(writer): {d: e for d, e in layers.items() if _valid(d, e)}
                for writer, layers in writers.items() if isinstance(layers, dict)}


@dataclass
class RegistryLayers:
    """:class:`~imagectl.engine.KnownLayers` for a push to ``repository`` of ``client``'s registry: a layer's blob is
    held when the mapping knows it and the registry answers its size, in ``repository`` or in a repository it
    can be mounted from (:class:`~imagectl.registry.layout_push.MountSources`).  Counts what it answered."""

    client: RegistryClient
    repository: str
    digests: LayerDigests
    on_line: Callable[[str], None] = lambda line: None
    held_layers: list[Descriptor] = field(default_factory=list)
    made_layers: list[Descriptor] = field(default_factory=list)
    _sources: MountSources | None = None

    def held(self, diff_id: str, writer: str, start: Callable[[], bytes]) -> Descriptor | None:
        """See :class:`~imagectl.engine.KnownLayers`; raises RegistryError when the registry cannot be asked."""
        blob = self.digests.get(writer, diff_id)
        if blob is None:
            return None
        if not self._in_registry(blob, start):
            self.digests.forget(writer, diff_id)
            return None
        self.held_layers.append(blob)
        return blob

    def made(self, diff_id: str, writer: str, blob: Descriptor) -> None:
        """See :class:`~imagectl.engine.KnownLayers`."""
        self.made_layers.append(blob)
        self.digests.put(writer, diff_id, blob)

    def summary(self) -> str:
        """One line: the layers compressed and those the registry held (empty when the engine asked nothing)."""
        made, held = len(self.made_layers), len(self.held_layers)
        if not made and not held:
            return ""
        return (f"push: compressed {made} of {made + held} layers "
                f"({human_bytes(sum(b.size for b in self.made_layers))}); the registry holds the other {held}")

    def _in_registry(self, blob: Descriptor, start: Callable[[], bytes]) -> bool:
        """Whether the target, else a repository to mount from, holds ``blob`` with its size and its first bytes."""
        if self.client.blob_size(self.repository, blob.digest) == blob.size:
            return self._begins(self.repository, blob.digest, start())
        if self._sources is None:
            self._sources = MountSources(self.client, self.repository, on_line=self.on_line)
        source = self._sources.source_of(blob.digest)
        try:
            return (source is not None and self.client.blob_size(source, blob.digest) == blob.size
                    and self._begins(source, blob.digest, start()))
        except (AuthError, NotFoundError):
            return False

    def _begins(self, repository: str, digest: str, start: bytes) -> bool:
        """Whether ``repository``'s blob ``digest`` begins with ``start`` (only those bytes are read)."""
        with self.client.open_blob(repository, digest) as reader:
            return reader.read(len(start)) == start
