"""A command's view of the world: the configuration and the matrix it names, loaded once per command.

Only the CLI holds a Workspace; library functions take the matrix and the configuration they need.  Nothing here is
cached between runs: every command reads the matrix files afresh, so what it prints cannot be stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..config import Config
from ..matrix.load import load_matrix
from ..matrix.model import Matrix, Profile
from ..matrix.names import resolve_profile
from ..shipped import matrix_dirs


@dataclass
class Workspace:
    """The configuration and, on first use, the matrix."""

    config: Config = field(default_factory=Config)

    @cached_property
    def matrix(self) -> Matrix:
        """The shipped matrices plus the configured ones; raises MatrixError."""
        return load_matrix(matrix_dirs(self.config))

    def profile(self, name: str, python: str | None = None) -> Profile:
        """Resolve a profile name; raises UnknownProfileError with the closest names."""
        return resolve_profile(name, self.matrix, python)
