"""Files a team adds to every build context (``[paths] context``), and their content digests.

A template partial can ``COPY files/...`` (a wheelhouse for offline installs, a site configuration).  The
build key needs each file's content digest; hashing hundreds of megabytes on every ``build`` would make the
reuse check as slow as the build itself, so digests are cached by (path, size, mtime, inode) in
``$XDG_CACHE_HOME/imagectl/file-digests.json``: an unchanged file costs one ``stat``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Mapping, Sequence

from .. import paths
from ..errors import InputError

CONTEXT_PREFIX = "files"


def context_files_on_disk(dirs: Sequence[Path]) -> dict[str, Path]:
    """``files/<relative path>`` -> path for every regular file under ``dirs`` (later dirs win).

    Raises InputError for a symbolic link that leaves its directory or a directory (the root or one below
    it) that cannot be listed: a file silently left out of the build would be worse.
    """
    found: dict[str, Path] = {}
    for root in dirs:
        for path in _walk(root):
            if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
                raise InputError(f"[paths] context: {path} links outside {root}")
            if path.is_file():
                found[f"{CONTEXT_PREFIX}/{path.relative_to(root).as_posix()}"] = path
    return found


def _unlistable(exc: OSError) -> None:
    raise InputError(f"[paths] context: cannot list {exc.filename}: {exc.strerror or exc}")


def _walk(root: Path) -> list[Path]:
    """Every entry under ``root``, sorted, not following links to directories; raises InputError for a
    directory that cannot be listed."""
    if not paths.is_dir(root, InputError, "the [paths] context folder"):
        raise InputError(f"[paths] context: {root} is not a directory")
    out: list[Path] = []
    for top, subdirs, files in os.walk(root, onerror=_unlistable):
        out.extend(Path(top) / name for name in (*subdirs, *files))
    return sorted(out)


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "imagectl" / "file-digests.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digests(files: Mapping[str, Path], cache_file: Path | None = None) -> dict[str, str]:
    """The sha256 of each file, from the stat-keyed cache where the file did not change; raises InputError
    for a file that cannot be read."""
    if not files:
        return {}
    cache_file = cache_file or _cache_path()
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cache = {}
    cache = cache if isinstance(cache, dict) else {}
    out, changed = {}, False
    for name, path in files.items():
        try:
            st = path.stat()
            key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
            if key not in cache:
                cache[key] = _sha256(path)
                changed = True
        except OSError as exc:
            raise InputError(f"[paths] context: cannot read {path}: {exc.strerror or exc}") from None
        out[name] = cache[key]
    if changed:
        _store(cache_file, cache)
    return out


def _store(cache_file: Path, cache: dict[str, str]) -> None:
    """Write the digest cache atomically; an unwritable cache is skipped (the digests are recomputed)."""
    tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(cache))
        tmp.replace(cache_file)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
