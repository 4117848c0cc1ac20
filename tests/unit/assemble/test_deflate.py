"""imagectl.assemble.deflate: every stream inflates (Python's zlib, zlib-ng, GNU gzip) to its input, stored blocks
split at 65535 bytes, runs of NULs shrink to fixed-Huffman blocks, and the bytes are fixed by the input alone."""

from __future__ import annotations

import hashlib
import random
import struct
import subprocess
import zlib

import pytest

from imagectl.assemble.deflate import NUL_RUN, deflate

zlib_ng = pytest.importorskip("zlib_ng.zlib_ng", reason="pip install zlib-ng (the test extras)")



def noise(size: int, seed: bytes) -> bytes:
    """``size`` bytes no deflate can shrink, the same on every Python (SHAKE-256 is defined by its standard)."""
    return hashlib.shake_256(seed).digest(size)


FIXED = {  # the golden's inputs: the same bytes on every Python
    "empty": b"",
    "one byte": b"x",
    "one NUL": b"\0",
    "NULs one short of a run": b"\0" * (NUL_RUN - 1),
    "a run of NULs": b"\0" * NUL_RUN,
    "a run after text": b"name" + b"\0" * 300,
    "a run before text": b"\0" * 300 + b"name",
    "a run of 258 + 1 + 1": b"a" + b"\0" * 260 + b"b",
    "a run of 258 + 1 + 2": b"a" + b"\0" * 261 + b"b",
    "a run of 258 + 1 + 3": b"a" + b"\0" * 262 + b"b",
    "a long run": b"\0" * (3 * 1024 * 1024 + 5),
    "one stored block": noise(0xFFFF, b"one"),
    "two stored blocks": noise(0x10000, b"two"),
    "stored, run, stored": noise(70000, b"before") + b"\0" * 70000 + noise(3, b"after"),
    "a tar header": b"f" * 40 + b"\0" * 60 + b"0000644\0" * 3 + b"\0" * 100 + b"ustar\x0000" + b"\0" * 240,
}
RANDOM = random.Random(7)
CASES = dict(FIXED)
for _n in range(200):  # NULs, random bytes and text in random runs
    CASES[f"mixed {_n}"] = b"".join(RANDOM.choice([b"\0" * RANDOM.randrange(1, 700), RANDOM.randbytes(RANDOM.randrange(
        1, 300)), b"abc" * RANDOM.randrange(1, 3000)]) for _ in range(RANDOM.randrange(1, 10)))


def inflate(stream: bytes, module=zlib) -> bytes:
    inflater = module.decompressobj(-module.MAX_WBITS)
    out = inflater.decompress(stream) + inflater.flush()
    assert inflater.eof, "the stream has no final block"
    assert not inflater.unused_data, "bytes after the final block"
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_every_stream_inflates_to_its_input_with_zlib_and_zlib_ng(name):
    data = CASES[name]
    stream = deflate(data)
    assert inflate(stream) == data
    assert inflate(stream, zlib_ng) == data
    assert deflate(bytearray(data)) == stream  # the writer's pending bytearray gives the same stream


def test_gnu_gzip_reads_a_member_of_it(tmp_path):
    data = b"".join(CASES.values())
    member = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + deflate(data)
              + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF))
    (tmp_path / "x.gz").write_bytes(member)
    subprocess.run(["gzip", "-t", str(tmp_path / "x.gz")], check=True, capture_output=True)
    out = subprocess.run(["gzip", "-dc", str(tmp_path / "x.gz")], check=True, capture_output=True).stdout
    assert out == data


def blocks(stream: bytes) -> list[tuple[int, int]]:
    """(BFINAL, BTYPE) of each block of a stream of stored blocks and :func:`deflate`'s NUL blocks, in order: it
    walks stored blocks by their LEN and NUL blocks by their codes, and checks that the stream ends with the last."""
    found, pos, bit = [], 0, 0
    while True:
        header = ((stream[pos] | (stream[pos + 1] << 8 if pos + 1 < len(stream) else 0)) >> bit) & 0b111
        final, kind = header & 1, header >> 1
        found.append((final, kind))
        if kind == 0:
            pos += 1 if bit <= 5 else 2  # the header's byte(s), padded
            (size, check) = struct.unpack_from("<HH", stream, pos)
            assert check == size ^ 0xFFFF
            pos, bit = pos + 4 + size, 0
        else:
            assert kind == 1, "only stored and fixed-Huffman blocks"
            pos, bit = divmod(pos * 8 + bit + _nul_block_bits(stream, pos, bit), 8)
        if final:
            assert pos + (bit > 0) == len(stream), "bytes after the final block"
            return found


def _nul_block_bits(stream: bytes, pos: int, bit: int) -> int:
    """The length in bits of the fixed-Huffman NUL block at (``pos``, ``bit``): header, one literal, then 13-bit
    copies of 258 and one last copy or NULs until the end-of-block code (seven zero bits)."""
    bits = "".join(format(b, "08b")[::-1] for b in stream[pos:pos + 4096])[bit:]
    assert bits[3:11] == "00110000", "a NUL block starts with a literal NUL"
    at = 11
    while not bits.startswith("0000000", at):
        code7 = int(bits[at:at + 7], 2)
        if bits.startswith("00110000", at):
            at += 8
        elif code7 < 0b0011000:  # lengths 257-279: 7 bits, extra bits, then a 5-bit distance
            symbol = 256 + code7
            extra = max(0, (symbol - 261) // 4) if symbol < 285 else 0
            at += 7 + extra + 5
        else:  # 280-287: 8 bits
            symbol = 280 + int(bits[at:at + 8], 2) - 0b11000000
            extra = 0 if symbol == 285 else (symbol - 261) // 4
            at += 8 + extra + 5
    return at + 7


def test_stored_blocks_hold_at_most_65535_bytes_and_the_last_is_final():
    assert blocks(deflate(b"")) == [(1, 0)]
    assert deflate(b"") == b"\x01\x00\x00\xff\xff"
    assert blocks(deflate(CASES["one stored block"])) == [(1, 0)]
    assert blocks(deflate(CASES["two stored blocks"])) == [(0, 0), (1, 0)]
    assert deflate(b"ab") == b"\x01\x02\x00\xfd\xffab"


def test_a_run_of_nuls_is_one_fixed_huffman_block_of_13_bits_per_258_bytes():
    assert blocks(deflate(CASES["NULs one short of a run"])) == [(1, 0)]
    assert blocks(deflate(CASES["a run after text"])) == [(0, 0), (1, 1)]
    assert blocks(deflate(CASES["stored, run, stored"])) == [(0, 0), (0, 0), (0, 1), (1, 0)]
    long_run = len(CASES["a long run"])
    assert len(deflate(CASES["a long run"])) <= (long_run // 258 + 1) * 13 // 8 + 4
    # a tar header (512 bytes, mostly NULs) costs a quarter of its size or less
    header = b"f" * 40 + b"\0" * 60 + b"0000644\0" * 3 + b"\0" * 100 + b"ustar\x0000" + b"\0" * 240
    assert len(deflate(header)) < 128


def test_the_bytes_are_fixed_by_the_input_alone():
    """The streams of the fixed cases, hashed together: a change here is a change of the layer byte format (bump
    imagectl.assemble.layer.LAYER_WRITER, and the golden layer digest of test_layer_golden.py changes with it)."""
    digest = hashlib.sha256(b"".join(deflate(data) for data in FIXED.values())).hexdigest()
    assert digest == "2c6969bb67d00d93d2f268540b1d858b264d9b7874419e40f28a57cf92cd3904"
