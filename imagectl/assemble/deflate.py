"""A raw deflate stream (RFC 1951) written in a few lines of Python, so that its bytes depend on nothing but the
input: not on which zlib the Python links (zlib, zlib-ng and vendors' forks each choose other matches and blocks).

:func:`deflate` writes two kinds of block:

- a run of at least :data:`NUL_RUN` zero bytes (a tar header's empty fields, a file's padding, the tar's end) is a
  fixed-Huffman block (BTYPE 01): one literal NUL, then copies of it at distance 1, 258 bytes in 13 bits;
- everything else is stored blocks (BTYPE 00): a 3-bit header padded to the byte, LEN and its complement NLEN, and
  up to 65535 bytes as they are.

The last block is final and the stream ends on a byte boundary, ready for a gzip trailer.  Pure: the same bytes in
give the same bytes out, on any machine and any Python.
"""

from __future__ import annotations

import re
import struct

NUL_RUN = 32  # a shorter run of zero bytes costs less as stored bytes than as a block of its own
_STORED_MAX = 0xFFFF  # the most bytes one stored block holds
_NONZERO = re.compile(rb"[^\x00]")
# Fixed Huffman codes (RFC 1951 3.2.6), each as its bits in stream order (a code's most significant bit first)
_LITERAL_NUL = "00110000"
_END_OF_BLOCK = "0000000"
_DISTANCE_1 = "00000"
_LENGTH_BASE = (3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163,
                195, 227, 258)
_LENGTH_EXTRA = (0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0)


def deflate(data: bytes | bytearray) -> bytes:
    """``data`` as one raw deflate stream (see the module docstring); no data is one empty final stored block."""
    out, bits = bytearray(), []
    view, pos, nuls = memoryview(data), 0, b"\0" * NUL_RUN
    while (start := data.find(nuls, pos)) >= 0:
        found = _NONZERO.search(data, start)
        end = found.start() if found else len(data)
        if start > pos:
            _stored(view[pos:start], out, bits, final=False)
        bits.append(_nul_block(end - start, final=end == len(data)))
        pos = end
    if pos < len(data) or not data:
        _stored(view[pos:], out, bits, final=True)
    _align(out, bits)
    return bytes(out)


def _stored(data: memoryview, out: bytearray, bits: list[str], *, final: bool) -> None:
    """Stored blocks of ``data`` (the last final where ``final``) after the pending ``bits``."""
    for start in range(0, max(len(data), 1), _STORED_MAX):
        chunk = data[start:start + _STORED_MAX]
        bits.append(("1" if final and start + _STORED_MAX >= len(data) else "0") + "00")
        _align(out, bits)
        out += struct.pack("<HH", len(chunk), len(chunk) ^ 0xFFFF)
        out += chunk


def _nul_block(count: int, *, final: bool) -> str:
    """A fixed-Huffman block of ``count`` (at least 3) zero bytes, as bits in stream order."""
    whole, rest = divmod(count - 1, 258)
    tail = _LITERAL_NUL * rest if rest < 3 else _length(rest) + _DISTANCE_1
    return (("1" if final else "0") + "10" + _LITERAL_NUL + (_length(258) + _DISTANCE_1) * whole + tail
            + _END_OF_BLOCK)


def _length(length: int) -> str:
    """The fixed code of a copy of ``length`` bytes (3 to 258) and its extra bits, in stream order."""
    index = max(i for i, base in enumerate(_LENGTH_BASE) if base <= length)
    symbol, extra = 257 + index, _LENGTH_EXTRA[index]
    code = format(symbol - 256, "07b") if symbol < 280 else format(symbol - 280 + 0b11000000, "08b")
    return code + (format(length - _LENGTH_BASE[index], f"0{extra}b")[::-1] if extra else "")


def _align(out: bytearray, bits: list[str]) -> None:
    """Append the pending ``bits`` (stream order: each byte is filled from its least significant bit) to ``out``,
    zero-padded to a whole byte, and clear them."""
    text = "".join(bits)
    bits.clear()
    if text:
        text += "0" * (-len(text) % 8)
        out += int(text[::-1], 2).to_bytes(len(text) // 8, "little")
