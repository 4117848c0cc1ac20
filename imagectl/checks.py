"""``imagectl validate``: every rule over every profile, and every template rendered once per shape."""

from __future__ import annotations

from dataclasses import dataclass

from .config import Config
from .errors import ImagectlError
from .matrix.model import Matrix, Profile
from .matrix.names import list_profiles
from .matrix.rules import MATRIX_RULES, Violation, run_rules


@dataclass(frozen=True)
class ValidateReport:
    """What ``validate`` found: how many profiles, which rules ran, and every violation."""

    profiles: int
    rules: tuple[str, ...]
    violations: tuple[Violation, ...]


def template_violations(profiles: list[Profile], config: Config) -> list[Violation]:
    """Render the build context of one profile per (framework, flavour); each failure is a violation."""
    from .render.dockerfile import context_files, make_environment
    from .resources import template_dirs

    env = make_environment(template_dirs(config))
    shapes: dict[tuple[str, str], Profile] = {}
    for profile in profiles:
        shapes.setdefault((profile.framework.name, profile.flavor), profile)
    out = []
    for profile in shapes.values():
        try:
            context_files(profile, config, env)
        except ImagectlError as exc:
            out.append(Violation("template-renders", profile.name, str(exc), "templates/"))
    return out


def validate_matrix(matrix: Matrix, config: Config) -> ValidateReport:
    """Run the matrix rules and the template check; raises only for unreadable input."""
    profiles = list_profiles(matrix)
    violations = run_rules(profiles) + template_violations(profiles, config)
    names = tuple(rule.__name__ for rule in MATRIX_RULES) + ("template_renders",)
    return ValidateReport(len(profiles), names, tuple(violations))
