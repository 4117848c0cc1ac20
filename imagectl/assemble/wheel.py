"""One wheel file read as data: where each member's stored bytes lie in the file, its dist-info and its metadata.

A wheel is a zip archive; each member is stored (method 0) or deflated (method 8) on its own.  :class:`Member`
records where a member's stored bytes begin (after its local header), so a layer writer can copy a deflated
member's bytes into a gzip stream as they are (:mod:`.layer`) instead of inflating and compressing them again.
Only the central directory and the local headers are read here; :func:`member_bytes` inflates one member.
"""

from __future__ import annotations

import configparser
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from ..errors import BuildError

_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIGNATURE = 0x04034B50
_CHUNK = 1024 * 1024
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED


@dataclass(frozen=True)
class Member:
    """One file of a wheel: its name, where its stored bytes are (``offset``, ``stored_size``), its size and CRC-32
    once inflated, whether it is deflated (else stored) and whether the zip marks it executable."""

    name: str
    offset: int
    stored_size: int
    size: int
    crc: int
    deflated: bool
    executable: bool


@dataclass(frozen=True)
class Wheel:
    """A wheel file: its project (canonical name), version, members (directories left out) and the names of its
    ``.dist-info`` and ``.data`` folders."""

    path: Path
    project: str
    version: str
    members: tuple[Member, ...]
    dist_info: str
    data_dir: str

    def member(self, name: str) -> Member | None:
        """The member called ``name``, or None."""
        return next((m for m in self.members if m.name == name), None)

    def text(self, name: str) -> str:
        """The member ``name`` of the dist-info folder as UTF-8 text ("" where the wheel has none); raises
        BuildError for a member that does not inflate to its size and CRC."""
        member = self.member(f"{self.dist_info}/{name}")
        return member_bytes(self.path, member).decode("utf-8", "replace") if member else ""

    @property
    def root_is_purelib(self) -> bool:
        """``Root-Is-Purelib`` of the ``WHEEL`` file (its root goes to purelib, else platlib)."""
        headers = HeaderParser().parsestr(self.text("WHEEL"))
        return (headers.get("Root-Is-Purelib") or "").strip().lower() == "true"

    def entry_points(self) -> dict[str, dict[str, str]]:
        """The ``console_scripts`` and ``gui_scripts`` of ``entry_points.txt``: {group: {script name: target}};
        raises BuildError for a file that does not parse."""
        text = self.text("entry_points.txt")
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # script names keep their case
        try:
            parser.read_string(text)
        except configparser.Error as exc:
            raise BuildError(f"{self.path.name}: entry_points.txt does not parse: {exc}".splitlines()[0]) from None
        return {group: dict(parser[group]) for group in ("console_scripts", "gui_scripts") if parser.has_section(group)}


def read_wheel(path: Path) -> Wheel:
    """Read the members of wheel ``path`` (its file name says project and version).  Raises BuildError for a file
    that is not a readable wheel: a bad name, not a zip, an encrypted member or another compression than stored or
    deflated, no ``NAME-VERSION.dist-info`` folder."""
    try:
        project, version, _build, _tags = parse_wheel_filename(path.name)
    except ValueError as exc:
        raise BuildError(f"{path.name}: not a wheel file name: {exc}") from None
    try:
        with zipfile.ZipFile(path) as archive, path.open("rb") as raw:
            members = tuple(_member(raw, info, path) for info in archive.infolist() if not info.is_dir())
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BuildError(f"{path.name}: cannot read the wheel: {exc}") from None
    dist_info = _dist_info(members, project, path)
    return Wheel(path, str(project), str(version), members, dist_info, dist_info.removesuffix(".dist-info") + ".data")


def _member(raw, info: zipfile.ZipInfo, path: Path) -> Member:  # noqa: ANN001 - a binary file
    if info.flag_bits & 0x1:
        raise BuildError(f"{path.name}: member {info.filename} is encrypted")
    if info.compress_type not in (STORED, DEFLATED):
        raise BuildError(f"{path.name}: member {info.filename} uses zip compression {info.compress_type} "
                         "(only stored and deflated are read)")
    raw.seek(info.header_offset)
    fields = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
    if fields[0] != _LOCAL_SIGNATURE:
        raise BuildError(f"{path.name}: member {info.filename} has no local header where the directory says")
    offset = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
    executable = bool((info.external_attr >> 16) & 0o111)
    return Member(info.filename, offset, info.compress_size, info.file_size, info.CRC,
                  info.compress_type == DEFLATED, executable)


def _dist_info(members: tuple[Member, ...], project: str, path: Path) -> str:
    """The wheel's ``NAME-VERSION.dist-info`` folder: the top-level one of the project's name."""
    folders = {m.name.split("/", 1)[0] for m in members if "/" in m.name}
    found = [f for f in folders if f.endswith(".dist-info")
             and canonicalize_name(f.removesuffix(".dist-info").rsplit("-", 1)[0]) == canonicalize_name(project)]
    if len(found) != 1:
        raise BuildError(f"{path.name}: expected one {project}-VERSION.dist-info folder, "
                         f"found {sorted(found) or 'none'}")
    return found[0]


def stored_chunks(path: Path, member: Member) -> Iterator[bytes]:
    """The stored (maybe deflated) bytes of ``member``, in chunks of at most 1 MiB."""
    with path.open("rb") as raw:
        raw.seek(member.offset)
        left = member.stored_size
        while left:
            chunk = raw.read(min(_CHUNK, left))
            if not chunk:
                raise BuildError(f"{path.name}: member {member.name} is cut short")
            left -= len(chunk)
            yield chunk


def member_chunks(path: Path, member: Member, *, exact: bool = False) -> Iterator[tuple[bytes, bytes]]:
    """``(stored bytes, their content)`` of ``member`` chunk by chunk (the same bytes twice for a stored member),
    checked at the end against the size and CRC-32 the zip names and, ``exact``, for a deflate stream that ends
    where the member does (stored bytes copied as a gzip member's body must: a zip reader skips what follows).
    Raises BuildError for a member that does not match."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS) if member.deflated else None
    size, crc = 0, 0
    try:
        for chunk in stored_chunks(path, member):
            out = inflater.decompress(chunk) if inflater else chunk
            size, crc = size + len(out), zlib.crc32(out, crc)
            yield chunk, out
        if inflater:
            tail = inflater.flush()
            size, crc = size + len(tail), zlib.crc32(tail, crc)
            yield b"", tail
    except zlib.error as exc:
        raise BuildError(f"{path.name}: member {member.name} does not inflate: {exc}") from None
    cut = exact and inflater is not None and (not inflater.eof or bool(inflater.unused_data))
    if size != member.size or crc != member.crc or cut:
        raise BuildError(f"{path.name}: member {member.name} inflates to {size} bytes with CRC {crc:08x}"
                         f"{' (its deflate stream does not end where the member does)' if cut else ''}, the zip "
                         f"says {member.size} bytes with CRC {member.crc:08x}")


def inflated_chunks(path: Path, member: Member) -> Iterator[bytes]:
    """The content of ``member``, chunk by chunk, checked as :func:`member_chunks` checks it."""
    for _, out in member_chunks(path, member):
        yield out


def member_bytes(path: Path, member: Member) -> bytes:
    """The whole content of ``member`` (for small members: metadata, scripts); raises BuildError as
    :func:`inflated_chunks`."""
    return b"".join(inflated_chunks(path, member))
