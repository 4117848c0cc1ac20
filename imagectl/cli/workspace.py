"""A command's view of the world: the configuration and the matrix it names, loaded once per command.

Only the CLI holds a Workspace; library functions take the matrix and the configuration they need.  Every command
reads the matrix files afresh; the loaded model comes from the cache only when no byte of them changed
(:mod:`imagectl.matrix.cached`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..config import Config
from ..matrix.cached import cached_matrix
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
        return cached_matrix(matrix_dirs(self.config))

    def profile(self, name: str, python: str | None = None) -> Profile:
        """Resolve a profile name; raises UnknownProfileError with the closest names."""
        return resolve_profile(name, self.matrix, python)
