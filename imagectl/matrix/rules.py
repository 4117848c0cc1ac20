"""Compatibility rules: small pure functions over a profile, each returning its violations.

A rule takes a :class:`Profile` and returns a (possibly empty) list of :class:`Violation`; it never raises
for a broken combination.  ``validate`` runs :data:`MATRIX_RULES` over every profile of the matrix; ``check``
runs :func:`check_combination` over an ad-hoc combination.  Adding a rule is adding a function to a list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ..grammar import driver_key, major_minor, versions_equal
from .model import Profile

_CU_SUFFIX = re.compile(r"^nvidia-.*-cu([0-9]+)$")


@dataclass(frozen=True)
class Violation:
    """One broken constraint: which rule, for what, what is wrong, and where the fact comes from."""

    rule: str
    subject: str
    message: str
    source: str

    def __str__(self) -> str:
        return f"{self.subject}: [{self.rule}] {self.message} (source: {self.source})"


Rule = Callable[["Profile"], list[Violation]]


def _v(profile: Profile, rule: str, message: str, source: str | None = None) -> Violation:
    return Violation(rule, profile.name, message, source or str(profile.framework.source))


def _pin(profile: Profile, prefix: str) -> tuple[str, str] | None:
    for name, version in profile.variant.pins_for(profile.python):
        if name.startswith(prefix):
            return name, version
    return None


def python_supported(p: Profile) -> list[Violation]:
    """The profile's Python must be one the release publishes wheels for."""
    if p.python in p.release.python:
        return []
    wheels = ", ".join(p.release.python)
    message = f"Python {p.python} not among {p.framework.name} {p.release.version} wheels ({wheels})"
    return [_v(p, "python-supported", message)]


def python_available(p: Profile) -> list[Violation]:
    """The profile's Python must come with the base OS or from its package archive."""
    if p.python == p.os.python or p.python in p.os.apt_python:
        return []
    archive = ", ".join(p.os.apt_python)
    message = (f"Python {p.python} is neither {p.os.name}'s python3 ({p.os.python})"
               f" nor in its archive ({archive})")
    return [_v(p, "python-available", message, "matrices [os] table")]


def python_installable(p: Profile) -> list[Violation]:
    """The release must not be unavailable on the profile's Python (a companion or dependency without a wheel)."""
    reason = p.release.unavailable_reason(p.python)
    if reason is None:
        return []
    return [_v(p, "python-installable", f"{p.framework.name} {p.release.version} on Python {p.python}: {reason}")]


def unverified_stated(p: Profile) -> list[Violation]:
    """A build other than the PyPI default without pins, cuDNN or NCCL must say why (``unverified``)."""
    v = p.variant
    missing = [what for what, have in (("pins", v.pins), ("cudnn", v.cudnn), ("nccl", v.nccl)) if not have]
    if v.pypi or not missing or v.unverified:
        return []
    message = f"the CUDA {v.cuda} build has no {', '.join(missing)} and no `unverified` reason saying why"
    return [_v(p, "unverified-stated", message)]


def cudnn_pin_agrees(p: Profile) -> list[Violation]:
    """The variant's ``cudnn`` must equal the version of its ``nvidia-cudnn-*`` pin."""
    return _agrees(p, "cudnn", p.variant.cudnn, "nvidia-cudnn-")


def nccl_pin_agrees(p: Profile) -> list[Violation]:
    """The variant's ``nccl`` must equal the version of its ``nvidia-nccl-*`` pin."""
    return _agrees(p, "nccl", p.variant.nccl, "nvidia-nccl-")


def _agrees(p: Profile, what: str, declared: str | None, prefix: str) -> list[Violation]:
    pin = _pin(p, prefix)
    if declared is None or pin is None or versions_equal(pin[1], declared):
        return []
    return [_v(p, f"{what}-pin-agrees", f"{what} = {declared} but pins say {pin[0]}=={pin[1]}")]


def cuda_runtime_agrees(p: Profile) -> list[Violation]:
    """A pinned CUDA runtime (``nvidia-cuda-runtime-*`` or ``cuda-toolkit``) must be of the variant's CUDA."""
    pin = _pin(p, "nvidia-cuda-runtime-") or _pin(p, "cuda-toolkit")
    if pin is None:
        return []
    if major_minor(pin[1]) == major_minor(p.variant.cuda):
        return []
    return [_v(p, "cuda-runtime-agrees", f"CUDA {p.variant.cuda} build pins {pin[0]}=={pin[1]}")]


def pin_suffix_agrees(p: Profile) -> list[Violation]:
    """Every ``nvidia-*-cuNN`` pin must be built for the variant's CUDA major version."""
    out = []
    for name, version in p.variant.pins_for(p.python):
        match = _CU_SUFFIX.match(name)
        if match and int(match[1]) != p.toolkit.major:
            message = f"{name}=={version} is for CUDA {match[1]}, the build is CUDA {p.variant.cuda}"
            out.append(_v(p, "pin-cuda-major", message))
    return out


def pypi_pins_complete(p: Profile) -> list[Violation]:
    """The PyPI default build must state cuDNN and NCCL (its wheel metadata always does)."""
    if not p.variant.pypi or (p.variant.cudnn and p.variant.nccl):
        return []
    return [_v(p, "pypi-pins-complete", "the PyPI default build must declare cudnn and nccl from its wheel metadata")]


def driver_floors_ordered(p: Profile) -> list[Violation]:
    """The minor-version-compatibility floor cannot be above the full-compatibility driver."""
    t = p.toolkit
    if driver_key(t.min_driver_compat) <= driver_key(t.min_driver):
        return []
    message = f"CUDA {t.version}: min_driver_compat {t.min_driver_compat} > min_driver {t.min_driver}"
    return [_v(p, "driver-floors", message, "matrices/cuda.toml")]


def toolkit_release_matches(p: Profile) -> list[Violation]:
    """The toolkit's base-image release must belong to its minor version (12.1.1 for 12.1)."""
    if major_minor(p.toolkit.release) == major_minor(p.toolkit.version):
        return []
    message = f"CUDA {p.toolkit.version} names release {p.toolkit.release}"
    return [_v(p, "toolkit-release", message, "matrices/cuda.toml")]


def build_archs_known(p: Profile) -> list[Violation]:
    """A build's cubins and PTX are for targets its toolkit's nvcc has (CUDA 12.1 cannot build sm_100)."""
    known = set(p.toolkit.archs)
    unknown = [a for a in p.variant.archs if "sm_" + a.split("_", 1)[1] not in known]
    if not unknown:
        return []
    build = f"{p.framework.name} {p.release.version}+{p.framework.tag_of(p.variant.cuda)}"
    message = f"{build} archs {', '.join(unknown)}: not targets of CUDA {p.toolkit.version}'s nvcc ([cuda] archs)"
    return [_v(p, "build-archs", message)]


MATRIX_RULES: tuple[Rule, ...] = (
    python_supported,
    python_available,
    python_installable,
    unverified_stated,
    cudnn_pin_agrees,
    nccl_pin_agrees,
    cuda_runtime_agrees,
    pin_suffix_agrees,
    pypi_pins_complete,
    driver_floors_ordered,
    toolkit_release_matches,
    build_archs_known,
)


def run_rules(profiles: Iterable[Profile], rules: Iterable[Rule] = MATRIX_RULES) -> list[Violation]:
    """Every violation of ``rules`` over ``profiles``, each reported once, in a stable order."""
    rules = tuple(rules)
    seen: dict[tuple[str, str, str], Violation] = {}
    for profile in profiles:
        for rule in rules:
            for violation in rule(profile):
                seen.setdefault((violation.rule, violation.message, violation.source), violation)
    return list(seen.values())
