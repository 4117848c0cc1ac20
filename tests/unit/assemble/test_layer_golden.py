"""The layer writer's bytes are fixed by its entries alone: a layer written from a wheel made of fixed bytes (its
deflate streams written here as hex, never by the host's zlib) has one digest, and the same digest when the ``zlib``
module the writer and the wheel reader use is zlib-ng's (Fedora 40+ and others ship zlib-ng in zlib's place, and it
deflates otherwise).  A change of the golden digest is a change of the layer byte format: bump
``imagectl.assemble.layer.LAYER_WRITER`` with it.  The same entries written as a zstd layer (``[registry] compression =
"zstd"``) have a golden digest of their own, for the pinned libzstd that :func:`writer_name` names."""

from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from pathlib import Path

import pytest

from imagectl.assemble import layer as layer_module
from imagectl.assemble import wheel as wheel_module
from imagectl.assemble.deflate import deflate
from imagectl.assemble.layer import (EXEC_MODE, FILE_MODE, LAYER_WRITER, Compression, LayerBlob, LayerWriter,
                                     writer_name)
from imagectl.assemble.wheel import read_wheel

zlib_ng = pytest.importorskip("zlib_ng.zlib_ng", reason="pip install zlib-ng (the test extras)")

# Deflate streams made once by zlib 1.2.13 at level 9, fixed here: a dynamic-Huffman block and a fixed-Huffman one
DYNAMIC = bytes.fromhex(
    "ed90c14ec3301044eff98a914f0912915238400e91f8076e6d0f4ebd6e8c9cb5b037a450f5df715310882fe0d03d583bd2f88d3d4aa9278c"
    "c14c9e102c6420ec8337c4980722dfc2498221ebb5109244d223669d306a932ff08ed0bfe3c3bb1e4dbdaa9b3b6881a737f2788466039760"
    "dd810c068a542ba58aa2c838c489cb5d985872024b85db0ede255967b16d0be4c9dee7fc1aeb62122c56a4d749474a0be66c89245364ac19"
    "3760d810f3e91851f39e2ef46afb9527baf754c630a79fc0fc9df637476d58d52fc17169d591dbeefe84e3826ebb87eff5229bd549fdcd3b"
    "b3abaa50d742af85feeb423f01")
FIXED_HUFFMAN = bytes.fromhex("4b494d53c84dccccd3d0b4e2520082a2d492d2a23c0513232e00")
ROOT = "/opt/venv/lib/python3.11/site-packages"
LONG = "golden/" + "d" * 60 + "/" + "f" * 70 + ".txt"  # over 100 characters: a pax header
GOLDEN = {
    "digest": "sha256:074bcca717d06ea046d369c03a7d9f83d27ea48422cb4618fdcdb0fa32dbd17f",
    "size": 5354778,
    "diff_id": "sha256:bd60b09cf752d2f30e50f28fa8ef7d50a7a88ea8a1821c1bf68343225a3773b7",
}
GOLDEN_ZSTD_WRITER = "imagectl-layer/2+zstd-1.5.7-l3"  # the zstandard package pinned in pyproject.toml bundles it
GOLDEN_ZSTD = {
    "digest": "sha256:6850ad04cfaddcd7e3b735be97775d37eb5357cafb7aea90605a8126a5d488e0",
    "size": 5155859,
    "diff_id": GOLDEN["diff_id"],  # the same tar
}


def noise(size: int, seed: bytes) -> bytes:
    """``size`` bytes no deflate shrinks, the same on every Python (SHAKE-256 is defined by its standard)."""
    return hashlib.shake_256(seed).digest(size)


def inflate(stream: bytes) -> bytes:
    return zlib.decompress(stream, -zlib.MAX_WBITS)


# name: (content, its deflate stream or None for a stored member, mode)
MEMBERS: dict[str, tuple[bytes, bytes | None, int]] = {
    "golden/__init__.py": (inflate(DYNAMIC), DYNAMIC, 0o644),
    "golden/main.py": (inflate(FIXED_HUFFMAN), FIXED_HUFFMAN, 0o644),
    "golden/table.bin": (b"\0" * 5000 + b"table" * 300, deflate(b"\0" * 5000 + b"table" * 300), 0o644),
    "golden/stored.bin": (noise(70000, b"stored"), None, 0o644),
    "golden/empty.txt": (b"", None, 0o644),
    "golden/bin/tool.sh": (b"#!/bin/sh\necho tool\n", deflate(b"#!/bin/sh\necho tool\n"), 0o755),
    LONG: (b"a long path\n", deflate(b"a long path\n"), 0o644),
    "golden-1.0.dist-info/METADATA": (b"Metadata-Version: 2.1\nName: golden\nVersion: 1.0\n", None, 0o644),
    "golden-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                                   deflate(b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"), 0o644),
}


def fixed_zip(members: dict[str, tuple[bytes, bytes | None, int]]) -> bytes:
    """A zip of ``members`` written byte by byte (no compressor runs: each deflated member's stream is given)."""
    out, central = bytearray(), bytearray()
    for name, (data, stream, mode) in members.items():
        method, body = (8, stream) if stream is not None else (0, data)
        crc, encoded, offset = zlib.crc32(data), name.encode(), len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(body), len(data),
                           len(encoded), 0) + encoded + body
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x314, 20, 0, method, 0, 0x21, crc, len(body),
                               len(data), len(encoded), 0, 0, 0, 0, (0o100000 | mode) << 16, offset) + encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0)
    return bytes(out + central + end)


def write_golden_layer(folder: Path, compression: Compression = "gzip") -> LayerBlob:
    """The golden layer: every member of the fixed wheel, generated files (one over the writer's 4 MiB flush, with
    runs of NULs as a ``.pyc`` has), a directory and a whiteout."""
    wheel = folder / "golden-1.0-py3-none-any.whl"
    wheel.write_bytes(fixed_zip(MEMBERS))
    with LayerWriter(folder / f"layer-{compression}", compression) as out:
        for member in read_wheel(wheel).members:
            out.add_member(f"{ROOT}/{member.name}", wheel, member, EXEC_MODE if member.executable else FILE_MODE)
        out.add_bytes(f"{ROOT}/golden-1.0.dist-info/RECORD", b"golden/__init__.py,sha256=x,1011\n")
        pyc = b"".join(noise(200, n.to_bytes(2, "big")) + b"\0" * (n % 97) for n in range(25000))  # about 6 MiB
        out.add_bytes(f"{ROOT}/golden/__pycache__/big.cpython-311.pyc", pyc)
        out.add_dir("/opt/venv/share/golden")
        out.add_whiteout("/opt/venv/lib/python3.11/site-packages/old-0.9.dist-info")
    return out.close()


def blob_facts(blob: LayerBlob) -> dict[str, object]:
    return {"digest": blob.digest, "size": blob.size, "diff_id": blob.diff_id}


def test_the_fixed_wheel_is_what_it_says(tmp_path):
    """The fixture itself: the zip reads back (zipfile, read_wheel) and its deflated members are the fixed streams."""
    import zipfile

    path = tmp_path / "golden-1.0-py3-none-any.whl"
    path.write_bytes(fixed_zip(MEMBERS))
    with zipfile.ZipFile(path) as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == {n: m[0] for n, m in MEMBERS.items()}
    read = read_wheel(path)
    assert [(m.name, m.deflated, m.executable) for m in read.members] == [
        (n, stream is not None, bool(mode & 0o100)) for n, (_, stream, mode) in MEMBERS.items()]
    assert DYNAMIC[0] & 0b111 == 0b101 and FIXED_HUFFMAN[0] & 0b111 == 0b011  # final; dynamic, fixed Huffman


def test_the_golden_layer_has_its_digest(tmp_path):
    blob = write_golden_layer(tmp_path)
    data = blob.path.read_bytes()
    assert hashlib.sha256(gzip.decompress(data)).hexdigest() == blob.diff_id.partition(":")[2]  # it reads back
    assert blob_facts(blob) == GOLDEN, f"the layer bytes changed: bump LAYER_WRITER ({LAYER_WRITER}) and GOLDEN"


def test_the_golden_layer_is_the_same_when_zlib_is_zlib_ng(tmp_path, monkeypatch):
    (tmp_path / "zlib").mkdir()
    sample = write_golden_layer(tmp_path / "zlib")
    tar = gzip.decompress(sample.path.read_bytes())
    assert zlib_ng.compress(tar, 6) != zlib.compress(tar, 6), "zlib-ng must deflate otherwise for this to prove aught"
    monkeypatch.setattr(layer_module, "zlib", zlib_ng)
    monkeypatch.setattr(wheel_module, "zlib", zlib_ng)
    (tmp_path / "ng").mkdir()
    again = write_golden_layer(tmp_path / "ng")
    assert blob_facts(again) == blob_facts(sample) == GOLDEN
    assert again.path.read_bytes() == sample.path.read_bytes()


def test_the_golden_zstd_layer_has_its_digest(tmp_path, monkeypatch):
    """The zstd layer of the same entries: one digest, the gzip layer's tar, and the same bytes with zlib-ng (the
    wheel's members are inflated to be compressed again: inflating has one answer)."""
    import zstandard

    assert writer_name("zstd") == GOLDEN_ZSTD_WRITER, "another libzstd: its bytes differ; update GOLDEN_ZSTD with it"
    (tmp_path / "zlib").mkdir()
    blob = write_golden_layer(tmp_path / "zlib", "zstd")
    tar = zstandard.ZstdDecompressor().stream_reader(blob.path.read_bytes()).read()
    assert hashlib.sha256(tar).hexdigest() == blob.diff_id.partition(":")[2]
    assert blob_facts(blob) == GOLDEN_ZSTD, "the zstd layer bytes changed: update GOLDEN_ZSTD (and writer_name)"
    monkeypatch.setattr(layer_module, "zlib", zlib_ng)
    monkeypatch.setattr(wheel_module, "zlib", zlib_ng)
    (tmp_path / "ng").mkdir()
    assert write_golden_layer(tmp_path / "ng", "zstd").path.read_bytes() == blob.path.read_bytes()
