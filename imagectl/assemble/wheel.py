"""One wheel file read as data: where each member's stored bytes lie in the file, its dist-info and its metadata.

A wheel is a zip archive; each member is stored (method 0) or deflated (method 8) on its own.  :class:`Member`
records where a member's stored bytes begin (after its local header), so a layer writer can copy a deflated
member's bytes into a gzip stream as they are (:mod:`.layer`) instead of inflating and compressing them again.
Only the central directory, the local headers and the ``WHEEL`` file are read here; :func:`member_chunks` inflates one
member, a piece of at most 1 MiB at a time whatever the member holds (a deflate stream can expand a thousandfold).

What a wheel must be, checked by :func:`read_wheel` before anything of it is written anywhere: a ``WHEEL`` file with
``Wheel-Version`` 1.x (PyPA's installer takes 1.x only; pip refuses a later major version), and each member name once
in the zip (two members of one name are two different files to two zip readers).  A dist-info file read whole
(``WHEEL``, ``entry_points.txt``) is at most :data:`METADATA_CAP` bytes.
"""

from __future__ import annotations

import configparser
import dataclasses
import re
import struct
import zipfile
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from ..errors import BuildError

_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
_LOCAL_SIGNATURE = 0x04034B50
_CHUNK = 1024 * 1024
# The most of a dist-info file read whole and parsed.  Of 967 real wheels measured (torch 2.14, nvidia-*, jaxlib,
# tensorflow, vtk, ...), the biggest were: RECORD 1.9 MB (cmeel-boost, 16,235 files), METADATA 233 KB (mujoco),
# entry_points.txt 2.4 KB (setuptools), WHEEL 224 bytes; 4 MiB is twice the biggest and costs a few MB of memory.
METADATA_CAP = 4 << 20
WHEEL_MAJOR = 1  # the Wheel-Version major this reader installs (PEP 427: a new major is not readable by old tools)
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
    """A wheel file: its project (canonical name), version, members (directories left out), the names of its
    ``.dist-info`` and ``.data`` folders, and its ``WHEEL`` file's ``Wheel-Version`` and ``Root-Is-Purelib`` (its
    root goes to purelib, else platlib)."""

    path: Path
    project: str
    version: str
    members: tuple[Member, ...]
    dist_info: str
    data_dir: str
    wheel_version: tuple[int, int] = (1, 0)
    root_is_purelib: bool = False

    def member(self, name: str) -> Member | None:
        """The member called ``name``, or None."""
        return next((m for m in self.members if m.name == name), None)

    def text(self, name: str) -> str:
        """The member ``name`` of the dist-info folder as UTF-8 text ("" where the wheel has none); raises
        BuildError for a member over :data:`METADATA_CAP` bytes or that does not inflate to its size and CRC."""
        member = self.member(f"{self.dist_info}/{name}")
        return capped_bytes(self.path, member, METADATA_CAP).decode("utf-8", "replace") if member else ""

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
            infos = archive.infolist()
            _once_each(infos, path)
            members = tuple(_member(raw, info, path) for info in infos if not info.is_dir())
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BuildError(f"{path.name}: cannot read the wheel: {exc}") from None
    dist_info = _dist_info(members, project, path)
    read = Wheel(path, str(project), str(version), members, dist_info, dist_info.removesuffix(".dist-info") + ".data")
    headers = _wheel_file(read)
    purelib = (headers.get("Root-Is-Purelib") or "").strip().lower() == "true"
    return dataclasses.replace(read, wheel_version=_wheel_version(read, headers), root_is_purelib=purelib)


def _once_each(infos: list[zipfile.ZipInfo], path: Path) -> None:
    """Raise BuildError naming the first member name the zip holds twice (zipfile reads the last of them, other
    readers the first: which bytes a wheel holds must not depend on the reader)."""
    seen: set[str] = set()
    for info in infos:
        if info.filename in seen:
            raise BuildError(f"{path.name}: member {shown(info.filename)} is in the zip twice")
        seen.add(info.filename)


def _wheel_file(wheel: Wheel) -> Message:
    """The headers of the wheel's ``WHEEL`` file; raises BuildError where it has none."""
    if wheel.member(f"{wheel.dist_info}/WHEEL") is None:
        raise BuildError(f"{wheel.path.name}: no {wheel.dist_info}/WHEEL file (a wheel must have one)")
    return HeaderParser().parsestr(wheel.text("WHEEL"))


def _wheel_version(wheel: Wheel, headers: Message) -> tuple[int, int]:
    """``Wheel-Version`` as (major, minor); raises BuildError where it is missing, not a version, or of another major
    than :data:`WHEEL_MAJOR` (a later minor is read: the format promises it stays readable)."""
    value = (headers.get("Wheel-Version") or "").strip()
    if not value:
        raise BuildError(f"{wheel.path.name}: {wheel.dist_info}/WHEEL has no Wheel-Version")
    found = re.fullmatch(r"(\d{1,9})\.(\d{1,9})", value)
    if found is None:
        raise BuildError(f"{wheel.path.name}: Wheel-Version {shown(value)!r} is not MAJOR.MINOR")
    major, minor = int(found[1]), int(found[2])
    if major != WHEEL_MAJOR:
        raise BuildError(f"{wheel.path.name}: Wheel-Version {value} is not supported (only {WHEEL_MAJOR}.x wheels are)")
    return major, minor


def shown(name: str, width: int = 120) -> str:
    """``name`` as an error line shows it: at most ``width`` characters (a hostile name may be thousands long)."""
    return name if len(name) <= width else f"{name[:width - 30]}...({len(name)} characters)"


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


def member_chunks(path: Path, member: Member, *, exact: bool = False) -> Generator[tuple[bytes, bytes], None, None]:
    """``(stored bytes, their content)`` of ``member`` chunk by chunk (the same bytes twice for a stored member),
    checked at the end against the size and CRC-32 the zip names and, ``exact``, for a deflate stream that ends
    where the member does (stored bytes copied as a gzip member's body must: a zip reader skips what follows).
    Raises BuildError for a member that does not match."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS) if member.deflated else None
    size, crc = 0, 0
    try:
        for chunk in stored_chunks(path, member):
            for stored, out in _inflated(inflater, chunk):
                size, crc = size + len(out), zlib.crc32(out, crc)
                if size > member.size:  # no further: a hostile stream may go on for terabytes
                    break
                yield stored, out
            if size > member.size:
                break
        if inflater and size <= member.size:
            tail = inflater.flush()
            size, crc = size + len(tail), zlib.crc32(tail, crc)
            yield b"", tail
    except zlib.error as exc:
        raise BuildError(f"{path.name}: member {member.name} does not inflate: {exc}") from None
    cut = exact and inflater is not None and (not inflater.eof or bool(inflater.unused_data))
    if size > member.size:
        raise BuildError(f"{path.name}: member {member.name} inflates to more than the {member.size} bytes the zip "
                         "says")
    if size != member.size or crc != member.crc or cut:
        raise BuildError(f"{path.name}: member {member.name} inflates to {size} bytes with CRC {crc:08x}"
                         f"{' (its deflate stream does not end where the member does)' if cut else ''}, the zip "
                         f"says {member.size} bytes with CRC {member.crc:08x}")


def _inflated(inflater: zlib._Decompress | None, chunk: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(stored, content)`` pieces of one stored ``chunk``: the chunk with its first piece of content, then ``b""``
    with each further piece; a piece is at most 1 MiB (1 MiB of deflate stream can hold a GiB)."""
    if inflater is None:
        yield chunk, chunk
        return
    stored, data = chunk, chunk
    while True:  # once at least: after the stream's end, what follows goes to unused_data (``exact`` looks there)
        out = inflater.decompress(data, _CHUNK)
        yield stored, out
        stored, tail = b"", inflater.unconsumed_tail
        if not tail or (not out and len(tail) == len(data)):  # all read, or no progress: the checks at the end tell
            return
        data = tail


def inflated_chunks(path: Path, member: Member) -> Iterator[bytes]:
    """The content of ``member``, chunk by chunk, checked as :func:`member_chunks` checks it."""
    for _, out in member_chunks(path, member):
        yield out


def first_piece(path: Path, member: Member) -> bytes:
    """The first piece of ``member``'s content (at most 1 MiB; b"" for an empty member), not checked: a CRC needs
    the whole.  Raises BuildError for a member that does not inflate."""
    chunks = member_chunks(path, member)
    try:
        return next((out for _, out in chunks if out), b"")
    finally:
        chunks.close()


def member_bytes(path: Path, member: Member) -> bytes:
    """The whole content of ``member`` (for small members: metadata, scripts); raises BuildError as
    :func:`inflated_chunks`."""
    return b"".join(inflated_chunks(path, member))


def capped_bytes(path: Path, member: Member, cap: int) -> bytes:
    """The whole content of ``member``, which the caller reads whole (to parse or rewrite it); raises BuildError,
    having read at most ``cap`` and 1 MiB, for one over ``cap`` bytes, and as :func:`inflated_chunks`."""
    if member.size > cap:
        raise BuildError(f"{path.name}: member {shown(member.name)} is {member.size} bytes, more than the "
                         f"{cap >> 20} MiB read of such a file")
    return member_bytes(path, member)  # the zip's size is checked as it inflates: it reads no more than the cap
