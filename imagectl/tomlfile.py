"""Reading TOML files into plain data with errors that name the file and line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .errors import InputError

def _tomllib():  # type: ignore[no-untyped-def]
    """tomllib (tomli before 3.11), imported on first use: most commands read no TOML when cached."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    return tomllib


def load_toml(path: Path, error: type[InputError] = InputError) -> dict[str, Any]:
    """Parse ``path``; raises ``error`` as ``FILE:LINE: message`` for unreadable or malformed TOML."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    toml = _tomllib()
    try:
        return toml.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text") from None
    except toml.TOMLDecodeError as exc:
        raise error(f"{path}:{_line_of(exc)}: invalid TOML: {_reason(exc)}") from None


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


def line_of(path: Path, needle: str) -> int:
    """The first line of ``path`` that contains ``needle`` (1 when absent): locates schema errors."""
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if needle in line:
                return number
    except OSError:
        pass
    return 1
