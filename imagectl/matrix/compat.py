"""Which profiles run on a node (driver, GPU), and whether an ad-hoc combination holds together.

All functions here are pure: the node facts come in as arguments (the CLI reads ``nvidia-smi``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from ..errors import InputError
from ..grammar import check_driver, check_python, check_version, driver_key
from .model import Framework, Matrix, Profile, Release
from .names import build_profile

_SM_RE = re.compile(r"^sm_?([0-9]{2,3})$")


@dataclass(frozen=True)
class Verdict:
    """Whether one profile runs on the node, and why not (or with what caveat)."""

    profile: str
    ok: bool
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def gpu_arch(gpu: str, matrix: Matrix) -> tuple[str, str]:
    """``(label, sm_XY)`` for a GPU model name or an ``sm_XY``/``XY``/``X.Y`` value; raises InputError."""
    text = gpu.strip()
    if re.fullmatch(r"[0-9]+\.[0-9]", text):
        text = "sm_" + text.replace(".", "")
    match = _SM_RE.match(text.lower())
    if match:
        return text, f"sm_{match[1]}"
    by_name = {name.lower().replace(" ", ""): (name, arch) for name, arch in matrix.gpus.items()}
    found = by_name.get(text.lower().replace(" ", "").replace("nvidia", ""))
    if not found:
        raise InputError(f"--gpu {gpu!r}: not sm_XY and not a known GPU ({', '.join(sorted(matrix.gpus))})")
    return found


def profile_archs(profile: Profile) -> tuple[str, ...]:
    """The GPU targets a profile's framework build covers (the variant's list, else the toolkit's)."""
    return profile.variant.archs or profile.toolkit.archs


def driver_verdict(profile: Profile, driver: str) -> tuple[list[str], list[str]]:
    """(reasons it cannot run, notes) for ``driver`` against the profile's CUDA floors."""
    t = profile.toolkit
    if driver_key(driver) >= driver_key(t.min_driver):
        return [], []
    if driver_key(driver) >= driver_key(t.min_driver_compat):
        return [], [f"driver {driver} < {t.min_driver}:"
                    " runs under CUDA minor-version compatibility (no PTX JIT of newer code)"]
    return [f"driver {driver} is below CUDA {t.version}'s floor {t.min_driver_compat}"
            f" (full support from {t.min_driver})"], []


def arch_verdict(profile: Profile, label: str, arch: str) -> list[str]:
    """Reasons the profile's build does not target ``arch`` (empty when it does)."""
    archs = profile_archs(profile)
    if arch in archs:
        return []
    number = lambda a: int(a[3:])  # noqa: E731
    hint = "a newer CUDA build is needed" if archs and number(arch) > max(map(number, archs)) else "not built for it"
    span = f"{archs[0]}..{archs[-1]}" if archs else "none"
    return [f"{label} ({arch}) is not among CUDA {profile.toolkit.version}'s targets ({span}): {hint}"]


def node_verdicts(profiles: list[Profile], driver: str, gpu: tuple[str, str] | None) -> list[Verdict]:
    """A verdict per profile for a node with ``driver`` and optionally a GPU ``(label, sm_XY)``."""
    check_driver(driver, "--driver")
    out = []
    for profile in profiles:
        reasons, notes = driver_verdict(profile, driver)
        if gpu:
            reasons += arch_verdict(profile, *gpu)
        out.append(Verdict(profile.name, not reasons, tuple(reasons), tuple(notes)))
    return out


@dataclass(frozen=True)
class Combination:
    """An ad-hoc combination as ``imagectl check`` receives it."""

    framework: str
    version: str
    cuda: str | None = None
    python: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    driver: str | None = None
    gpu: str | None = None


_KEYS = ("cuda", "python", "cudnn", "nccl", "driver", "gpu")


def parse_combination(items: tuple[str, ...], matrix: Matrix) -> Combination:
    """Parse ``torch==2.3.1 cuda=12.1 python=3.12 nccl=2.20.5``; raises InputError for bad items and for an
    item given twice (``torch==2.3.1 torch==2.2.0``, ``cuda=12.1 cuda=11.8``): which one was meant?"""
    fields: dict[str, str] = {}
    framework = version = None
    for item in items:
        if "==" in item:
            if framework is not None:
                raise InputError(f"check: {item!r}: a framework is already given ({framework}=={version});"
                                 " check one combination at a time")
            framework, version = (s.strip() for s in item.split("==", 1))
            if framework not in matrix.frameworks:
                known = ", ".join(sorted(matrix.frameworks))
                raise InputError(f"check: {framework!r} is not a framework in the matrix ({known})")
            check_version(version, f"check: {framework} version")
            continue
        key, sep, value = item.partition("=")
        if not sep or key not in _KEYS:
            raise InputError(f"check: {item!r} is not FRAMEWORK==VERSION or one of {', '.join(k + '=' for k in _KEYS)}")
        if key in fields:
            raise InputError(f"check: {item!r}: {key} is already given ({key}={fields[key]})")
        fields[key] = _checked(key, value)
    if not framework or not version:
        raise InputError("check: name the framework and version, e.g. torch==2.3.1")
    return Combination(framework, version, **fields)


def _checked(key: str, value: str) -> str:
    if key == "python":
        return check_python(value, "check: python")
    if key == "driver":
        return check_driver(value, "check: driver")
    if key == "gpu":
        return value
    return check_version(value, f"check: {key}")


def _matches(declared: str | None, asked: str) -> bool:
    """``asked`` (maybe shorter: 2.20 or 8.9) agrees with the declared full version."""
    if declared is None:
        return False
    d, a = Version(declared).release, Version(asked).release
    return d[: len(a)] == a


def check_combination(combo: Combination, matrix: Matrix) -> tuple[list[str], list[str], Profile | None]:
    """``(reasons it is incompatible, notes, the closest profile)`` for an ad-hoc combination."""
    fw = matrix.frameworks[combo.framework]
    release = _find_release(fw, combo.version)
    if release is None:
        known = ", ".join(r.version for r in fw.releases)
        return [f"{fw.name} {combo.version} is not in the matrix (known: {known})"], [], None
    reasons: list[str] = []
    variants = [v for v in release.variants if combo.cuda is None or _matches(v.cuda, combo.cuda)]
    if not variants:
        cudas = ", ".join(v.cuda for v in release.variants)
        return [f"{fw.name} {release.version} has no CUDA {combo.cuda} build (published: {cudas})"], [], None
    variant = variants[0]
    if combo.python and combo.python not in release.python:
        has = ", ".join(release.python)
        reasons.append(f"{fw.name} {release.version} has no wheels for Python {combo.python} (has: {has})")
    for what, asked in (("cudnn", combo.cudnn), ("nccl", combo.nccl)):
        declared = getattr(variant, what)
        if asked and not _matches(declared, asked):
            build = f"{fw.name} {release.version}+{fw.tag_of(variant.cuda)}"
            reasons.append(f"{build} ships {what} {declared or 'unknown'}, not {asked}")
    python = combo.python if combo.python in release.python else None
    profile = build_profile(matrix, fw, release, variant, release.version, python=python)
    notes: list[str] = []
    if combo.driver:
        more, notes = driver_verdict(profile, combo.driver)
        reasons += more
    if combo.gpu:
        reasons += arch_verdict(profile, *gpu_arch(combo.gpu, matrix))
    return reasons, notes, profile


def _find_release(fw: Framework, version: str) -> Release | None:
    for release in fw.releases:
        if _matches(release.version, version):
            return release
    return None
