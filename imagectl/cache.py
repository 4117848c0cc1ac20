"""The one on-disk cache: results that cost a network round trip, keyed by the content of what they read.

Only what is slow to compute and a pure function of a *value* is cached here; nothing derived from files is (the
matrix, ``show``, ``validate``, ``list`` and a rendered context are computed afresh on every run, so they cannot
go stale; ``bench/startup.py`` measures what that costs).  Today one kind uses it: a lock resolved at build time
(:func:`imagectl.lock.make.lock_for_build`), keyed by the :class:`~imagectl.lock.make.LockRequest` the resolution
reads, with its as-of *date* already resolved.

- **The key** is the SHA-256 of the canonical JSON of the request (sorted keys, no secret in it: the caller's job),
  imagectl's version and this module's format number.  The request is the whole input of the computation, so a
  key cannot leave an input out; the request itself is stored in the entry and compared on every hit.
- **The entry** is JSON: ``{"format": 1, "key": REQUEST, "value": TEXT}``; the value is the result as text (a
  lock file), read back by the kind's own pure parser.  Nothing is unpickled and nothing read can run code; an
  entry that cannot be read, parsed, or whose request differs is recomputed and replaced.
- ``IMAGECTL_NO_CACHE=1`` turns it off; it lives in ``$XDG_CACHE_HOME/imagectl`` (``~/.cache/imagectl``).

Each kind keeps at most :attr:`Kind.keep` entries, the least recently used going first (a hit touches its entry).
Several processes may share the folder: an entry is written to a temporary file of its own and renamed into
place, and eviction tolerates entries another process removed meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from . import __version__

T = TypeVar("T")
FORMAT = 1  # the entry layout; a new layout is a new key, old entries age out
KEEP_PER_KIND = 64  # entries of one kind that survive eviction
_STALE_TMP_SECONDS = 3600  # a temporary file this old was left by a writer that died
JsonValue = object  # what json.dumps takes: str, int, float, bool, None, lists and dicts of them


@dataclass(frozen=True)
class Kind(Generic[T]):
    """One kind of cached result: its name (the entries' file prefix), how its value becomes text and back
    (``decode`` raises for text it cannot read: the entry is then recomputed) and how many entries it keeps."""

    name: str
    encode: Callable[[T], str]
    decode: Callable[[str], T]
    keep: int = KEEP_PER_KIND


def cache_dir() -> Path:
    """Where cached results live."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "imagectl"


def canonical(request: Mapping[str, JsonValue]) -> str:
    """The request as canonical JSON (sorted keys, no spaces); raises TypeError for a value JSON cannot hold."""
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def cache_key(kind: str, request: Mapping[str, JsonValue]) -> str:
    """The key of ``kind``'s result for ``request``: 64 hex digits."""
    text = f"{kind}\0{__version__}\0{FORMAT}\0{canonical(request)}"
    return hashlib.sha256(text.encode()).hexdigest()


def entry_path(kind: Kind[T], request: Mapping[str, JsonValue]) -> Path:
    """The file of ``kind``'s entry for ``request``."""
    return cache_dir() / f"{kind.name}-{cache_key(kind.name, request)}.json"


def cached(kind: Kind[T], request: Mapping[str, JsonValue], compute: Callable[[], T]) -> T:
    """``compute()``, or its earlier result for the same ``request``.  Raises whatever ``compute`` raises (errors
    are not cached); a cache that cannot be read or written is bypassed, never an error."""
    if os.environ.get("IMAGECTL_NO_CACHE"):
        return compute()
    path = entry_path(kind, request)
    found = _load(path, kind, request)
    if found is not None:
        _touch(path)
        return found[0]
    value = compute()
    if _store(path, request, kind.encode(value)):
        _evict(path.parent, kind.name, keep=kind.keep, current=path)
    return value


def _load(path: Path, kind: Kind[T], request: Mapping[str, JsonValue]) -> tuple[T] | None:
    """``(value,)`` of the entry at ``path``, or None when it is missing, unreadable, for another request or
    its value does not parse."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        if entry.get("format") != FORMAT or canonical(entry.get("key")) != canonical(request):
            return None
        value = entry["value"]
        return (kind.decode(value),) if isinstance(value, str) else None
    except Exception:  # a missing, partial, foreign or corrupt entry: the caller recomputes
        return None


def _store(path: Path, request: Mapping[str, JsonValue], text: str) -> bool:
    """Write the entry to ``path`` through a temporary file of its own (atomic for readers); whether it worked.
    Never raises: an unwritable cache just goes unused."""
    data = json.dumps({"format": FORMAT, "key": request, "value": text}, sort_keys=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.stem}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        Path(tmp).replace(path)
        return True
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False


def _touch(path: Path) -> None:
    """Mark ``path`` as just used (another process may have evicted it meanwhile)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _entries(directory: Path, kind: str) -> list[tuple[int, str]]:
    """``(mtime_ns, name)`` of each entry of ``kind`` in ``directory``; vanished files are left out."""
    width = len(kind) + 1 + 64 + len(".json")
    found = []
    try:
        scan = list(os.scandir(directory))
    except OSError:
        return []
    for entry in scan:
        if len(entry.name) == width and entry.name.startswith(f"{kind}-") and entry.name.endswith(".json"):
            with contextlib.suppress(OSError):  # removed by another process since the scan
                found.append((entry.stat().st_mtime_ns, entry.name))
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
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
