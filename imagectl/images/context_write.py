"""Writing a build context into a folder: the rendered files and a team's added files, never through a symbolic
link, the pip netrc of index credentials readable by its owner only, and nothing left behind when it fails.

``build`` writes into a fresh folder of its own (:mod:`.context_dirs`) and may hard-link the added files there (a
large wheelhouse costs no copy); ``render -o DIR`` writes into a folder the user named, which may already hold
files or links, and copies the added files, so that editing the rendered context never changes the team's source.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..errors import InputError
from ..render.context import NETRC_FILE

# a new file only, never through a link: an existing file is removed first (it may be a hard link to another)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def write_context(files: Mapping[str, bytes], added: Mapping[str, Path], dest: Path, *,
                  link: bool = False) -> list[Path]:
    """Write ``files`` (name -> content) and ``added`` (name -> the team's file) into ``dest`` (created if needed);
    the paths written, in order.  ``link`` hard-links the added files where it can (a build's own context).

    Raises InputError for a symbolic link where a file or folder of the context goes, OSError when writing
    fails; either way the files and folders it had made are removed again."""
    made: list[Path] = []
    try:
        if not dest.is_dir():
            dest.mkdir(parents=True)
            made.append(dest)
        for name, content in sorted(files.items()):
            _write(_place(dest, name, made), content, 0o600 if name == NETRC_FILE else 0o644, made)
        for name, source in sorted(added.items()):
            _add(source, _place(dest, name, made), made, link=link)
    except BaseException:
        _undo(made)
        raise
    return [dest / name for name in [*sorted(files), *sorted(added)]]


def _place(dest: Path, name: str, made: list[Path]) -> Path:
    """Where ``name`` goes under ``dest``, its folders made: refuses a symbolic link on the way or at the end."""
    path = dest
    for part in Path(name).parts[:-1]:
        path = path / part
        _refuse_link(path)
        if not path.is_dir():
            path.mkdir()
            made.append(path)
    target = path / Path(name).name
    _refuse_link(target)
    return target


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise InputError(f"{path} is a symbolic link: the build context is never written through one (remove it, or "
                         "render into a new folder)")


def _write(path: Path, content: bytes, mode: int, made: list[Path]) -> None:
    if path.exists():
        path.unlink()
    fd = os.open(path, _NEW_FILE, mode)
    made.append(path)
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), mode)
        handle.write(content)


def _add(source: Path, target: Path, made: list[Path], *, link: bool) -> None:
    if target.exists():
        target.unlink()
    if link:
        with contextlib.suppress(OSError):
            os.link(source, target)
            made.append(target)
            return
    made.append(target)
    shutil.copyfile(source, target, follow_symlinks=True)


def _undo(made: list[Path]) -> None:
    """Remove what a failed write had made, newest first (folders only when empty)."""
    for path in reversed(made):
        with contextlib.suppress(OSError):
            path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
