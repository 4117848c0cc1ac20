"""``imagectl validate``: every rule over every profile, plus checks the caller adds (the templates render).

The template check lives with the templates (:func:`imagectl.render.dockerfile.template_violations`); the
command passes it in, so the matrix package never imports the renderer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .model import Matrix, Profile
from .names import list_profiles
from .rules import MATRIX_RULES, Violation, run_rules

ExtraCheck = Callable[[list[Profile]], list[Violation]]


@dataclass(frozen=True)
class ValidateReport:
    """What ``validate`` found: how many profiles, which rules ran, and every violation."""

    profiles: int
    rules: tuple[str, ...]
    violations: tuple[Violation, ...]


def validate_matrix(matrix: Matrix, extra: Sequence[tuple[str, ExtraCheck]] = ()) -> ValidateReport:
    """Run the matrix rules and each ``(name, check)`` of ``extra`` over every profile.

    Raises only what an extra check raises for unreadable input.
    """
    profiles = list_profiles(matrix)
    violations = run_rules(profiles)
    for _, check in extra:
        violations += check(profiles)
    names = tuple(rule.__name__ for rule in MATRIX_RULES) + tuple(name for name, _ in extra)
    return ValidateReport(len(profiles), names, tuple(violations))
