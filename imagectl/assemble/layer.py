"""A deterministic image layer (a gzip- or zstd-compressed tar) written from wheel members and generated files.

The tar holds every entry with owner 0:0, no user or group name and mtime 0, in the order added, each directory
once; headers are POSIX pax (``tarfile``'s encoding: a pax record only for a path over 100 characters).  The gzip
stream (the default, ``[registry] compression = "gzip"``) is a series of members (RFC 1952 allows any number; every
gzip reader of the engines and registries reads them as one stream):

- a deflated wheel member's stored bytes are copied as the body of a gzip member of their own, with the zip's
  CRC-32 and size as its trailer: no byte is compressed again, so writing a layer costs little more than copying
  the wheels;
- everything else (tar headers and padding, stored members, generated files: RECORD, scripts, ``.pyc``) is
  gathered into members between them, deflated by :func:`.deflate.deflate`: stored blocks, and each run of NULs (a
  tar header's empty fields, padding) as a block of copies.

No byte of a layer comes from a compressor's choices: the copied streams are the wheels' own, :mod:`.deflate`'s
blocks are fixed by their content, and CRC-32 is a function of the bytes alone.  So the same entries give the same bytes
on any machine, whichever zlib its Python links (zlib, zlib-ng, a vendor's fork: each deflates differently).  The
price is the generated runs' compression; for the ``.pyc`` layer that is the larger share (docs/building.md's numbers).
:data:`LAYER_WRITER` names this byte format; it changes whenever the bytes would, and a build's provenance records
it.

With ``[registry] compression = "zstd"`` the tar is one zstd frame instead (:mod:`.zstd_stream`: a pinned encoder with
fixed parameters, so again no byte depends on the host; the wheels' members are inflated and compressed again, as
each layer is written); :func:`writer_name` names that format.

As it writes, it hashes the uncompressed tar (the layer's ``diff_id``), the compressed bytes (the blob's digest)
and each file (for RECORD), and checks every copied member against its CRC-32 by inflating it.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Literal, Protocol

from ..errors import BuildError
from ..stop import Stop
from .deflate import deflate
from .wheel import Member, inflated_chunks, member_chunks
from .zstd_stream import ZstdStream, zstd_format

Compression = Literal["gzip", "zstd"]
GZIP_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
MEDIA_TYPES: dict[Compression, str] = {"gzip": GZIP_LAYER, "zstd": ZSTD_LAYER}
_SUFFIXES: dict[Compression, str] = {"gzip": ".tar.gz", "zstd": ".tar.zst"}
LAYER_WRITER = "imagectl-layer/2"  # the byte format (1: the generated runs deflated by the host's zlib at level 6)
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no flags, mtime 0, no extra flags, OS unknown
_FLUSH_AT = 4 * 1024 * 1024
_BLOCK = 512
DIR_MODE, FILE_MODE, EXEC_MODE = 0o755, 0o644, 0o755


@dataclass(frozen=True)
class LayerBlob:
    """A written layer: its blob file, the blob's digest and size, and its ``diff_id`` (the uncompressed tar's)."""

    path: Path
    digest: str
    size: int
    diff_id: str
    media_type: str = GZIP_LAYER

    def descriptor(self) -> dict[str, object]:
        """The layer's OCI descriptor."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class FileDigest:
    """A file as RECORD lists it: ``sha256=`` (urlsafe base64, no padding) and its size."""

    sha256: str
    size: int

    @classmethod
    def of(cls, data: bytes) -> FileDigest:
        return cls(record_hash(hashlib.sha256(data).digest()), len(data))


def layer_compression(name: str) -> Compression:
    """``[registry] compression`` (``gzip`` or ``zstd``) as the writer takes it; raises BuildError for another."""
    for compression in MEDIA_TYPES:
        if compression == name:
            return compression
    raise BuildError(f"layer: unknown compression {name!r} (gzip or zstd)")


def writer_name(compression: Compression = "gzip") -> str:
    """The byte format of the layers :class:`LayerWriter` writes with ``compression``, as a build's provenance
    records it: :data:`LAYER_WRITER`, and for zstd the encoder's (``imagectl-layer/2+zstd-1.5.7-l3``)."""
    return LAYER_WRITER if compression == "gzip" else f"{LAYER_WRITER}+{zstd_format()}"


def blob_name(stem: str, compression: Compression = "gzip") -> str:
    """The file name of a layer blob called ``stem`` (``.tar.gz`` or ``.tar.zst`` added)."""
    return stem + _SUFFIXES[compression]


def record_hash(digest: bytes) -> str:
    """A sha256 digest as RECORD writes it (``sha256=`` and urlsafe base64 without padding)."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class _Body(Protocol):
    """The compressed stream of a layer: ``write`` takes the tar's bytes, ``copy`` a deflated wheel member (yielding
    its content as it goes into the layer), ``finish`` ends it; what they make goes to the ``emit`` they were made
    with."""

    def write(self, data: bytes) -> None: ...
    def copy(self, wheel: Path, member: Member) -> Iterator[bytes]: ...
    def finish(self) -> None: ...


class _GzipMembers:
    """The gzip stream of the module docstring: a member of each copied wheel stream and of each run between them."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        self._emit = emit
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= _FLUSH_AT:
            self.finish()

    def copy(self, wheel: Path, member: Member) -> Iterator[bytes]:
        self.finish()
        self._emit(_GZIP_HEADER)
        for stored, out in member_chunks(wheel, member, exact=True):  # checked before the trailer is written
            self._emit(stored)
            yield out
        self._emit(struct.pack("<II", member.crc & 0xFFFFFFFF, member.size & 0xFFFFFFFF))

    def finish(self) -> None:
        if not self._pending:
            return
        self._emit(gzip_member(self._pending))
        self._pending = bytearray()


def gzip_member(data: bytes | bytearray) -> bytes:
    """``data`` as one gzip member of the module docstring's (a header without a name or time,
    :func:`.deflate.deflate`'s blocks, CRC-32 and size): the same bytes on any machine."""
    return gzip_frame(deflate(data), data)


def gzip_frame(deflated: bytes, data: bytes | bytearray) -> bytes:
    """The gzip member holding ``deflated`` (a raw deflate stream of ``data``): a header without a name or time,
    the stream, then ``data``'s CRC-32 and size."""
    return _GZIP_HEADER + deflated + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)


class _ZstdFrame:
    """The zstd frame of :mod:`.zstd_stream`: a copied member is inflated (and checked) and compressed again."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        self._stream = ZstdStream(emit)

    def write(self, data: bytes) -> None:
        self._stream.write(data)

    def copy(self, wheel: Path, member: Member) -> Iterator[bytes]:
        for _, out in member_chunks(wheel, member, exact=True):
            self._stream.write(out)
            yield out

    def finish(self) -> None:
        self._stream.finish()


class LayerWriter:
    """Writes one layer to ``dest`` (see the module docstring), compressed with ``compression``; a context manager:
    :meth:`close` finishes it and returns the :class:`LayerBlob`; an exception inside the block removes the partial
    file.  ``stop``: the build's stop signal, checked before each piece of the blob is written (a member of a wheel
    is copied in pieces), so a stopped build leaves a layer within a piece (raises Stopped)."""

    def __init__(self, dest: Path, compression: Compression = "gzip", *, stop: Stop | None = None) -> None:
        self._dest, self._stop = dest, stop
        self._out: BinaryIO = dest.open("wb")
        self._blob, self._tar = hashlib.sha256(), hashlib.sha256()
        self._size = 0
        self._media_type = MEDIA_TYPES[compression]
        self._body: _Body = _ZstdFrame(self._emit) if compression == "zstd" else _GzipMembers(self._emit)
        self._dirs: set[str] = set()
        self._files: dict[str, FileDigest] = {}
        self._result: LayerBlob | None = None

    def __enter__(self) -> LayerWriter:
        return self

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        if kind is None:
            self.close()
        else:
            self._out.close()
            self._dest.unlink(missing_ok=True)

    # ---------------------------------------------------------------------------------------------- entries

    def add_dir(self, path: str, mode: int = DIR_MODE) -> None:
        """A directory entry for ``path`` (absolute in the image), and for its parents first; each only once."""
        name = _tar_name(path)
        if not name or name in self._dirs:
            return
        parent = str(PurePosixPath(name).parent)
        if parent != ".":
            self.add_dir("/" + parent)
        self._dirs.add(name)
        self._header(name + "/", tarfile.DIRTYPE, 0, mode)

    def add_bytes(self, path: str, data: bytes, mode: int = FILE_MODE) -> FileDigest:
        """A regular file at ``path`` holding ``data``; its RECORD digest."""
        name = self._file_name(path)
        self._header(name, tarfile.REGTYPE, len(data), mode)
        self._fresh(data)
        self._fresh(_padding(len(data)))
        digest = FileDigest.of(data)
        self._files[name] = digest
        return digest

    def add_member(self, path: str, wheel: Path, member: Member, mode: int = FILE_MODE) -> FileDigest:
        """A regular file at ``path`` holding wheel ``member``; a deflated member's bytes are copied as they are
        stored.  Raises BuildError for a member that does not match its CRC-32 or size."""
        name = self._file_name(path)
        self._header(name, tarfile.REGTYPE, member.size, mode)
        content = hashlib.sha256()
        if member.deflated and member.size:
            self._copy_deflated(wheel, member, content)
        else:
            for chunk in inflated_chunks(wheel, member):
                content.update(chunk)
                self._fresh(chunk)
        self._fresh(_padding(member.size))
        digest = FileDigest(record_hash(content.digest()), member.size)
        self._files[name] = digest
        return digest

    def add_whiteout(self, path: str) -> None:
        """An OCI whiteout for ``path``: the file or folder of a lower layer is gone in this one."""
        pure = PurePosixPath(path)
        self.add_dir(str(pure.parent))
        self._header(_tar_name(str(pure.parent / f".wh.{pure.name}")), tarfile.REGTYPE, 0, FILE_MODE)

    def has(self, path: str) -> bool:
        """Whether a file ``path`` was written already."""
        return _tar_name(path) in self._files

    def close(self) -> LayerBlob:
        """End the tar (two zero blocks), flush, and return the blob (again on a second call)."""
        if self._result is None:
            self._fresh(b"\0" * (2 * _BLOCK))
            self._body.finish()
            self._out.close()
            self._result = LayerBlob(self._dest, f"sha256:{self._blob.hexdigest()}", self._size,
                                     f"sha256:{self._tar.hexdigest()}", self._media_type)
        return self._result

    # ---------------------------------------------------------------------------------------------- plumbing

    def _file_name(self, path: str) -> str:
        name = _tar_name(path)
        if not name:
            raise BuildError(f"layer: no file name in {path!r}")
        self.add_dir(str(PurePosixPath("/" + name).parent))
        return name

    def _header(self, name: str, kind: bytes, size: int, mode: int) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.size, info.mode, info.mtime = kind, size, mode, 0
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        self._fresh(info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape"))

    def _fresh(self, data: bytes) -> None:
        self._tar.update(data)
        self._body.write(data)

    def _copy_deflated(self, wheel: Path, member: Member, content: hashlib._Hash) -> None:
        for out in self._body.copy(wheel, member):
            content.update(out)
            self._tar.update(out)

    def _emit(self, data: bytes) -> None:
        if self._stop is not None:
            self._stop.check()
        self._out.write(data)
        self._blob.update(data)
        self._size += len(data)


def _tar_name(path: str) -> str:
    """``path`` (absolute in the image) as a tar entry names it: relative, normalised; raises BuildError for a
    path that climbs out (``..``) or holds a NUL."""
    if "\0" in path:
        raise BuildError(f"layer: a NUL in the path {path!r}")
    parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".", "")]
    if ".." in parts:
        raise BuildError(f"layer: the path {path!r} climbs out of its folder")
    return "/".join(parts)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)
