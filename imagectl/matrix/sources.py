"""The matrix files of the matrix directories, as read: the bytes the loader parses are the bytes the matrix cache
(:mod:`.cached`) keys on, so what was parsed is what was hashed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import MatrixError
from ..tomlfile import read_bytes


@dataclass(frozen=True)
class MatrixSources:
    """The directories and, in loading order, every ``*.toml`` file of them with its bytes."""

    dirs: tuple[Path, ...]
    files: tuple[tuple[Path, bytes], ...]

    def digests(self) -> list[list[str]]:
        """``[path, sha256 of its bytes]`` of every file, in loading order."""
        return [[str(path), hashlib.sha256(data).hexdigest()] for path, data in self.files]


def matrix_files(dirs: Sequence[Path]) -> list[Path]:
    """The ``*.toml`` files of each directory, sorted within a directory, in directory order; raises MatrixError
    for a directory that is missing."""
    files: list[Path] = []
    for directory in dirs:
        if not paths.is_dir(directory, MatrixError, "the matrix directory"):
            raise MatrixError(f"{directory}: matrix directory not found")
        files.extend(sorted(directory.glob("*.toml")))
    return files


def read_sources(dirs: Sequence[Path]) -> MatrixSources:
    """Every matrix file of ``dirs`` with its bytes; raises MatrixError naming a directory that is missing or a
    file that cannot be read."""
    return MatrixSources(tuple(dirs), tuple((path, read_bytes(path, MatrixError)) for path in matrix_files(dirs)))
