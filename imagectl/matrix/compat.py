"""Which profiles run on a node (driver, GPU), and whether an ad-hoc combination holds together.

All functions here are pure: the node facts come in as arguments (the CLI reads ``nvidia-smi``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from packaging.version import Version

from ..errors import InputError
from ..grammar import check_driver, check_python, check_version, driver_key
from .admission import FORWARD, RUNTIME_LABELS, RUNTIMES, Runtime, admission
from .archs import describe, match_arch, newer_than_build, no_match
from .gpus import find_gpu, gpu_driver_reasons
from .model import CudaToolkit, Framework, Gpu, Matrix, Profile, Release
from .names import build_profile
from .platforms import platform_of_machine
from .runtime import LockedCuda, runtime_toolkit


@dataclass(frozen=True)
class Verdict:
    """Whether one profile runs on the node, and why not (or with what caveat)."""

    profile: str
    ok: bool
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    # what lets it run: "full support", "minor-version compatibility" or FORWARD (see .admission); "" when it cannot
    mechanism: str = ""
    # per runtime mode (legacy, cdi) whether it runs and how, when the two modes disagree; empty when they agree
    modes: tuple[tuple[str, bool, str], ...] = ()


LockOf = Callable[[Profile], LockedCuda | None]  # the CUDA a profile's applying lock installs (None: no lock)


def gpu_arch(gpu: str, matrix: Matrix) -> Gpu:
    """The GPU a model name or an ``sm_XY``/``XY``/``X.Y`` value names (:func:`~.gpus.find_gpu`); raises
    InputError."""
    return find_gpu(gpu, matrix)


def profile_archs(profile: Profile, toolkit: CudaToolkit | None = None) -> tuple[str, ...]:
    """The GPU code a profile's build carries: the variant's recorded list, else ``toolkit``'s (default: the
    profile's) nvcc targets."""
    return profile.variant.archs or (toolkit or profile.toolkit).archs


MINOR = "minor-version compatibility"
FULL = "full support"


def driver_verdict(toolkit: CudaToolkit, driver: str, who: str = "") -> tuple[list[str], list[str]]:
    """(reasons it cannot run, notes) for the CUDA driver ``driver`` (``who`` names it: ``driver X`` by default)
    against ``toolkit``'s floors."""
    t, who = toolkit, who or f"driver {driver}"
    if driver_key(driver) >= driver_key(t.min_driver):
        return [], []
    if driver_key(driver) >= driver_key(t.min_driver_compat):
        return [], [f"{who} < {t.min_driver}:"
                    f" runs under CUDA {MINOR} (no PTX JIT of newer code)"]
    return [f"{who} is below CUDA {t.version}'s floor {t.min_driver_compat}"
            f" (full support from {t.min_driver})"], []


def node_verdict(profile: Profile, toolkit: CudaToolkit, driver: str, gpu: Gpu | None,  # noqa: PLR0913
                 host: str | None = None, runtime: Runtime = "legacy") -> tuple[list[str], list[str], str]:
    """``(reasons, notes, mechanism)`` for ``profile`` on ``driver`` (and ``gpu``), ``toolkit`` the CUDA its code needs
    (its lock's): first whether the host's CPU (``host``, ``uname -m``: the node's or ``--arch``, else the GPU's
    fixed host) runs one of the image's platforms, then whether the container runtime starts the image and on which
    libcuda (by the image's own CUDA: :func:`~.admission.admission`), then that libcuda against ``toolkit``'s floors,
    the GPU's driver list and its binary compatibility."""
    reasons_host = host_reasons(profile, host, gpu)
    entry = admission(profile.toolkit, driver, gpu, runtime)
    reasons, notes = ([entry.why], []) if entry.mechanism == "refused" else ([], [])
    if entry.driver is not None:
        forward = entry.mechanism == "forward"
        who = f"the cuda-compat {profile.toolkit.version} driver ({entry.driver} or later)" if forward else ""
        reasons, notes = driver_verdict(toolkit, entry.driver, who)
        notes = [entry.why, *notes] if forward else notes
    reasons = reasons_host + reasons
    if gpu:
        reasons += gpu_driver_reasons(gpu, driver)
        more_reasons, more = arch_verdict(profile, gpu, entry.driver or driver, toolkit)
        reasons, notes = reasons + more_reasons, notes + more
    return reasons, notes, "" if reasons else _mechanism(entry.mechanism, notes)


def node_host(host: str | None, gpu: Gpu | None) -> str | None:
    """The CPU architecture (``uname -m``) of the node: ``host`` when given (``--arch``, or read from the node), else
    the host ``gpu`` always sits in (a Grace GPU: aarch64), else None (not known: no image is refused for it)."""
    return host or (gpu.host if gpu else None)


def host_reasons(profile: Profile, host: str | None, gpu: Gpu | None = None) -> list[str]:
    """Why the image cannot start on a node whose CPU is ``host`` (else ``gpu``'s fixed host, :func:`node_host`):
    the image has no platform of that CPU (its build's index has no CUDA wheels for it), and an image of another
    CPU architecture fails with ``exec format error``.  Empty when it has one, or the host is not known (pure)."""
    machine = node_host(host, gpu)
    platform = platform_of_machine(machine) if machine else None
    if machine is None or platform in profile.platforms:
        return []
    where = (f"{gpu.name} sits in an {machine} host (Grace CPU)" if gpu and gpu.host == machine and not host
             else f"the node is an {machine} host")
    has = ", ".join(profile.platforms)
    why = dict(profile.variant.platform_sources).get(platform or "")
    lacks = (f"imagectl builds no {machine} image" if not platform else
             f"its index has no {machine} CUDA wheels: {why}" if why else
             f"no {machine} CUDA wheels are recorded for its build: its index was not read (matrices/platforms.toml)")
    return [f"{where}: {profile.name} has no {platform or machine} image ({lacks}); its {has} image does not start "
            "there (exec format error)"]


def _mechanism(entry: str, notes: list[str]) -> str:
    minor = any(MINOR in n for n in notes)
    if entry == "forward":
        return FORWARD + (f" and {MINOR}" if minor else "")
    return MINOR if minor else FULL


def arch_verdict(profile: Profile, gpu: Gpu, driver: str | None = None,
                 toolkit: CudaToolkit | None = None) -> tuple[list[str], list[str]]:
    """(reasons, notes) for a GPU running the profile's build under the binary-compatibility rules of
    :mod:`.archs`; ``toolkit`` is the one whose nvcc targets stand in for a build with no recorded list."""
    toolkit = toolkit or profile.toolkit
    build = profile_archs(profile, toolkit)
    label = gpu.arch if gpu.name == gpu.arch else f"{gpu.name} ({gpu.arch})"
    recorded = bool(profile.variant.archs) or toolkit is not profile.toolkit  # a lock's toolkit: its note says so
    notes = [] if recorded else [f"no arch list recorded for this build: judged by CUDA {toolkit.version}'s nvcc"
                                 " targets"]
    what = f"{profile.framework.name} {profile.release.version}+{profile.framework.tag_of(profile.variant.cuda)}"
    found = match_arch(gpu.arch, build)
    if found is None:
        hint = "a newer CUDA build is needed" if newer_than_build(gpu.arch, build) else "not built for it"
        return [f"{label} cannot run {what} ({describe(build)}): {no_match(gpu.arch, build)}; {hint}"], notes
    jit_floor = profile.toolkit.min_driver  # the PTX comes from the build's own nvcc
    if found.needs_jit and driver and driver_key(driver) < driver_key(jit_floor):
        return [f"{label} needs {found.why}: that needs driver >= {jit_floor} (CUDA {profile.toolkit.version}'s"
                f" full support); {driver} is only minor-version compatible, which does not JIT newer PTX"], notes
    return [], notes + ([] if found.rule == "exact" else [f"{label} {found.why}"])


def profile_verdict(profile: Profile, driver: str, gpu: Gpu | None,
                    lock_of: LockOf | None = None, host: str | None = None) -> tuple[list[str], list[str]]:
    """(reasons, notes) for ``profile`` on a node with ``driver`` and optionally ``gpu`` (and CPU ``host``); with
    ``lock_of`` the driver floors and targets follow the CUDA runtime the profile's lock installs (:mod:`.runtime`)."""
    reasons, notes, _ = profile_mechanism(profile, driver, gpu, lock_of, host)
    return reasons, notes


def profile_mechanism(profile: Profile, driver: str, gpu: Gpu | None,  # noqa: PLR0913
                      lock_of: LockOf | None = None, host: str | None = None,
                      runtime: Runtime = "legacy") -> tuple[list[str], list[str], str]:
    """:func:`profile_verdict` and what lets the profile run (``""`` when it cannot), under ``runtime``."""
    toolkit, notes = runtime_toolkit(profile, lock_of(profile)) if lock_of else (profile.toolkit, [])
    reasons, more, mechanism = node_verdict(profile, toolkit, driver, gpu, host, runtime)
    return reasons, notes + more, mechanism


RuntimeChoice = Runtime | Literal["both"]


def node_verdicts(profiles: list[Profile], driver: str, gpu: Gpu | None,  # noqa: PLR0913
                  lock_of: LockOf | None = None, host: str | None = None,
                  runtime: RuntimeChoice = "both") -> list[Verdict]:
    """A verdict per profile for a node with ``driver``, optionally ``gpu`` and its CPU ``host`` (``uname -m``; else
    the GPU's fixed host), under the container runtime's ``runtime`` mode; ``both`` judges legacy and jit-cdi and
    gives one verdict where they agree, both (each reason and note prefixed with its mode, ``ok`` only when both
    run it) where they differ.  Raises InputError for a bad driver version."""
    check_driver(driver, "--driver")
    modes: tuple[Runtime, ...] = RUNTIMES if runtime == "both" else (runtime,)
    out = []
    for profile in profiles:
        each = [(mode, *profile_mechanism(profile, driver, gpu, lock_of, host, mode)) for mode in modes]
        out.append(_merged(profile.name, each))
    return out


def _merged(name: str, each: list[tuple[Runtime, list[str], list[str], str]]) -> Verdict:
    """One verdict from each mode's ``(mode, reasons, notes, mechanism)``: where the modes agree on the reasons and
    the mechanism, one verdict (a note only one mode has is prefixed with it); else both, each reason prefixed
    (pure)."""
    _, reasons, notes, mechanism = each[0]
    label = {mode: RUNTIME_LABELS[mode].split(" (")[0] for mode, *_ in each}
    common = [n for n in notes if all(n in ns for _, _, ns, _ in each)]
    own = [f"{label[mode]}: {n}" for mode, _, ns, _ in each for n in ns if n not in common]
    if all((r, m) == (reasons, mechanism) for _, r, _, m in each[1:]):
        return Verdict(name, not reasons, tuple(reasons), tuple(common + own), mechanism)
    reasons = [f"{label[mode]}: {r}" for mode, rs, _, _ in each for r in rs]
    mechanism = "; ".join(f"{label[mode]}: {m or 'cannot run'}" for mode, _, _, m in each)
    modes = tuple((mode, not rs, m) for mode, rs, _, m in each)
    return Verdict(name, not reasons, tuple(reasons), tuple(common + own), "" if reasons else mechanism, modes)


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


def framework_items(items: tuple[str, ...], matrix: Matrix) -> list[str]:
    """``items`` with the framework spelled ``NAME==VERSION`` whichever way it was given: ``torch==2.3.1``,
    ``torch=2.3`` and ``torch 2.3`` (two words) are one item (pure)."""
    out: list[str] = []
    words = list(items)
    while words:
        item = words.pop(0)
        name, sep, value = item.partition("=")
        if sep and not value.startswith("=") and name.strip() in matrix.frameworks:
            item = f"{name.strip()}=={value.strip()}"
        elif item.strip() in matrix.frameworks and words and "=" not in words[0]:
            item = f"{item.strip()}=={words.pop(0).strip()}"
        out.append(item)
    return out


def parse_combination(items: tuple[str, ...], matrix: Matrix) -> Combination:
    """Parse ``torch==2.3.1 cuda=12.1 python=3.12 nccl=2.20.5`` (the framework also as ``torch=2.3`` or
    ``torch 2.3``); raises InputError for bad items and for an item given twice (``torch==2.3.1 torch==2.2.0``,
    ``cuda=12.1 cuda=11.8``): which one was meant?"""
    fields: dict[str, str] = {}
    framework = version = None
    for item in framework_items(items, matrix):
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


def check_combination(combo: Combination, matrix: Matrix,
                      lock_of: LockOf | None = None) -> tuple[list[str], list[str], Profile | None]:
    """``(reasons it is incompatible, notes, the closest profile)`` for an ad-hoc combination; with ``lock_of``
    the driver floors and GPU targets follow the CUDA runtime the profile's lock installs."""
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
    having = [v for v in variants if all(not asked or _matches(getattr(v, what), asked)
                                         for what, asked in (("cudnn", combo.cudnn), ("nccl", combo.nccl)))]
    variant = (having or variants)[0]
    extra_notes = []
    if (combo.cudnn or combo.nccl) and len(having) > 1:
        asked = " ".join(f"{what}={value}" for what, value in (("cudnn", combo.cudnn), ("nccl", combo.nccl)) if value)
        builds = ", ".join(f"{fw.tag_of(v.cuda)} (cuDNN {v.cudnn or '-'}, NCCL {v.nccl or '-'})" for v in having)
        extra_notes.append(f"{asked} is in {len(having)} builds of {fw.name} {release.version}: {builds}; "
                           f"checked {fw.tag_of(variant.cuda)} (add cuda= to choose)")
    if combo.python and combo.python not in release.python:
        has = ", ".join(release.python)
        reasons.append(f"{fw.name} {release.version} has no wheels for Python {combo.python} (has: {has})")
    for what, asked in (("cudnn", combo.cudnn), ("nccl", combo.nccl)):
        declared = getattr(variant, what)
        if asked and not _matches(declared, asked):
            if len(variants) > 1 and not having:
                shipped = ", ".join(f"{fw.tag_of(v.cuda)}: {getattr(v, what) or 'unknown'}" for v in variants)
                reasons.append(f"no build of {fw.name} {release.version} ships {what} {asked} ({shipped})")
            else:
                build = f"{fw.name} {release.version}+{fw.tag_of(variant.cuda)}"
                reasons.append(f"{build} ships {what} {declared or 'unknown'}, not {asked}")
    python = combo.python if combo.python in release.python else None
    profile = build_profile(matrix, fw, release, variant, release.version, python=python)
    more, notes = _node_checks(combo, matrix, profile, lock_of)
    return reasons + more, extra_notes + notes, profile


def _node_checks(combo: Combination, matrix: Matrix, profile: Profile,
                 lock_of: LockOf | None) -> tuple[list[str], list[str]]:
    """(reasons, notes) of ``check``'s ``driver=`` and ``gpu=`` items for the profile it resolved: with a driver, the
    verdict ``compat`` gives (both runtime modes, :func:`node_verdicts`)."""
    gpu = find_gpu(combo.gpu, matrix) if combo.gpu else None
    if combo.driver:
        verdict = node_verdicts([profile], combo.driver, gpu, lock_of)[0]
        return list(verdict.reasons), list(verdict.notes)
    toolkit, notes = runtime_toolkit(profile, lock_of(profile)) if lock_of else (profile.toolkit, [])
    if gpu is None:
        return [], notes
    reasons, more = arch_verdict(profile, gpu, None, toolkit)
    return reasons, notes + more


def _find_release(fw: Framework, version: str) -> Release | None:
    for release in fw.releases:
        if _matches(release.version, version):
            return release
    return None
