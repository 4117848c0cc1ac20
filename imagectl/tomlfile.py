"""Reading TOML files into plain data with errors that name the file and line."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from . import paths
from .errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def read_bytes(path: Path, error: type[InputError] = InputError) -> bytes:
    """The bytes of the TOML file ``path``; raises ``error`` naming the file when it cannot be read (also for a
    directory)."""
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a TOML file") from None
    except OSError as exc:
        raise paths.cannot_read(path, exc, error) from None


def load_toml(path: Path, error: type[InputError] = InputError) -> dict[str, Any]:
    """Read and parse ``path`` (see :func:`parse_toml`)."""
    return parse_toml(read_bytes(path, error), path, error)


def parse_toml(data: bytes, path: Path, error: type[InputError] = InputError) -> dict[str, Any]:
    """Parse the bytes of the TOML file ``path``; raises ``error`` as ``FILE:LINE: message`` for malformed or too
    deeply nested TOML."""
    try:
        text = data.decode("utf-8")
        return tomllib.loads(text)
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}:{_line_of(exc)}: invalid TOML: {_reason(exc)}") from None
    except RecursionError:
        raise error(f"{path}:{deepest_line(text)}: invalid TOML: arrays or tables nested too deeply") from None


def _line_of(exc: Exception) -> int:
    line = getattr(exc, "lineno", None)
    if line:
        return int(line)
    text = str(exc)
    marker = "(at line "
    if marker in text:
        return int(text.split(marker, 1)[1].split(",", 1)[0])
    return 1


def _reason(exc: Exception) -> str:
    msg = getattr(exc, "msg", None) or str(exc)
    return str(msg).split(" (at line", 1)[0]


def deepest_line(text: str) -> int:
    """The line where the nesting of ``[``/``{`` (outside strings and comments) first reaches its deepest."""
    depth = deepest = 0
    where = 1
    for number, line in enumerate(text.splitlines(), start=1):
        for char in re.sub(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'|#.*', "", line):
            depth += (char in "[{") - (char in "]}")
            if depth > deepest:
                deepest, where = depth, number
    return where


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []


def line_of(path: Path, needle: str, start: int = 1) -> int:
    """The first line of ``path`` from line ``start`` on that contains ``needle`` (``start`` when absent):
    locates schema errors.  Never raises."""
    for number, line in enumerate(_lines(path)[start - 1 :], start=start):
        if needle in line:
            return number
    return start


def table_line(path: Path, header: str, before: int) -> int:
    """The last line at or above ``before`` that opens table ``header`` (``[[release]]``, ``[base]``), else
    ``before``: where the table holding line ``before`` starts.  Never raises."""
    lines = _lines(path)[:before]
    for number in range(len(lines), 0, -1):
        if lines[number - 1].strip().replace(" ", "").startswith(header):
            return number
    return before


def key_line(path: Path, key: str, start: int = 1) -> int:
    """The first line from ``start`` on that assigns ``key`` (``key =``, ``"key" =``, ``{ key =``) or opens a
    table named by it (``[release.key]``); ``start`` when none does.  Never raises."""
    name = re.escape(key)
    pattern = re.compile(rf"""(?:^|[\s{{,.\[])["']?{name}["']?\s*(?:=|\]|\.)""")
    for number, line in enumerate(_lines(path)[start - 1 :], start=start):
        if pattern.search(line.split("#", 1)[0]):
            return number
    return start
