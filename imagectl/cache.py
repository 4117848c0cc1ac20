"""A small on-disk cache of results that are pure functions of files: the loaded matrix, validate's report.

The key is a sha256 over imagectl's version, the (path, size, mtime) of imagectl's own modules and of every
input file, and any extra text the caller adds (such as configured directories).  Any change of any input
gives a new key; a cache entry that cannot be read is simply recomputed.  ``IMAGECTL_NO_CACHE=1`` turns the
cache off; it lives in ``$XDG_CACHE_HOME/imagectl`` (``~/.cache/imagectl``).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from . import __version__

T = TypeVar("T")
_PACKAGE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Where cached results live."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "imagectl"


def _stat_line(path: Path) -> str:
    try:
        st = path.stat()
        return f"{path}|{st.st_size}|{st.st_mtime_ns}\n"
    except OSError:
        return f"{path}|missing\n"


def _code_files(root: str = str(_PACKAGE)) -> list[str]:
    out = []
    for entry in os.scandir(root):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            out += _code_files(entry.path)
        elif entry.name.endswith(".py"):
            out.append(entry.path)
    return sorted(out)


def cache_key(kind: str, inputs: Iterable[Path], extra: str = "") -> str:
    """The key of a result computed from ``inputs`` (and imagectl's own code)."""
    h = hashlib.sha256(f"{kind}\0{__version__}\0{extra}\0".encode())
    for name in _code_files():
        h.update(_stat_line(Path(name)).encode())
    for path in sorted(inputs):
        h.update(_stat_line(path).encode())
    return h.hexdigest()


def cached(kind: str, inputs: Iterable[Path], compute: Callable[[], T], extra: str = "") -> T:
    """``compute()``, or its earlier result for the same inputs.  Errors of ``compute`` are not cached."""
    if os.environ.get("IMAGECTL_NO_CACHE"):
        return compute()
    path = cache_dir() / f"{kind}-{cache_key(kind, inputs, extra)}.pickle"
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)  # our own file, written below
    except Exception:  # a missing, partial or stale entry: recompute
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(path)
        _forget_old(path.parent, kind, keep=path)
    except OSError:
        pass
    return value


def _forget_old(directory: Path, kind: str, keep: Path) -> None:
    for old in directory.glob(f"{kind}-*.pickle"):
        if old != keep:
            old.unlink(missing_ok=True)
