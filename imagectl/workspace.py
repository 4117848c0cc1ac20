"""The configuration and the matrix it names, loaded once per command and passed down."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .config import Config
from .matrix.load import load_matrix
from .matrix.model import Matrix, Profile
from .matrix.names import resolve_profile
from .resources import shipped_dir


@dataclass
class Workspace:
    """A command's view of the world: the configuration and, on first use, the matrix."""

    config: Config = field(default_factory=Config)

    @cached_property
    def matrix(self) -> Matrix:
        """The shipped matrices plus the configured ones; raises MatrixError."""
        return load_matrix([shipped_dir("matrices"), *self.config.matrix_dirs])

    def profile(self, name: str, python: str | None = None) -> Profile:
        """Resolve a profile name; raises UnknownProfileError with the closest names."""
        return resolve_profile(name, self.matrix, python)
