"""A command's view of the world: the configuration and the matrix it names, loaded once per command.

Only the CLI holds a Workspace; library functions take the matrix and the configuration they need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import cached
from ..config import Config
from ..shipped import matrix_dirs

if TYPE_CHECKING:  # loaded on first use: `validate` with a cached report never unpickles the matrix
    from ..matrix.model import Matrix, Profile


@dataclass
class Workspace:
    """The configuration and, on first use, the matrix."""

    config: Config = field(default_factory=Config)

    @cached_property
    def matrix_inputs(self) -> list[Path]:
        """What the matrix is read from: each matrix directory (present or not) and its ``*.toml`` files, the
        inputs of every cached result computed from the matrix."""
        dirs = matrix_dirs(self.config)
        return [*dirs, *(f for d in dirs if d.is_dir() for f in d.glob("*.toml"))]

    @cached_property
    def matrix(self) -> Matrix:
        """The shipped matrices plus the configured ones (from the cache when no file changed);
        raises MatrixError."""
        dirs = matrix_dirs(self.config)

        def load() -> Matrix:
            from ..matrix.load import load_matrix

            return load_matrix(dirs)

        return cached("matrix", self.matrix_inputs, load, extra="|".join(map(str, dirs)))

    def profile(self, name: str, python: str | None = None) -> Profile:
        """Resolve a profile name; raises UnknownProfileError with the closest names."""
        from ..matrix.names import resolve_profile

        return resolve_profile(name, self.matrix, python)
