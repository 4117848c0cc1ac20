"""Looking at and reading the files and folders a user names, with one rule for what cannot be: one error line
naming the path and the OS's reason, never a traceback.

A path under a folder the user may not enter cannot even be looked at: ``Path.exists``, ``is_file`` and ``stat``
raise PermissionError there (they answer False only for a path that is not there).  Every reader of a user's path
(the configuration file, a CA bundle, a key, a lock, the ``[paths]`` folders, a ``--requirements`` file) goes
through these functions, so "not there" stays an answer and anything else becomes ``error`` (an InputError: exit
2) as ``PATH: cannot read[ WHAT]: REASON`` (``locks/torch.txt: cannot read the lock: Permission denied``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InputError


def reason(exc: OSError) -> str:
    """The OS's words for ``exc`` (``Permission denied``), or the exception's text when it has none."""
    return exc.strerror or str(exc)


def cannot_read(path: Path | str, exc: OSError, error: type[InputError] = InputError, what: str = "") -> InputError:
    """The error for ``path`` that could not be looked at or read: ``PATH: cannot read[ WHAT]: REASON``."""
    return error(f"{path}: cannot read{' ' + what if what else ''}: {reason(exc)}")


def status(path: Path, error: type[InputError] = InputError, what: str = "") -> os.stat_result | None:
    """``path``'s stat (links followed), or None when nothing is there (also a file where a folder is on the way);
    raises ``error`` naming the path when it cannot be looked at (a folder on the way the user may not enter, a link
    loop, an I/O error)."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise cannot_read(path, exc, error, what) from None


def exists(path: Path, error: type[InputError] = InputError, what: str = "") -> bool:
    """Whether something is at ``path``; raises ``error`` as :func:`status` does."""
    return status(path, error, what) is not None


def is_file(path: Path, error: type[InputError] = InputError, what: str = "") -> bool:
    """Whether ``path`` is a regular file (links followed); raises ``error`` as :func:`status` does."""
    found = status(path, error, what)
    return found is not None and stat.S_ISREG(found.st_mode)


def is_dir(path: Path, error: type[InputError] = InputError, what: str = "") -> bool:
    """Whether ``path`` is a folder (links followed); raises ``error`` as :func:`status` does."""
    found = status(path, error, what)
    return found is not None and stat.S_ISDIR(found.st_mode)


def read_bytes(path: Path, error: type[InputError] = InputError, what: str = "") -> bytes:
    """The bytes of the file ``path``; raises ``error`` naming it when it cannot be read (not there, a folder, no
    permission on it or on a folder on the way)."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise cannot_read(path, exc, error, what) from None


def read_text(path: Path, error: type[InputError] = InputError, what: str = "") -> str:
    """The UTF-8 text of the file ``path`` (newlines as ``Path.read_text`` reads them); raises ``error`` as
    :func:`read_bytes` does, and for bytes that are not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: cannot read{' ' + what if what else ''}: not UTF-8 text") from None
    except OSError as exc:
        raise cannot_read(path, exc, error, what) from None


def check_readable(path: Path, error: type[InputError] = InputError, what: str = "") -> None:
    """Open the file ``path`` and read one byte of it, so a file that cannot be read is refused now rather than
    when it is used; raises ``error`` as :func:`read_bytes` does."""
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise cannot_read(path, exc, error, what) from None


def check_listable(path: Path, error: type[InputError] = InputError, what: str = "") -> None:
    """Open the folder ``path`` for listing, so a folder whose files cannot be listed (mode 000) is refused now rather
    than read as empty; raises ``error`` naming it."""
    try:
        with os.scandir(path):
            pass
    except OSError as exc:
        raise cannot_read(path, exc, error, what) from None
