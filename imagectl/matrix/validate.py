"""``imagectl validate``: every rule over every resolvable profile, plus checks the caller adds (the templates
render).  "Resolvable" is every release (not only the newest of a line), CUDA variant, OS, Python and flavour a
name can reach (:func:`~imagectl.matrix.names.resolvable_profiles`), so a name ``resolve`` accepts passes every
rule when ``validate`` does.

The template check lives with the templates (:func:`imagectl.render.dockerfile.template_violations`); the
command passes it in, so the matrix package never imports the renderer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .model import Framework, Matrix, Profile, Release, Variant
from .names import resolvable_profiles, unbuildable_variants
from .rules import MATRIX_RULES, Violation, run_rules

ExtraCheck = Callable[[list[Profile]], list[Violation]]


@dataclass(frozen=True)
class ValidateReport:
    """What ``validate`` found: how many profiles, which rules ran, and every violation."""

    profiles: int
    rules: tuple[str, ...]
    violations: tuple[Violation, ...]


def _unbuildable(fw: Framework, release: Release, variant: Variant) -> Violation:
    message = (f"no OS of CUDA {variant.cuda}'s base images provides a Python {fw.name} {release.version} can be"
               f" installed on ({', '.join(release.python)}): no name of this build resolves")
    return Violation("python-available", f"{fw.name}-{release.version}-{fw.tag_of(variant.cuda)}", message,
                     str(fw.source))


def validate_matrix(matrix: Matrix, extra: Sequence[tuple[str, ExtraCheck]] = ()) -> ValidateReport:
    """Run the matrix rules and each ``(name, check)`` of ``extra`` over every profile.

    Raises only what an extra check raises for unreadable input.
    """
    profiles = resolvable_profiles(matrix)
    violations = run_rules(profiles) + [_unbuildable(fw, release, variant)
                                        for fw, release, variant in unbuildable_variants(matrix)]
    for _, check in extra:
        violations += check(profiles)
    names = tuple(rule.__name__ for rule in MATRIX_RULES) + tuple(name for name, _ in extra)
    return ValidateReport(len(profiles), names, tuple(violations))
