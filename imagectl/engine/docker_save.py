"""A Docker image as an OCI image layout, written from the daemon's ``docker save`` stream by imagectl itself.

``build`` pushes a Docker image by its digest (:mod:`imagectl.images.publish`), so it needs the image's blobs; the
Engine API's only way out is ``docker save`` (``GET /images/ID/get``): a tar holding the config and each layer
uncompressed.  :func:`layout_from_save` reads that stream once and writes a layout that ``docker push`` could have
sent: a Docker (v2s2) manifest, the config exactly as the daemon holds it (so its digest is the image id), and each
layer compressed by imagectl's gzip writer (:data:`SAVE_WRITER`: gzip members of :data:`MEMBER_BYTES` of the tar
each, deflated by Python's zlib at level :data:`LEVEL`, the header without name or time), so the same image gives
the same blobs and manifest wherever Python links the same zlib.  Level 1, not the assembled path's stored blocks
(:mod:`imagectl.assemble.deflate`, the same bytes whichever zlib): a layer ``pip`` wrote inside ``docker build``
has no wheel deflate streams to copy, and stored blocks made a real torch image 5.7 GB to push and pull where
gzip makes it about half that; a Docker build is not reproducible anyway (``"reproducible": false``), so the same
image on two hosts with different zlibs is not a case that matters.

A layer the destination holds already is not compressed at all: the caller's :class:`~imagectl.engine.KnownLayers`
says, by the layer's diff_id, which blob this writer made of it before (``held``); the layout's manifest then names
that blob and its ``blobs/`` lacks it (the push finds it in the registry).  ``docker push`` knows the same from the
daemon's own records; ``skopeo copy docker-daemon:`` (what this replaced) compressed every layer, base included,
on every push.

What is read, and how:

- the stream goes through once, in pieces of :data:`PIECE` bytes (memory stays bounded whatever the image's size);
- member names are input, not paths: only a regular file (or a symlink: a save links a layer that repeats to its
  first copy) whose name has a shape a save writes (``HEX.json``, ``HEX/layer.tar``, ``blobs/sha256/HEX``,
  ``manifest.json``) is read; it is hashed as it streams and kept in a spool file named by a counter in a folder of
  our own, never by its name; every other member is skipped, written nowhere;
- a spooled member whose digest is a layer the destination holds is dropped at once, so the disk holds the new
  layers only (the destination's blob must begin with the :data:`PROBE_BYTES` this writer makes of the layer);
  then ``manifest.json`` (the last member) names the config and the layers, by exact name;
- the config's bytes must have the image id as their digest, each layer's bytes the diff_id the config lists at its
  place (the uncompressed tar), else EngineError.

The daemon is trusted to send the image it has; the checks make sure that what is pushed is that image.
"""

from __future__ import annotations

import collections
import hashlib
import io
import itertools
import json
import os
import posixpath
import re
import tarfile
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..assemble.layer import gzip_frame
from ..errors import EngineError
from ..registry.manifest import DOCKER_CONFIG, DOCKER_LAYER, DOCKER_MANIFEST, Descriptor
from . import KnownLayers

MEMBER_BYTES = 4 * 1024 * 1024  # the tar's bytes in one gzip member (the last one holds the rest)
WORKERS = max(1, min(8, os.cpu_count() or 1))  # threads compressing one layer's members
LEVEL = 1  # zlib's: about 80 MB/s a core here, half the size (level 6: twice the time, 6% smaller)
SAVE_WRITER = f"imagectl-save/zlib-{zlib.ZLIB_VERSION}-{LEVEL}+members-4MiB"  # a layer's byte format; changes with them
PROBE_BYTES = 64 * 1024  # of a blob a destination holds, compared with the layer's own (KnownLayers.held)
PIECE = 1024 * 1024  # bytes read from the stream (and a spool file) at a time
MAX_INDEX_BYTES = 1024 * 1024  # manifest.json
MAX_CONFIG_BYTES = 16 * 1024 * 1024
_READ = re.compile(r"[0-9a-f]{64}\.json|[0-9a-f]{64}/layer\.tar|blobs/sha256/[0-9a-f]{64}|manifest\.json")


@dataclass(frozen=True)
class _Spooled:
    """A member read from the stream: its digest and size, and its spool file (None once dropped)."""

    digest: str
    size: int
    path: Path | None


@dataclass
class _Members:
    """What the stream held: the members read (by name), symlinks among them, and ``manifest.json``."""

    read: dict[str, _Spooled] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    index: bytes = b""
    held: dict[str, Descriptor] = field(default_factory=dict)  # diff_id -> blob the destination holds

    def get(self, name: str) -> _Spooled:
        """The member ``name`` names (through one symlink); raises EngineError when the stream had none."""
        found = self.read.get(self.links.get(name, name))
        if found is None:
            raise EngineError(f"docker save: the stream has no {name!r}, which its manifest.json names")
        return found


def layout_from_save(chunks: Iterable[bytes], image_id: str, dest: Path, known: KnownLayers | None = None) -> str:
    """Write the image ``image_id`` whose ``docker save`` stream is ``chunks`` as an OCI layout in ``dest`` (see the
    module docstring); the manifest's digest.  Raises EngineError for a stream that is not that image's save,
    RegistryError when ``known`` cannot ask the registry."""
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix=".save-", dir=dest.parent) as spool:
        members = _read_stream(io.BufferedReader(_Stream(chunks), PIECE), Path(spool), image_id, known)
        config, layers = _image_of(members, image_id)
        descriptors = _layer_blobs(members, layers, dest, known)
    body = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
            "config": {"mediaType": DOCKER_CONFIG, "size": len(config), "digest": image_id},
            "layers": [{"mediaType": d.media_type, "size": d.size, "digest": d.digest} for d in descriptors]}
    manifest = json.dumps(body, separators=(",", ":")).encode()
    digest = _sha256(manifest)
    for data in (config, manifest):
        _blob_path(dest, _sha256(data)).write_bytes(data)
    (dest / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {"schemaVersion": 2, "manifests": [{"mediaType": DOCKER_MANIFEST, "digest": digest, "size": len(manifest)}]}
    (dest / "index.json").write_text(json.dumps(index, separators=(",", ":")))
    return digest


def _read_stream(stream: io.BufferedReader, spool: Path, image_id: str, known: KnownLayers | None) -> _Members:
    """Read the members the module docstring names; raises EngineError for a stream that is no tar."""
    members, numbers = _Members(), itertools.count()
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not _READ.fullmatch(member.name):
                    continue
                if member.issym():
                    members.links[member.name] = posixpath.normpath(
                        posixpath.join(posixpath.dirname(member.name), member.linkname))
                elif member.isfile():
                    _read_member(tar, member, spool / str(next(numbers)), members, image_id, known)
    except tarfile.TarError as exc:
        raise EngineError(f"docker save: the stream is not a whole tar ({exc})") from None
    return members


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path, members: _Members,  # noqa: PLR0913
                 image_id: str, known: KnownLayers | None) -> None:
    source = tar.extractfile(member)
    assert source is not None  # a regular file
    if member.name == "manifest.json":
        members.index = _small(source, member.size, MAX_INDEX_BYTES, "manifest.json")
        return
    hasher = hashlib.sha256()
    with path.open("wb") as out:
        while piece := source.read(PIECE):
            hasher.update(piece)
            out.write(piece)
    digest, held = f"sha256:{hasher.hexdigest()}", None
    if known is not None and digest != image_id and not member.name.endswith(".json"):
        held = known.held(digest, SAVE_WRITER, lambda: first_bytes(path))
    if held is not None:
        members.held[digest] = held
        path.unlink()
    members.read[member.name] = _Spooled(digest, member.size, None if held is not None else path)


def first_bytes(tar: Path) -> bytes:
    """The first :data:`PROBE_BYTES` of the blob :func:`compress_layer` makes of the layer tar at ``tar`` (its first
    gzip member's), without making the rest."""
    with tar.open("rb") as source:
        return zlib_member(source.read(MEMBER_BYTES))[:PROBE_BYTES]


def _small(source: IO[bytes], size: int, limit: int, what: str) -> bytes:
    if size > limit:
        raise EngineError(f"docker save: {what} has {size} bytes (at most {limit} read)")
    return source.read(limit + 1)


def _image_of(members: _Members, image_id: str) -> tuple[bytes, list[tuple[str, _Spooled]]]:
    """The config's bytes and each layer (its diff_id, its member), checked as the module docstring says."""
    try:
        entries = json.loads(members.index)
        if not isinstance(entries, list) or len(entries) != 1:
            raise TypeError
        config_name, layer_names = entries[0]["Config"], entries[0]["Layers"]
        if not isinstance(config_name, str) or not all(isinstance(n, str) for n in layer_names):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        raise EngineError("docker save: the stream's manifest.json is missing or not one image's") from None
    spooled = members.get(config_name)
    if spooled.digest != image_id or spooled.path is None:
        raise EngineError(f"docker save: the config has digest {spooled.digest}, not the image id {image_id}")
    with spooled.path.open("rb") as source:
        config = _small(source, spooled.size, MAX_CONFIG_BYTES, "the config")
    diff_ids = _diff_ids(config)
    if len(diff_ids) != len(layer_names):
        raise EngineError(f"docker save: {len(layer_names)} layers, but the config lists {len(diff_ids)} diff_ids")
    layers = [(diff_id, members.get(name)) for diff_id, name in zip(diff_ids, layer_names, strict=True)]
    for place, (diff_id, layer) in enumerate(layers, 1):
        if layer.digest != diff_id:
            raise EngineError(f"docker save: layer {place} has digest {layer.digest}; the config's diff_id there is "
                              f"{diff_id} (the save does not hold the uncompressed layers the image is made of)")
    return config, layers


def _diff_ids(config: bytes) -> list[str]:
    try:
        diff_ids = json.loads(config)["rootfs"]["diff_ids"]
        if isinstance(diff_ids, list) and all(isinstance(d, str) for d in diff_ids):
            return diff_ids
    except (ValueError, TypeError, KeyError):
        pass
    raise EngineError("docker save: the config has no rootfs.diff_ids")


def _layer_blobs(members: _Members, layers: list[tuple[str, _Spooled]], dest: Path,
                 known: KnownLayers | None) -> list[Descriptor]:
    """Each layer's blob: the one the destination holds, else compressed into ``dest`` now (once per diff_id)."""
    blobs = dest / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    made: dict[str, Descriptor] = dict(members.held)
    for diff_id, layer in layers:
        if diff_id in made:
            continue
        assert layer.path is not None  # dropped only when held
        made[diff_id] = compress_layer(layer.path, blobs)
        layer.path.unlink()  # the disk holds a layer twice only while it is compressed
        if known is not None:
            known.made(diff_id, SAVE_WRITER, made[diff_id])
    return [made[diff_id] for diff_id, _ in layers]


def compress_layer(tar: Path, blobs: Path) -> Descriptor:
    """The layer tar at ``tar`` compressed by :data:`SAVE_WRITER` into the folder ``blobs`` (named by its digest);
    its descriptor.  The members are cut every :data:`MEMBER_BYTES` of the tar, whatever the pieces it was read
    in: the same tar gives the same blob.  :data:`WORKERS` threads compress members side by side (zlib lets go of
    the GIL), at most twice that many in memory, written in their order."""
    partial = blobs / f".{tar.name}.partial"
    hasher, size = hashlib.sha256(), 0
    with tar.open("rb") as source, partial.open("wb") as out, ThreadPoolExecutor(WORKERS) as pool:
        pending: collections.deque[Future[bytes]] = collections.deque()

        def write_first() -> None:
            nonlocal size
            member = pending.popleft().result()
            hasher.update(member)
            out.write(member)
            size += len(member)

        for data in _members_of(source):
            pending.append(pool.submit(zlib_member, data))
            if len(pending) >= 2 * WORKERS:
                write_first()
        while pending:
            write_first()
    digest = f"sha256:{hasher.hexdigest()}"
    partial.replace(blobs / hasher.hexdigest())
    return Descriptor(DOCKER_LAYER, digest, size)


def zlib_member(data: bytes) -> bytes:
    """``data`` as one gzip member (:func:`~imagectl.assemble.layer.gzip_frame`) of zlib's deflate at :data:`LEVEL`
    (the same bytes wherever Python links the same zlib)."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    return gzip_frame(compressor.compress(data) + compressor.flush(), data)


def _members_of(source: BinaryIO) -> Iterator[bytes]:
    """``source``'s bytes in runs of exactly :data:`MEMBER_BYTES`, the last one shorter (for an empty file, one
    empty run)."""
    for number in itertools.count():
        run = source.read(MEMBER_BYTES)
        while run and len(run) < MEMBER_BYTES and (more := source.read(MEMBER_BYTES - len(run))):
            run += more
        if run or number == 0:
            yield run
        if len(run) < MEMBER_BYTES:
            return


def _blob_path(layout: Path, digest: str) -> Path:
    return layout / "blobs" / "sha256" / digest.removeprefix("sha256:")


def _sha256(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class _Stream(io.RawIOBase):
    """The save stream's chunks as a raw file (one chunk held at a time), for a buffered reader ``tarfile`` reads."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._rest = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._rest:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._rest = memoryview(chunk)
        size = min(len(buffer), len(self._rest))
        buffer[:size] = self._rest[:size]
        self._rest = self._rest[size:]
        return size
