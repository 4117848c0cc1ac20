"""imagectl.assemble.layer (and the wheel reading under it): layers written from real wheels made with zipfile, read
back with Python's gzip and tarfile and with GNU tar and gzip; the deflated members' bytes copied as they are, the
digests, determinism, and the refusals (a corrupted member, a path that climbs out or holds a NUL)."""

from __future__ import annotations

import gzip
import hashlib
import io
import random
import shutil
import struct
import subprocess
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

import pytest

from imagectl.assemble.layer import (
    DIR_MODE,
    EXEC_MODE,
    FILE_MODE,
    GZIP_LAYER,
    Compression,
    FileDigest,
    LayerBlob,
    LayerWriter,
    record_hash,
)
from imagectl.assemble.wheel import Member, member_bytes, read_wheel
from imagectl.errors import BuildError
from imagectl.stop import Stop, Stopped

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
ROOT = "/opt/venv/lib/python3.11/site-packages"
LONG_DIR = "demo/" + "d" * 60
LONG_NAME = f"{LONG_DIR}/{'f' * 70}.txt"  # over 100 characters: a pax header
MIB = 1024 * 1024
BIG = random.Random(1).randbytes(5 * MIB)  # random: deflate cannot shrink it, over the 4 MiB flush
BIG_STORED = random.Random(2).randbytes(5 * MIB)


def _info(name: str, compress: int, mode: int = 0o644) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.compress_type = compress
    info.external_attr = (0o100000 | mode) << 16
    return info


CONTENT: dict[str, tuple[bytes, int, int]] = {  # name: (content, zip compression, mode in the zip)
    "demo/__init__.py": (b"from .core import run\n" * 40, zipfile.ZIP_DEFLATED, 0o644),
    "demo/core.py": (b"def run():\n    return 42\n", zipfile.ZIP_DEFLATED, 0o644),
    "demo/stored.bin": (bytes(range(256)) * 9, zipfile.ZIP_STORED, 0o644),
    "demo/empty.txt": (b"", zipfile.ZIP_DEFLATED, 0o644),
    "demo/empty-stored.txt": (b"", zipfile.ZIP_STORED, 0o644),
    "demo/big.bin": (BIG, zipfile.ZIP_DEFLATED, 0o644),
    "demo/big-stored.bin": (BIG_STORED, zipfile.ZIP_STORED, 0o644),
    "demo/bin/tool.sh": (b"#!/bin/sh\necho tool\n", zipfile.ZIP_DEFLATED, 0o755),
    LONG_NAME: (b"a long path\n", zipfile.ZIP_DEFLATED, 0o644),
    "demo-1.0.dist-info/METADATA": (b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n", zipfile.ZIP_DEFLATED, 0o644),
    "demo-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                                 zipfile.ZIP_DEFLATED, 0o644),
}


def make_wheel(folder: Path, content: dict[str, tuple[bytes, int, int]] = CONTENT,
               name: str = "demo-1.0-py3-none-any.whl") -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("demo/", date_time=(2020, 1, 1, 0, 0, 0)), b"")  # read_wheel leaves it out
        for member, (data, compress, mode) in content.items():
            archive.writestr(_info(member, compress, mode), data)
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return make_wheel(tmp_path_factory.mktemp("wheel"))


def write_layer(wheel: Path, dest: Path, compression: Compression = "gzip") -> tuple[LayerBlob, dict[str, FileDigest]]:
    """Every member of ``wheel`` under ROOT, a generated file and a whiteout; (the blob, the digests returned)."""
    read = read_wheel(wheel)
    digests = {}
    with LayerWriter(dest, compression) as out:
        for member in read.members:
            digests[member.name] = out.add_member(f"{ROOT}/{member.name}", wheel, member,
                                                  EXEC_MODE if member.executable else FILE_MODE)
        digests["generated"] = out.add_bytes("/opt/imagectl/lock.txt", b"demo==1.0\n")
        out.add_whiteout("/usr/lib/old/gone.py")
    return out.close(), digests


@pytest.fixture(scope="module")
def written(wheel, tmp_path_factory) -> tuple[LayerBlob, dict[str, FileDigest]]:
    return write_layer(wheel, tmp_path_factory.mktemp("layer") / "layer.tar.gz")


@pytest.fixture
def layer(written) -> Path:
    return written[0].path


def tar_entries(blob: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob.read_bytes())), mode="r:") as tar:
        return [(info, tar.extractfile(info).read() if info.isreg() else None) for info in tar.getmembers()]


def gzip_members(data: bytes) -> list[tuple[bytes, bytes]]:
    """(the raw member, its inflated bytes) of each gzip member of ``data``, in order."""
    members = []
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = inflater.decompress(data) + inflater.flush()
        assert inflater.eof, "a gzip member is cut short"
        rest = inflater.unused_data
        members.append((data[:len(data) - len(rest)], out))
        data = rest
    return members


def zip_stored_bytes(wheel: Path, name: str) -> bytes:
    member = read_wheel(wheel).member(name)
    with wheel.open("rb") as raw:
        raw.seek(member.offset)
        return raw.read(member.stored_size)


# ---------------------------------------------------------------------------------------------- reading a wheel


def test_read_wheel_finds_each_members_stored_bytes_size_crc_and_exec_bit(wheel):
    read = read_wheel(wheel)
    assert (read.project, read.version, read.dist_info, read.data_dir) == ("demo", "1.0", "demo-1.0.dist-info",
                                                                           "demo-1.0.data")
    assert [m.name for m in read.members] == list(CONTENT)  # the directory entry left out, the zip's order
    with zipfile.ZipFile(wheel) as archive:
        for member in read.members:
            data, compress, mode = CONTENT[member.name]
            info = archive.getinfo(member.name)
            assert (member.size, member.crc, member.stored_size) == (len(data), zlib.crc32(data), info.compress_size)
            assert member.deflated == (compress == zipfile.ZIP_DEFLATED)
            assert member.executable == bool(mode & 0o111)
            assert member_bytes(wheel, member) == data
    stored = read.member("demo/stored.bin")
    assert zip_stored_bytes(wheel, "demo/stored.bin") == CONTENT["demo/stored.bin"][0]
    assert stored.stored_size == stored.size
    assert read.root_is_purelib is True
    assert read.member("nothing") is None


# ---------------------------------------------------------------------------------------------- the layer's tar


def test_every_entry_is_owned_by_root_at_time_zero_with_its_mode_and_the_zip_members_content(layer):
    entries = tar_entries(layer)
    files = {info.name: (info, data) for info, data in entries if info.isreg()}
    expected = {f"{ROOT.lstrip('/')}/{name}": value for name, value in CONTENT.items()}
    expected["opt/imagectl/lock.txt"] = (b"demo==1.0\n", None, 0o644)
    expected["usr/lib/old/.wh.gone.py"] = (b"", None, 0o644)
    assert set(files) == set(expected)
    for name, (data, _, mode) in expected.items():
        info, content = files[name]
        assert content == data, name
        assert info.size == len(data), name
        assert info.mode == (EXEC_MODE if mode & 0o111 else FILE_MODE), name
    for info, _ in entries:
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", ""), info.name
        assert info.isreg() or info.isdir(), info.name
        if info.isdir():
            assert info.mode == DIR_MODE and info.size == 0, info.name
    assert files[f"{ROOT.lstrip('/')}/{LONG_NAME}"][0].pax_headers == {"path": f"{ROOT.lstrip('/')}/{LONG_NAME}"}
    assert all(not info.pax_headers for info, _ in entries if len(info.name) <= 100)


def test_each_directory_comes_once_and_before_its_contents(layer):
    names, seen_dirs = [], set()
    for info, _ in tar_entries(layer):
        parent = str(PurePosixPath(info.name).parent)
        assert parent == "." or parent in seen_dirs, f"{info.name} comes before its folder {parent}"
        if info.isdir():
            assert info.name not in seen_dirs, f"{info.name} twice"
            seen_dirs.add(info.name)
        names.append(info.name)
    assert len(names) == len(set(names))
    assert {"opt", "opt/venv", "usr", "usr/lib", "usr/lib/old", f"{ROOT.lstrip('/')}/{LONG_DIR}"} <= seen_dirs


def test_the_digests_are_the_files_and_the_uncompressed_streams(written):
    blob, digests = written
    raw = blob.path.read_bytes()
    assert blob.digest == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert blob.size == len(raw) == blob.path.stat().st_size
    assert blob.diff_id == "sha256:" + hashlib.sha256(gzip.decompress(raw)).hexdigest()
    assert blob.descriptor() == {"mediaType": GZIP_LAYER, "digest": blob.digest, "size": len(raw)}
    for name, (data, _, _) in CONTENT.items():
        assert digests[name] == FileDigest.of(data), name
        assert digests[name].sha256 == record_hash(hashlib.sha256(data).digest())
    assert digests["generated"] == FileDigest.of(b"demo==1.0\n")
    assert FileDigest.of(b"").sha256 == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"  # pip's, for no bytes


def test_deflated_members_are_copied_as_their_own_gzip_members_and_the_rest_deflated_between(wheel, layer):
    members = gzip_members(layer.read_bytes())
    assert all(raw.startswith(GZIP_HEADER) for raw, _ in members)
    read = read_wheel(wheel)
    copied = [m for m in read.members if m.deflated and m.size]
    bodies = [raw[len(GZIP_HEADER):-8] for raw, _ in members]
    for member in copied:  # the zip's own deflated bytes, as they are, with the zip's CRC and size as the trailer
        stored = zip_stored_bytes(wheel, member.name)
        assert stored in bodies, member.name
        raw = members[bodies.index(stored)][0]
        assert raw[-8:] == struct.pack("<II", member.crc, member.size)
    # one member of headers before each copied one, the copied one, then the 4 MiB flush inside the big stored file
    # and the rest: the tar's end
    assert len(members) == 2 * len(copied) + 2
    stored = {zip_stored_bytes(wheel, m.name) for m in copied}
    fresh = [out for (raw, out), body in zip(members, bodies) if body not in stored]
    assert max(map(len, fresh)) >= 4 * MIB  # the big stored file's bytes, flushed once 4 MiB were gathered
    assert b"".join(out for _, out in members) == gzip.decompress(layer.read_bytes())


def test_gnu_gzip_and_tar_read_the_layer(layer, tmp_path):
    blob = layer
    subprocess.run(["gzip", "-t", str(blob)], check=True, capture_output=True)
    listed = subprocess.run(["tar", "-tzf", str(blob)], check=True, capture_output=True, text=True).stdout
    assert listed.splitlines() == [info.name + ("/" if info.isdir() else "") for info, _ in tar_entries(blob)]
    subprocess.run(["tar", "-xzf", str(blob), "-C", str(tmp_path), "--no-same-owner"], check=True,
                   capture_output=True)
    for name, (data, _, mode) in CONTENT.items():
        path = tmp_path / ROOT.lstrip("/") / name
        assert path.read_bytes() == data, name
        assert bool(path.stat().st_mode & 0o111) == bool(mode & 0o111), name
    assert (tmp_path / "usr/lib/old/.wh.gone.py").read_bytes() == b""


def test_two_writes_of_the_same_entries_give_the_same_bytes(wheel, written, tmp_path):
    copy = shutil.copy(wheel, tmp_path / wheel.name)  # another file, another folder: the same layer
    again, _ = write_layer(Path(copy), tmp_path / "other-name.tar.gz")
    assert again.path.read_bytes() == written[0].path.read_bytes()
    assert (again.digest, again.size, again.diff_id) == (written[0].digest, written[0].size, written[0].diff_id)


# ---------------------------------------------------------------------------------------------- small entries


def test_add_dir_writes_parents_first_each_once_and_paths_are_normalised(tmp_path):
    with LayerWriter(tmp_path / "l.tar.gz") as out:
        out.add_dir("/a/b/c")
        out.add_dir("/a/b")
        out.add_dir("a//b/./c/")
        out.add_dir("/")
        digest = out.add_bytes("/a/./b/c/f.txt", b"x")
        assert out.has("/a/b/c/f.txt") and out.has("a/b/c/f.txt") and not out.has("/a/b/c")
    entries = tar_entries(tmp_path / "l.tar.gz")
    assert [(i.name, i.type) for i, _ in entries] == [("a", tarfile.DIRTYPE), ("a/b", tarfile.DIRTYPE),
                                                     ("a/b/c", tarfile.DIRTYPE), ("a/b/c/f.txt", tarfile.REGTYPE)]
    assert digest == FileDigest.of(b"x")


def test_add_whiteout_writes_dot_wh_name_in_its_folder(tmp_path):
    with LayerWriter(tmp_path / "l.tar.gz") as out:
        out.add_whiteout("/opt/venv/lib/old-1.0.dist-info")
        out.add_whiteout("/opt/venv/bin/tool")
    entries = [(i.name, i.type, i.size, i.mode) for i, _ in tar_entries(tmp_path / "l.tar.gz")]
    assert entries == [("opt", tarfile.DIRTYPE, 0, DIR_MODE), ("opt/venv", tarfile.DIRTYPE, 0, DIR_MODE),
                       ("opt/venv/lib", tarfile.DIRTYPE, 0, DIR_MODE),
                       ("opt/venv/lib/.wh.old-1.0.dist-info", tarfile.REGTYPE, 0, FILE_MODE),
                       ("opt/venv/bin", tarfile.DIRTYPE, 0, DIR_MODE),
                       ("opt/venv/bin/.wh.tool", tarfile.REGTYPE, 0, FILE_MODE)]


def test_an_empty_layer_is_the_two_zero_blocks(tmp_path):
    with LayerWriter(tmp_path / "empty.tar.gz") as out:
        pass
    result = out.close()
    assert gzip.decompress(result.path.read_bytes()) == b"\0" * 1024
    assert result.diff_id == "sha256:" + hashlib.sha256(b"\0" * 1024).hexdigest()
    assert out.close() is result  # a second close hands the same blob back


@pytest.mark.parametrize("path", ["/opt/../etc/passwd", "../x", "/a/b/../../..", "/a/\0b", "/a\0/b"])
def test_a_path_that_climbs_out_or_holds_a_nul_is_refused(tmp_path, wheel, path):
    member = read_wheel(wheel).member("demo/core.py")
    for write in (lambda out: out.add_bytes(path, b"x"), lambda out: out.add_dir(path),
                  lambda out: out.add_member(path, wheel, member), lambda out: out.add_whiteout(path)):
        dest = tmp_path / "refused.tar.gz"
        with pytest.raises(BuildError, match="climbs out|NUL"):
            with LayerWriter(dest) as out:
                write(out)
        assert not dest.exists()


def test_a_path_without_a_file_name_is_refused(tmp_path):
    with pytest.raises(BuildError, match="no file name"):
        with LayerWriter(tmp_path / "l.tar.gz") as out:
            out.add_bytes("/", b"x")
    assert not (tmp_path / "l.tar.gz").exists()


# ---------------------------------------------------------------------------------------------- corrupted members


def corrupt(wheel: Path, name: str, dest: Path, at: int = 0) -> Path:
    """A copy of ``wheel`` at ``dest`` with one byte of member ``name``'s stored data flipped (its CRC now wrong)."""
    member = read_wheel(wheel).member(name)
    data = bytearray(wheel.read_bytes())
    data[member.offset + at] ^= 0xFF
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.parametrize("name,at", [
    ("demo/stored.bin", 100),  # stored: inflated_chunks checks the CRC at the end
    ("demo/level0.txt", 40),  # deflated in stored blocks: the stream still inflates, to other bytes
    ("demo/big.bin", 3 * MIB),  # deflated, in the middle of a big member
])
def test_a_member_whose_crc_does_not_match_raises_and_leaves_no_layer_file(tmp_path, name, at):
    content = {**CONTENT, "demo/level0.txt": (b"level zero " * 20, zipfile.ZIP_DEFLATED, 0o644)}
    good = tmp_path / "good" / "demo-1.0-py3-none-any.whl"
    good.parent.mkdir()
    with zipfile.ZipFile(good, "w") as archive:
        for member, (data, compress, mode) in content.items():
            archive.writestr(_info(member, compress, mode), data, compresslevel=0 if "level0" in member else None)
    bad = corrupt(good, name, tmp_path / "demo-1.0-py3-none-any.whl", at)
    member = read_wheel(bad).member(name)
    dest = tmp_path / "layer.tar.gz"
    with pytest.raises(BuildError, match=name.replace(".", r"\.")) as caught:
        with LayerWriter(dest) as out:
            out.add_bytes("/before.txt", b"written before")
            out.add_member(f"/x/{name}", bad, member)
    assert not dest.exists()
    if "level0" in name or "stored" in name:
        assert f"the zip says {member.size} bytes with CRC {member.crc:08x}" in str(caught.value)
    with pytest.raises(BuildError):
        member_bytes(bad, member)


def _raw_zip(entries: list[tuple[str, bytes, bytes]]) -> bytes:
    """A zip whose members are deflated and each followed, inside its stored bytes, by ``tail`` (zipfile and pip
    read such a member: inflating ends at the end of the deflate stream)."""
    out, central = bytearray(), bytearray()
    for name, data, tail in entries:
        deflater = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        body = deflater.compress(data) + deflater.flush() + tail
        crc, encoded, offset = zlib.crc32(data), name.encode(), len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(body), len(data), len(encoded), 0)
        out += encoded + body
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(body), len(data),
                               len(encoded), 0, 0, 0, 0, 0o100644 << 16, offset) + encoded
    start = len(out)
    out += central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(central), start, 0)
    return bytes(out)


def test_a_deflated_member_with_bytes_after_its_stream_gives_no_corrupt_layer(tmp_path):
    """A member whose stored bytes go on after the end of its deflate stream: zipfile (and so pip) reads it, its CRC
    matches; copying all its stored bytes into a gzip member would put them where gzip reads the trailer.  The
    writer must refuse it (BuildError) or write a layer that reads back; it must not write a broken one."""
    content = b"hello world " * 50
    wheel = tmp_path / "junk-1.0-py3-none-any.whl"
    wheel.write_bytes(_raw_zip([("junk/a.txt", content, b"JUNKJUNKJUNK"),
                                ("junk-1.0.dist-info/METADATA", b"Name: junk\n", b""),
                                ("junk-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n", b"")]))
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("junk/a.txt") == content  # a zip reader takes it
    member = read_wheel(wheel).member("junk/a.txt")
    assert member_bytes(wheel, member) == content
    dest = tmp_path / "layer.tar.gz"
    try:
        with LayerWriter(dest) as out:
            out.add_member("/x/a.txt", wheel, member)
    except BuildError:
        assert not dest.exists()
        return
    try:
        data = gzip.decompress(dest.read_bytes())
    except (OSError, EOFError) as exc:
        pytest.fail(f"LayerWriter wrote {dest.name} without an error, but gzip cannot read it: {exc}")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        assert tar.extractfile("x/a.txt").read() == content
    subprocess.run(["gzip", "-t", str(dest)], check=True, capture_output=True)


def test_a_member_cut_short_is_refused(tmp_path, wheel):
    member = read_wheel(wheel).member("demo/core.py")
    short = Member(member.name, wheel.stat().st_size - 3, 100, member.size, member.crc, member.deflated, False)
    with pytest.raises(BuildError, match="cut short|inflate"):
        with LayerWriter(tmp_path / "l.tar.gz") as out:
            out.add_member("/x/core.py", wheel, short)
    assert not (tmp_path / "l.tar.gz").exists()


# ---------------------------------------------------------------------------------------------- stopping


class _StopAtCheck(Stop):
    """A stop that is set at its ``at``-th check: a build stopped while the writer is inside a member."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.checks = at, 0

    def check(self) -> None:
        self.checks += 1
        if self.checks == self.at:
            self.set(BuildError("the system image's build failed"))
        super().check()


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_a_stop_ends_the_writer_inside_a_member_and_leaves_no_layer_file(tmp_path, wheel, compression):
    big = read_wheel(wheel).member("demo/big.bin")  # 5 MiB, copied in pieces
    dest = tmp_path / "layer.tar"
    stop = _StopAtCheck(at=3)
    with pytest.raises(Stopped, match="stopped: the system image's build failed"):
        with LayerWriter(dest, compression, stop=stop) as out:
            out.add_bytes("/before.txt", b"written before")
            out.add_member(f"{ROOT}/demo/big.bin", wheel, big)
    assert stop.checks == 3 and not dest.exists()


def test_a_writer_without_a_stop_set_writes_as_before(tmp_path, wheel, written):
    blob = write_layer(wheel, tmp_path / "layer.tar.gz")[0]
    with LayerWriter(tmp_path / "again.tar.gz", stop=Stop()) as out:
        read = read_wheel(wheel)
        for member in read.members:
            out.add_member(f"{ROOT}/{member.name}", wheel, member, EXEC_MODE if member.executable else FILE_MODE)
        out.add_bytes("/opt/imagectl/lock.txt", b"demo==1.0\n")
        out.add_whiteout("/usr/lib/old/gone.py")
    assert out.close().digest == blob.digest == written[0].digest
