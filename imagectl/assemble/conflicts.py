"""The one rule for two wheels of a lock that install the same path, in one layer or in two.

Two wheels may install one path only with the same bytes (``nvidia/__init__.py``, empty in each ``nvidia-*`` wheel
of a CUDA 12 lock); different bytes are refused, naming both wheels and the path, and so is a path that one wheel
installs as a file and another as a folder (its file would hide the folder's files, or the folder the file).  The same
holds for two members of one wheel that land on one path (``x.py`` and ``NAME.data/purelib/x.py``).  Then whether the
first or the last writer wins (the first within a layer, which skips a path written already; the last across layers,
which an overlay stacks) makes no difference.  pip lets the later install overwrite; PyPA's installer refuses any
overwrite; this takes the middle: what both give alike is allowed, the rest refused.

:class:`LockPaths` takes the wheels as the lock's layers arrive and answers at once, before the layer of those wheels
is written; only the paths written twice are hashed (a piece at a time: memory stays bounded), so checking a lock
costs reading its wheels' directories.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from .install import Planned, Scheme, planned_files, planned_sha256, record_path
from .wheel import Wheel, read_wheel, shown


@dataclass(frozen=True)
class _Claim:
    """A file one wheel installs: the wheel and the file (None: its RECORD, which lists that wheel's files only, so
    never the same as another's)."""

    wheel: Wheel
    planned: Planned | None


class LockPaths:
    """The paths a lock's wheels install into ``scheme``, wheel after wheel, across all its layers (see the module
    docstring); it holds each path once, its folders once, and the hash of each path written twice."""

    def __init__(self, scheme: Scheme) -> None:
        self._scheme = scheme
        self._files: dict[str, _Claim] = {}
        self._folders: dict[str, tuple[str, str]] = {}  # folder -> (the first wheel with a file under it, the file)
        self._sha256: dict[tuple[str, str, str], str] = {}  # (wheel file name, path, member) -> sha256 written there

    def add(self, wheels: Iterable[Path]) -> None:
        """Read the wheels (:func:`~.wheel.read_wheel`) and take their paths; raises BuildError for a wheel that does
        not read, or one that installs other bytes at a path than an earlier wheel, or a file where one has a folder
        (or the other way round)."""
        for path in wheels:
            self.add_wheel(read_wheel(path))

    def add_wheel(self, wheel: Wheel) -> None:
        """Take ``wheel``'s paths, as :meth:`add` does."""
        for planned in planned_files(wheel, self._scheme):
            self._claim(planned.path, _Claim(wheel, planned))
        self._claim(record_path(wheel, self._scheme), _Claim(wheel, None))

    def _claim(self, path: str, claim: _Claim) -> None:
        earlier = self._files.get(path)
        if earlier is not None:
            self._check_same(path, earlier, claim)
            return
        if path in self._folders:
            owner, under = self._folders[path]
            raise BuildError(f"{claim.wheel.path.name} installs a file at {shown(path)}, where {owner} installs a "
                             f"folder (holding {shown(under)})")
        for folder in _folders(path):
            found = self._files.get(folder)
            if found is not None:
                raise BuildError(f"{claim.wheel.path.name} installs {shown(path)} in a folder {shown(folder)}, where "
                                 f"{found.wheel.path.name} installs a file")
            if folder in self._folders:  # and every folder above it: none of them is a file
                break
            self._folders[folder] = (claim.wheel.path.name, path)
        self._files[path] = claim

    def _check_same(self, path: str, one: _Claim, other: _Claim) -> None:
        """Raise BuildError unless ``one`` and ``other`` write the same bytes with the same mode at ``path``."""
        if (one.planned is None or other.planned is None
                or self._sha(path, one.wheel, one.planned) != self._sha(path, other.wheel, other.planned)):
            raise BuildError(_both(one.wheel, other.wheel, f"install different bytes at {shown(path)}"))
        if one.planned.mode != other.planned.mode:
            raise BuildError(_both(one.wheel, other.wheel, f"install {shown(path)} with different modes "
                                   f"({one.planned.mode:o}, {other.planned.mode:o})"))

    def _sha(self, path: str, wheel: Wheel, planned: Planned) -> str:
        key = (wheel.path.name, path, planned.member.name if planned.member else "")
        if key not in self._sha256:
            self._sha256[key] = planned_sha256(wheel, planned, self._scheme)
        return self._sha256[key]


def _both(one: Wheel, other: Wheel, what: str) -> str:
    if one.path == other.path:
        return f"{one.path.name}: two of its members {what}"
    return f"{one.path.name} and {other.path.name} {what}"


def _folders(path: str) -> Iterator[str]:
    """The folders above absolute ``path``, the nearest first (``/a/b/c`` -> ``/a/b``, ``/a``); no recursion, however
    deep."""
    end = path.rfind("/")
    while end > 0:
        yield path[:end]
        end = path.rfind("/", 0, end)
