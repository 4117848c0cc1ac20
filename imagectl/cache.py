"""The one on-disk cache: results keyed by the content of everything they were computed from.

Three kinds use it, each keyed by a *request* that is the whole input of its computation:

- ``matrix`` (:func:`imagectl.matrix.cached.cached_matrix`): the loaded matrix, keyed by the SHA-256 of the bytes
  of every matrix file the loader parses (and the list of them) and of imagectl's own source; a changed, added or
  removed matrix file, or changed code, is another key.  Commands still read every matrix file on every run (to
  hash it); what a hit saves is parsing and validating them (``bench/startup.py``).
- ``lock`` (:func:`imagectl.lock.make.lock_for_build`): a lock resolved at build time, keyed by the
  :class:`~imagectl.lock.make.LockRequest` the resolution reads, with its as-of *date* already resolved.
- ``wheel-size`` (:mod:`imagectl.images.size_facts`): the sizes of one wheel (its bytes, its members' and its
  ``.py`` members'), keyed by the sha256 the index lists for the file (its content): ``build --plan`` stores them,
  ``show`` only reads them (:func:`peek`).

Nothing else is kept: ``show``, ``validate``, ``list`` and a rendered context are computed afresh every run.

- **The key** is the SHA-256 of the canonical JSON of the request (sorted keys, no secret in it: the caller's job),
  imagectl's version, this module's format number and the content of imagectl's own modules (a changed loader is
  another key).  The request itself is stored in the entry and compared.
- **The entry** is JSON: ``{"format", "key": REQUEST, "value": TEXT, "mac"}``; the value is the result as text,
  read back by the kind's own pure decoder.  Nothing is unpickled and nothing read can run code.  ``mac`` is an
  HMAC-SHA256 of the entry under a random secret of this user's, kept outside the cache folder
  (``$XDG_STATE_HOME/imagectl/cache.secret``, mode 0600): an entry planted in a cache folder restored from a
  shared CI cache, or written by another machine, is not trusted.  An entry that cannot be read, fails its MAC,
  does not decode or holds another request is recomputed and replaced.
- ``IMAGECTL_NO_CACHE=1`` turns it off; it lives in ``$XDG_CACHE_HOME/imagectl`` (``~/.cache/imagectl``).

Each kind keeps at most :attr:`Kind.keep` entries, the least recently used going first (a hit touches its entry).
Several processes may share the folder: an entry is written to a temporary file of its own and renamed into
place, and eviction tolerates entries another process removed meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Generic, TypeVar

from . import __version__

T = TypeVar("T")
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
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


def secret_path() -> Path:
    """Where the secret that authenticates cache entries lives: the state folder, not the cache folder."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "imagectl" / "cache.secret"


def cache_secret() -> bytes | None:
    """This user's cache secret (32 random bytes, made on first use, readable by its owner only), or None when it
    can be neither read nor made: the cache is then not used."""
    path = secret_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_secret(path)
    except OSError:
        return None
    with os.fdopen(fd, "wb") as handle:  # a racing process reads it only once it is whole (see _read_secret)
        handle.write(os.urandom(32))
    return _read_secret(path)


def _read_secret(path: Path) -> bytes | None:
    for _ in range(50):  # another process may have just created it and not written it yet
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) == 32:
            return data
        time.sleep(0.01)
    return None


def _mac(secret: bytes, request: Mapping[str, JsonValue], text: str) -> str:
    return hmac.new(secret, f"{FORMAT}\0{canonical(request)}\0{text}".encode(), hashlib.sha256).hexdigest()


def canonical(request: Mapping[str, JsonValue]) -> str:
    """The request as canonical JSON (sorted keys, no spaces); raises TypeError for a value JSON cannot hold."""
    return json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _sources(root: str) -> list[str]:
    out = []
    for entry in os.scandir(root):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            out += _sources(entry.path)
        elif entry.name.endswith(".py"):
            out.append(entry.path)
    return out


@lru_cache(maxsize=1)
def code_digest() -> str:
    """The SHA-256 of imagectl's own modules (their paths within the package and their bytes), once per process:
    the code a process runs is the code it loaded."""
    digest = hashlib.sha256()
    for path in sorted(_sources(str(_PACKAGE))):
        with open(path, "rb") as handle:
            digest.update(f"{os.path.relpath(path, _PACKAGE)}\0".encode() + handle.read() + b"\0")
    return digest.hexdigest()


def cache_key(kind: str, request: Mapping[str, JsonValue]) -> str:
    """The key of ``kind``'s result for ``request``: 64 hex digits."""
    text = f"{kind}\0{__version__}\0{FORMAT}\0{code_digest()}\0{canonical(request)}"
    return hashlib.sha256(text.encode()).hexdigest()


def entry_path(kind: Kind[T], request: Mapping[str, JsonValue]) -> Path:
    """The file of ``kind``'s entry for ``request``."""
    return cache_dir() / f"{kind.name}-{cache_key(kind.name, request)}.json"


def cached(kind: Kind[T], request: Mapping[str, JsonValue], compute: Callable[[], T]) -> T:
    """``compute()``, or its earlier result for the same ``request``.  Raises whatever ``compute`` raises (errors
    are not cached); a cache that cannot be read or written is bypassed, never an error."""
    secret = None if os.environ.get("IMAGECTL_NO_CACHE") else cache_secret()
    if secret is None:
        return compute()
    path = entry_path(kind, request)
    found = _load(path, kind, request, secret)
    if found is not None:
        _touch(path)
        return found[0]
    value = compute()
    if _store(path, request, kind.encode(value), secret):
        _evict(path.parent, kind.name, keep=kind.keep, current=path)
    return value


def peek(kind: Kind[T], requests: Sequence[Mapping[str, JsonValue]]) -> list[T | None]:
    """The earlier result of ``kind`` for each of ``requests`` (as :func:`cached` stored it), None where there is
    none (or the cache is off or unreadable); computes nothing and never raises.  For a reader that must not
    compute: ``show`` prints the sizes a ``build --plan`` read, and reads no index itself."""
    secret = None if os.environ.get("IMAGECTL_NO_CACHE") else cache_secret()
    if secret is None:
        return [None] * len(requests)
    folder, out = cache_dir(), []
    for request in requests:
        path = folder / f"{kind.name}-{cache_key(kind.name, request)}.json"
        found = _load(path, kind, request, secret) if path.exists() else None
        if found is not None:
            _touch(path)
        out.append(found[0] if found is not None else None)
    return out


def _load(path: Path, kind: Kind[T], request: Mapping[str, JsonValue], secret: bytes) -> tuple[T] | None:
    """``(value,)`` of the entry at ``path``, or None when it is missing, unreadable, not ours, for another
    request or its value does not decode."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        value = entry["value"]
        if entry.get("format") != FORMAT or canonical(entry.get("key")) != canonical(request) \
                or not isinstance(value, str) or not hmac.compare_digest(entry["mac"], _mac(secret, request, value)):
            return None
        return (kind.decode(value),)
    except Exception:  # a missing, partial, foreign or corrupt entry: the caller recomputes
        return None


def _store(path: Path, request: Mapping[str, JsonValue], text: str, secret: bytes) -> bool:
    """Write the entry to ``path`` through a temporary file of its own (atomic for readers); whether it worked.
    Never raises: an unwritable cache just goes unused."""
    data = json.dumps({"format": FORMAT, "key": request, "value": text, "mac": _mac(secret, request, text)},
                      sort_keys=True)
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
    """Remove the least recently used entries of ``kind`` beyond ``keep`` (never ``current``), temporary files of
    ``kind`` left by writers that died, and the pickled results earlier versions kept (never read)."""
    others = sorted((e for e in _entries(directory, kind) if e[1] != current.name), reverse=True)
    for _, name in others[max(keep - 1, 0):]:
        _remove(directory / name)
    for legacy in directory.glob("*.pickle"):  # results earlier imagectl versions pickled: never read, removed
        _remove(legacy)
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
