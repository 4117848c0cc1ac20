"""A small on-disk cache of results that are pure functions of files: the loaded matrix, validate's report, show's
description of a profile, parsed locks, build-time locks, rendered build contexts.

The key is a SHA-512 (its first 256 bits) over imagectl's version, the (path, size, mtime) of imagectl's own
modules and of every input file, and any extra text the caller adds (such as configured directories).  Any
change of any input gives a new key; a cache entry that cannot be read is simply recomputed.
``IMAGECTL_NO_CACHE=1`` turns the cache off; it lives in ``$XDG_CACHE_HOME/imagectl`` (``~/.cache/imagectl``).

Each kind keeps at most ``KEEP_PER_KIND`` entries (``build --all`` caches one rendered context per profile), the
least recently used going first: a hit touches its entry's mtime.  Several processes and threads may share the
directory: an entry is written to a unique temporary file and renamed into place, and eviction tolerates entries
that another process removed or replaced meanwhile.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from . import __version__

try:  # the C module that ``random`` (which tempfile loads) has loaded already; hashlib would add OpenSSL's start-up
    from _sha512 import sha512  # Python 3.10, 3.11
except ImportError:  # pragma: no cover - the module's name since 3.12
    try:
        from _sha2 import sha512
    except ImportError:
        from hashlib import sha512

T = TypeVar("T")
_PACKAGE = Path(__file__).resolve().parent
KEEP_PER_KIND = 64  # entries of one kind that survive eviction
_STALE_TMP_SECONDS = 3600  # a temporary file this old was left by a writer that died


def cache_dir() -> Path:
    """Where cached results live."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "imagectl"


def _stat_line(path: str) -> str:
    try:
        st = os.stat(path)
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


@lru_cache(maxsize=1)
def _code_lines() -> str:
    """The stat lines of imagectl's own modules, once per process (the code a process runs is the code it
    loaded)."""
    return "".join(_stat_line(name) for name in _code_files())


def cache_key(kind: str, inputs: Iterable[Path], extra: str = "") -> str:
    """The key of a result computed from ``inputs`` (and imagectl's own code): 64 hex digits."""
    text = "".join([f"{kind}\0{__version__}\0{extra}\0", _code_lines(), *map(_stat_line, sorted(map(str, inputs)))])
    return sha512(text.encode()).hexdigest()[:64]


def cached(kind: str, inputs: Iterable[Path], compute: Callable[[], T], extra: str = "",
           keep: int = KEEP_PER_KIND) -> T:
    """``compute()``, or its earlier result for the same inputs; at most ``keep`` entries of ``kind`` stay.

    Raises whatever ``compute`` raises (errors are not cached); a cache that cannot be read or written is
    bypassed, never an error."""
    if os.environ.get("IMAGECTL_NO_CACHE"):
        return compute()
    path = cache_dir() / f"{kind}-{cache_key(kind, inputs, extra)}.pickle"
    found, value = _load(path)
    if found:
        _touch(path)
        return value
    value = compute()
    if _store(path, value):
        _evict(path.parent, kind, keep=keep, current=path)
    return value


def _load(path: Path) -> tuple[bool, Any]:
    """``(True, value)`` of the entry at ``path``, or ``(False, None)`` when it is missing or unreadable."""
    try:
        with path.open("rb") as handle:
            return True, pickle.load(handle)  # our own file, written by _store
    except Exception:  # a missing, partial or stale entry: the caller recomputes
        return False, None


def _store(path: Path, value: object) -> bool:
    """Write ``value`` to ``path`` through a temporary file of its own (atomic for readers); whether it worked.
    Never raises: an unwritable cache or an unpicklable value just goes uncached."""
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f"{path.stem}.", suffix=".tmp", delete=False)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return False
    try:
        with handle:
            handle.write(data)
        Path(handle.name).replace(path)
        return True
    except OSError:
        Path(handle.name).unlink(missing_ok=True)
        return False


def _touch(path: Path) -> None:
    """Mark ``path`` as just used (another process may have evicted it meanwhile)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _entries(directory: Path, kind: str) -> list[tuple[int, str]]:
    """``(mtime_ns, name)`` of each entry of ``kind`` in ``directory``; vanished files are left out."""
    width = len(kind) + 1 + 64 + len(".pickle")
    found = []
    try:
        scan = list(os.scandir(directory))
    except OSError:
        return []
    for entry in scan:
        if len(entry.name) == width and entry.name.startswith(f"{kind}-") and entry.name.endswith(".pickle"):
            try:
                found.append((entry.stat().st_mtime_ns, entry.name))
            except OSError:  # removed by another process since the scan
                pass
    return found


def _evict(directory: Path, kind: str, keep: int, current: Path) -> None:
    """Remove the least recently used entries of ``kind`` beyond ``keep`` (never ``current``), and temporary
    files of ``kind`` left by writers that died."""
    others = sorted((e for e in _entries(directory, kind) if e[1] != current.name), reverse=True)
    for _, name in others[max(keep - 1, 0):]:
        _remove(directory / name)
    cutoff = time.time() - _STALE_TMP_SECONDS
    for tmp in directory.glob(f"{kind}-*.tmp"):
        try:
            stale = tmp.stat().st_mtime < cutoff
        except OSError:  # renamed into place or removed meanwhile
            continue
        if stale:
            _remove(tmp)


def _remove(path: Path) -> None:
    """Delete ``path`` if it is still there (another process may be evicting the same files)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
