"""Files a team adds to every build context (``[paths] context``), and their content digests.

A template partial can ``COPY files/...`` (a wheelhouse for offline installs, a site configuration).  The
build key needs each file's content digest; hashing hundreds of megabytes on every ``build`` would make the
reuse check as slow as the build itself, so digests are cached by (path, size, mtime, inode) in
``$XDG_CACHE_HOME/imagectl/file-digests.json``: an unchanged file costs one ``stat``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InputError

CONTEXT_PREFIX = "files"


def context_files_on_disk(dirs: Sequence[Path]) -> dict[str, Path]:
    """``files/<relative path>`` -> path for every regular file under ``dirs`` (later dirs win).

    Raises InputError for a symbolic link that leaves its directory or an unreadable directory.
    """
    found: dict[str, Path] = {}
    for root in dirs:
        for path in sorted(root.rglob("*")):
            if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
                raise InputError(f"[paths] context: {path} links outside {root}")
            if path.is_file():
                found[f"{CONTEXT_PREFIX}/{path.relative_to(root).as_posix()}"] = path
    return found


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
    """The sha256 of each file, from the stat-keyed cache where the file did not change."""
    cache_file = cache_file or _cache_path()
    try:
        cache = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        cache = {}
    out, changed = {}, False
    for name, path in files.items():
        st = path.stat()
        key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
        if key not in cache:
            cache[key] = _sha256(path)
            changed = True
        out[name] = cache[key]
    if changed:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache))
        tmp.replace(cache_file)
    return out


def place_files(files: Mapping[str, Path], dest: Path) -> None:
    """Put ``files`` into the build context ``dest``: hard links where possible, copies otherwise."""
    for name, source in files.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
