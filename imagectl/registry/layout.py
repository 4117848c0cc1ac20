"""Reading an OCI image layout directory (``oci-layout``, ``index.json``, ``blobs/<alg>/<hex>``), as ``buildah push
IMAGE oci:DIR`` and ``skopeo copy ... oci:DIR`` write it.

A layout's ``index.json`` names its images; :func:`root_manifest` picks the one to push or compare (the only one,
or the one whose ``org.opencontainers.image.ref.name`` annotation is asked for).  Every path comes from a checked
digest (``sha256:`` and 64 hex digits), so nothing in a layout can lead a read outside its ``blobs/``; every
manifest is read with a cap; blobs are opened as files for streaming and checked against their digest as they are
read (:class:`CheckedBlob`).

Writing: :func:`write_layout` makes the layout of an image from another image's layout (the system image an
assembled build starts from) and layers on top of it (:class:`LayoutLayer`: blob files written elsewhere, linked in);
:func:`system_layers` lists a layout image's layers the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import BuildError, InputError, OperationError
from .manifest import OCI_CONFIG, OCI_MANIFEST, Descriptor, Manifest, parse_manifest_json, sha256_digest

MAX_LAYOUT_MANIFEST_BYTES = 4 * 1024 * 1024
REF_NAME = "org.opencontainers.image.ref.name"
EPOCH = "1970-01-01T00:00:00Z"  # the time of the history entry of each layer write_layout adds: from no clock
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class LayoutError(InputError):
    """An OCI layout directory that is missing, malformed, or lacks a blob it refers to (exit 2)."""


class BlobDigestError(OperationError):
    """A layout blob whose bytes do not have the digest or size its descriptor names (exit 1)."""


def blob_path(layout: Path, digest: str) -> Path:
    """The file of blob ``digest`` in ``layout``; raises LayoutError for a digest that is not ``sha256:<64 hex>``."""
    if not _DIGEST_RE.match(digest):
        raise LayoutError(f"{layout}: {digest[:80]!r} is not a sha256 digest")
    return layout / "blobs" / "sha256" / digest.removeprefix("sha256:")


def link_or_copy(source: str | Path, target: str | Path) -> None:
    """Put the file ``source`` at ``target``: a hard link where the filesystem allows one (a layout's blobs are
    gigabytes), else a copy.  Raises OSError when neither can be made."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def read_small_blob(layout: Path, digest: str, limit: int = MAX_LAYOUT_MANIFEST_BYTES) -> bytes:
    """The whole blob ``digest`` (a manifest or config), checked against its digest; raises LayoutError when it is
    missing or over ``limit`` bytes, BlobDigestError when its bytes have another digest."""
    path = blob_path(layout, digest)
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise LayoutError(f"{layout}: blob {digest}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise LayoutError(f"{layout}: blob {digest} is over {limit} bytes")
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise BlobDigestError(f"{layout}: blob {digest} does not match its digest")
    return data


def layout_index(layout: Path) -> dict[str, Any]:
    """The layout's ``index.json``; raises LayoutError for a directory that is no OCI image layout."""
    try:
        marker = json.loads((layout / "oci-layout").read_text(encoding="utf-8"))
        raw = (layout / "index.json").read_bytes()
    except (OSError, ValueError) as exc:
        raise LayoutError(f"{layout}: not an OCI image layout ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(marker, dict) or "imageLayoutVersion" not in marker:
        raise LayoutError(f"{layout}: oci-layout has no imageLayoutVersion")
    try:
        return parse_manifest_json(raw)
    except OperationError as exc:
        raise LayoutError(f"{layout}/index.json: {exc}") from None


def root_manifest(layout: Path, ref_name: str | None = None) -> Manifest:
    """The image of the layout: its only entry in ``index.json``, or the entry annotated ``ref_name``; an image
    manifest or an index, with its bytes from ``blobs/``.

    Raises LayoutError when the layout holds no image, several and none is named, or none of that name;
    BlobDigestError when the manifest's bytes do not match its digest.
    """
    entries = [item for item in layout_index(layout).get("manifests") or [] if isinstance(item, dict)]
    if ref_name is not None:
        entries = [item for item in entries if (item.get("annotations") or {}).get(REF_NAME) == ref_name]
    if len(entries) != 1:
        named = f" named {ref_name!r}" if ref_name is not None else ""
        raise LayoutError(f"{layout}: index.json lists {len(entries)} images{named}; expected exactly one")
    entry = entries[0]
    digest, media_type = str(entry.get("digest") or ""), str(entry.get("mediaType") or "")
    return manifest_of(layout, Descriptor(media_type, digest, int(entry.get("size") or 0)))


def manifest_of(layout: Path, descriptor: Descriptor) -> Manifest:
    """The manifest ``descriptor`` points to, from the layout's blobs; raises LayoutError, BlobDigestError."""
    raw = read_small_blob(layout, descriptor.digest)
    try:
        return Manifest(descriptor.media_type or Manifest.from_bytes(raw).media_type, descriptor.digest, raw)
    except OperationError as exc:
        raise LayoutError(f"{layout}: manifest {descriptor.digest}: {exc}") from None


@dataclass(frozen=True)
class LayoutLayer:
    """A layer's blob file and what an image's manifest and config say of it: its descriptor (media type, digest,
    size), its diff_id (the digest of the uncompressed tar) and, for a layer :func:`write_layout` adds, the history
    line of the step that made it ("" for a layer the image already has: its config's history says it)."""

    path: Path
    descriptor: Descriptor
    diff_id: str
    created_by: str = ""


def system_layers(system: Path) -> list[LayoutLayer]:
    """The layers of the image of layout ``system`` (one image manifest), from the bottom up.  Raises BuildError for
    a layout whose config and manifest disagree, LayoutError for a folder that is no layout."""
    manifest = root_manifest(system)
    descriptor = manifest.config()
    if descriptor is None:
        raise BuildError("the system image's layout has no config", "build")
    diff_ids = json.loads(read_small_blob(system, descriptor.digest))["rootfs"]["diff_ids"]
    layers = manifest.layers()
    if len(diff_ids) != len(layers):
        raise BuildError(f"the system image's layout has {len(layers)} layers and {len(diff_ids)} diff_ids", "build")
    return [LayoutLayer(blob_path(system, layer.digest), layer, str(diff_id))
            for diff_id, layer in zip(diff_ids, layers, strict=True)]


def write_layout(system: Path, layers: Sequence[LayoutLayer], dest: Path) -> Path:
    """An OCI layout at ``dest`` of the image of layout ``system`` with ``layers`` on top: its blobs linked, a config
    with their diff_ids and history entries (at :data:`EPOCH`), a manifest.  Raises BuildError for a system image
    without a config, LayoutError for a broken system layout."""
    manifest = root_manifest(system)
    config_descriptor = manifest.config()
    if config_descriptor is None:
        raise BuildError("the system image's layout has no config", "build")
    config = json.loads(read_small_blob(system, config_descriptor.digest))
    config["rootfs"]["diff_ids"] = [*config["rootfs"]["diff_ids"], *(layer.diff_id for layer in layers)]
    config["history"] = [*config.get("history", []),
                         *({"created": EPOCH, "created_by": layer.created_by} for layer in layers)]
    config_bytes = json.dumps(config, separators=(",", ":")).encode()
    body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config_bytes), "size": len(config_bytes)},
            "layers": [*manifest.json()["layers"], *(_descriptor_json(layer.descriptor) for layer in layers)]}
    manifest_bytes = json.dumps(body, separators=(",", ":")).encode()
    (dest / "blobs" / "sha256").mkdir(parents=True)
    for layer in manifest.layers():
        _put_blob(blob_path(system, layer.digest), blob_path(dest, layer.digest))
    for added in layers:
        _put_blob(added.path, blob_path(dest, added.descriptor.digest))
    for data in (config_bytes, manifest_bytes):
        blob_path(dest, sha256_digest(data)).write_bytes(data)
    (dest / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {"schemaVersion": 2, "manifests": [{"mediaType": OCI_MANIFEST, "digest": sha256_digest(manifest_bytes),
                                                 "size": len(manifest_bytes)}]}
    (dest / "index.json").write_text(json.dumps(index, separators=(",", ":")))
    return dest


def _descriptor_json(descriptor: Descriptor) -> dict[str, object]:
    return {"mediaType": descriptor.media_type, "digest": descriptor.digest, "size": descriptor.size}


def _put_blob(source: Path, dest: Path) -> None:
    if not dest.exists():  # two layers of the same bytes (two empty ones) are one blob
        link_or_copy(source, dest)


class CheckedBlob:
    """A layout blob opened for streaming: ``read`` counts and hashes what it hands out and, at the end, raises
    BlobDigestError unless the bytes had the descriptor's digest and size.  Seekable to its start only (an upload
    sent again reads it afresh); ``len()`` is its size, so an HTTP upload gets a Content-Length."""

    def __init__(self, path: Path, blob: Descriptor, on_bytes: Any = None) -> None:
        """``path``: the blob's file (in a layout, :func:`blob_path`)."""
        self.blob = blob
        self._on_bytes = on_bytes
        try:
            self._file: IO[bytes] = path.open("rb")
            self._size = path.stat().st_size
        except OSError as exc:
            raise LayoutError(f"{path}: blob {blob.digest}: {exc.strerror or exc}") from None
        self._reset()

    def _reset(self) -> None:
        if self._on_bytes is not None and getattr(self, "_read", 0):
            self._on_bytes(-self._read)  # sent again from the start: progress goes back too
        self._hasher, self._read, self._checked = hashlib.sha256(), 0, False

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes; b"" at the end.  Raises BlobDigestError, instead of handing out the file's last bytes,
        when the file does not have the digest and size of its descriptor."""
        data = self._file.read(size)
        if data:
            self._hasher.update(data)
            self._read += len(data)
            if self._on_bytes is not None:
                self._on_bytes(len(data))
        if not self._checked and (not data or self._read >= self._size):
            self._check()  # before the last bytes go out: an HTTP upload stops at Content-Length, never reading b""
        return data

    def _check(self) -> None:
        self._checked = True
        digest = "sha256:" + self._hasher.hexdigest()
        if digest != self.blob.digest or (self.blob.size and self._read != self.blob.size):
            raise BlobDigestError(f"layout blob {self.blob.digest}: its file has digest {digest} and "
                                  f"{self._read} bytes (the manifest says {self.blob.size}); not uploaded")

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._file.tell()

    def seek(self, offset: int, whence: int = 0) -> int:
        """Back to the start (offset 0) only, or to the end (``seek(0, 2)``, to learn the size)."""
        if whence == 2:
            return self._file.seek(0, 2)
        if offset != 0:
            raise OSError("a checked blob can only go back to its start")
        self._reset()
        return self._file.seek(0)

    def __len__(self) -> int:
        return self._size

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "CheckedBlob":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
