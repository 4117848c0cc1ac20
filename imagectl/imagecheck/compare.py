"""The in-image check's comparison: what a container reports (``check.py`` JSON) against what was promised.

Everything here is pure: the report comes in as a dict, findings go out.  A finding that is not ``ok`` with
severity ``error`` fails the check; a ``warning`` (a system NCCL that differs from the one the framework
loads, no GPU for ``--gpu``) is reported and does not.  An image installed from a lock (``expect["lock"]``) must
hold exactly the lock and its extras, and the lock file the labels name (:func:`lock_findings`).
"""

from __future__ import annotations

import json
import re
from dataclasses import KW_ONLY, asdict, dataclass
from enum import Enum
from typing import Any, Mapping

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import OperationError
from ..grammar import major_minor


class Severity(str, Enum):
    """How much a finding that is not ok weighs: an ``error`` fails the check, a ``warning`` does not.  Its text
    (``str()``, JSON) is its value."""

    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Finding:
    """One compared fact: ``ok`` and ``severity`` are keyword-only (``Finding(what, expected, actual, ok=...)``)."""

    what: str
    expected: str | None
    actual: str | None
    _: KW_ONLY
    ok: bool
    severity: Severity = Severity.ERROR

    def as_dict(self) -> dict[str, Any]:
        """The finding as plain data for ``--json`` (the severity as its text)."""
        return {**asdict(self), "severity": self.severity.value}


def parse_report(text: str) -> dict[str, Any]:
    """The JSON the check script printed (its last line); raises OperationError if there is none."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                break
            if isinstance(data, dict):
                return data
    raise OperationError(f"the in-image check printed no report: {text.strip()[-300:] or '(nothing)'}")


def _same_version(expected: str | None, actual: str | None, parts: int | None = None) -> bool:
    if expected is None or actual is None:
        return expected == actual
    try:
        e, a = Version(expected).release, Version(actual).release
    except InvalidVersion:
        return expected == actual
    n = parts or max(len(e), len(a))
    return e[:n] == a[:n]


def compare(expect: Mapping[str, Any], report: Mapping[str, Any]) -> list[Finding]:
    """Every finding of a check report against the expectations."""
    fw = report.get("framework") or {}
    out = [
        Finding("python", expect["python"], major_minor(report.get("python")),
                ok=_same_version(expect["python"], report.get("python"), 2)),
        Finding(f"{expect['framework']} version", expect["version"], fw.get("version") or fw.get("error"),
                ok=_same_version(expect["version"], fw.get("version"))),
        Finding(f"{expect['framework']} CUDA", expect["cuda"], fw.get("cuda"),
                ok=_same_version(expect["cuda"], fw.get("cuda"), 2)),
    ]
    for what in ("cudnn", "nccl"):
        if expect[what]:
            actual = fw.get(what)
            out.append(Finding(f"{what} loaded by {expect['framework']}", expect[what], actual,
                               ok=_same_version(expect[what], actual, 3)))
    out += _package_findings(expect["packages"], report.get("packages") or {})
    out += lock_findings(expect, report)
    out += _system_nccl_findings(fw.get("nccl"), report.get("system_nccl") or {})
    out += _library_findings(expect, report.get("libraries") or {})
    out += _toolchain_findings(fw)
    if report.get("gpu_requested"):
        out += _gpu_findings(fw.get("gpu") or {})
    out += _compile_findings(fw.get("compile") or {})
    out += _pip_check_findings(report.get("pip_check"))
    out += _import_findings(report.get("imports"))
    return out


def _package_findings(pins: Mapping[str, str], installed: Mapping[str, str]) -> list[Finding]:
    have = {canonicalize_name(k): v for k, v in installed.items()}
    out = []
    for name, version in sorted(pins.items()):
        actual = have.get(canonicalize_name(name))
        ok = actual is not None and _same_version(version, actual.split("+")[0])
        out.append(Finding(f"pip {name}", version, actual, ok=ok))
    return out


# The venv's own tooling: installed by the venv, not by the lock, so exempt unless the lock names it.
VENV_TOOLING = frozenset({"pip", "setuptools", "wheel"})


def _exact_version(expected: str, actual: str) -> bool:
    """Versions equal by PEP 440 (``1.0`` == ``1.0.0``), the local part included (``2.3.1+cu121`` != ``2.3.1``)."""
    try:
        return Version(expected) == Version(actual)
    except InvalidVersion:
        return expected == actual


def _canonical(packages: Mapping[str, str] | None) -> dict[str, str]:
    return {canonicalize_name(name): str(version) for name, version in (packages or {}).items()}


def lock_findings(expect: Mapping[str, Any], report: Mapping[str, Any]) -> list[Finding]:
    """The findings of an image installed from a lock (``expect["lock"]``; none without one): the installed
    distributions are exactly the lock and the extras (the venv's pip, setuptools and wheel exempt unless locked),
    the extras are at their locked versions, and the lock file in the image is the one the labels name.
    Raises nothing."""
    if expect.get("lock") is None:
        return []
    extras = _canonical(expect.get("extras"))
    wanted = {**_canonical(expect["lock"]), **extras}
    installed = _canonical(report.get("packages"))
    out = [_environment_finding(wanted, installed)]
    if extras:
        out.append(_extras_finding(extras, installed))
    out.append(_lock_file_finding(expect.get("lock_sha256"), report.get("lock_files")))
    return out


def _differences(wanted: Mapping[str, str], installed: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The missing (``name==version``) and differing (``name locked != installed``) of ``wanted``."""
    missing = [f"{n}=={v}" for n, v in sorted(wanted.items()) if n not in installed]
    differs = [f"{n} {v} != {installed[n]}" for n, v in sorted(wanted.items())
               if n in installed and not _exact_version(v, installed[n])]
    return missing, differs


def _environment_finding(wanted: Mapping[str, str], installed: Mapping[str, str]) -> Finding:
    missing, differs = _differences(wanted, installed)
    extra = [f"{n}=={v}" for n, v in sorted(installed.items()) if n not in wanted and n not in VENV_TOOLING]
    parts = [f"{label}: {', '.join(names)}" for label, names in
             (("missing", missing), ("extra", extra), ("differs", differs)) if names]
    actual = "; ".join(parts) if parts else f"{len(wanted)} packages as locked"
    return Finding("installed packages = lock", f"{len(wanted)} locked packages", actual, ok=not parts)


def _extras_finding(extras: Mapping[str, str], installed: Mapping[str, str]) -> Finding:
    missing, differs = _differences(extras, installed)
    parts = [f"{label}: {', '.join(names)}" for label, names in (("missing", missing), ("differs", differs)) if names]
    expected = ", ".join(f"{n}=={v}" for n, v in sorted(extras.items()))
    return Finding("extras at their locked versions", expected, "; ".join(parts) if parts else "ok", ok=not parts)


def _lock_file_finding(sha256: str | None, files: Any) -> Finding:
    """The sha256 of the lock file the check found in the image against the labelled one (an error when either
    is missing: an older check script reports no lock file)."""
    entries = [f for f in files if isinstance(f, Mapping)] if isinstance(files, list) else []
    lock = next((f for f in entries if f.get("kind", "lock") == "lock"), None)
    if lock is None:
        actual = "the check script reported no lock file"
    else:
        actual = str(lock.get("sha256") or f"no lock file at {lock.get('path')}: {lock.get('error') or 'missing'}")
    ok = bool(sha256) and lock is not None and str(lock.get("sha256") or "").lower() == str(sha256).lower()
    return Finding("lock file sha256", sha256, actual, ok=ok)


def _pip_check_findings(result: Any) -> list[Finding]:
    """``pip check`` in the image: an error when it found broken requirements, a warning when there is no pip
    (or it did not run); none for a report without it."""
    if not isinstance(result, Mapping):
        return []
    output = str(result.get("output") or "").strip()
    if result.get("ok") is True:
        return [Finding("pip check", "no broken requirements", "ok", ok=True)]
    if result.get("ok") is None:
        return [Finding("pip check", "no broken requirements", output or "not run", ok=False,
                        severity=Severity.WARNING)]
    first = "; ".join(output.splitlines()[:3])[:300]
    return [Finding("pip check", "no broken requirements", first or "failed", ok=False)]


def _import_findings(imports: Any) -> list[Finding]:
    """One finding per module the check imported (``imports``: name -> None or the error), an error when it
    failed; none for a report without it."""
    if not isinstance(imports, Mapping):
        return []
    return [Finding(f"import {name}", "ok", "ok" if error is None else str(error), ok=error is None)
            for name, error in sorted(imports.items())]


def _system_nccl_findings(loaded: str | None, system: Mapping[str, Any]) -> list[Finding]:
    out = []
    for source in ("env", "dpkg"):
        value = system.get(source)
        if value and loaded:
            label = "NCCL_VERSION of the base image" if source == "env" else "system libnccl2 package"
            same = _same_version(loaded, value.split("-")[0], 3)
            out.append(Finding(f"{label} vs NCCL the framework loads", loaded, value, ok=same,
                               severity=Severity.WARNING))
    return out


# A library of the check's "libraries" report -> (the pin that gives its version, the expectation that states it).
LIBRARY_PINS: dict[str, tuple[str, str | None]] = {
    "libcudnn": (r"nvidia-cudnn(-cu[0-9]+)?", "cudnn"),
    "libnccl": (r"nvidia-nccl(-cu[0-9]+)?", "nccl"),
    "libcublas": (r"nvidia-cublas(-cu[0-9]+)?", None),
}


def _library_findings(expect: Mapping[str, Any], libraries: Mapping[str, Any]) -> list[Finding]:
    """Where each CUDA library the framework loaded comes from.  From site-packages (an nvidia-* wheel): ok.
    From the system: it must be the pinned version (the nvidia-* pin, else the cudnn/nccl the profile states);
    another version fails the check, an unknown one (nothing pinned, or no version in the file name) is a
    warning.  A library that was not loaded gives no finding."""
    out = []
    for name, found in sorted(libraries.items()):
        if name in LIBRARY_PINS and isinstance(found, Mapping):
            out.append(_library_finding(name, found, _pinned_version(expect, name)))
    return out


def _pinned_version(expect: Mapping[str, Any], library: str) -> str | None:
    pattern, stated = LIBRARY_PINS[library]
    for package, version in sorted(expect["packages"].items()):
        if re.fullmatch(pattern, canonicalize_name(package)):
            return version
    return expect.get(stated) if stated else None


def _library_finding(name: str, found: Mapping[str, Any], pinned: str | None) -> Finding:
    path, version = str(found.get("path")), found.get("version")
    if found.get("origin") == "site-packages":
        return Finding(f"{name} origin", "site-packages", path, ok=True)
    actual = f"system {version or '(no version)'}: {path}"
    expected = f"site-packages or system {pinned or '(nothing pinned)'}"
    if pinned is None or not version:
        return Finding(f"{name} origin", expected, actual, ok=False, severity=Severity.WARNING)
    ok = _same_version(pinned, str(version), str(version).count(".") + 1)
    return Finding(f"{name} origin", expected, actual, ok=ok)


def _gpu_findings(gpu: Mapping[str, Any]) -> list[Finding]:
    if not gpu.get("available"):
        return [Finding("GPU present for --gpu", "a CUDA device", "none", ok=False,
                        severity=Severity.WARNING)]
    return [
        Finding("CUDA matmul on GPU", "ok", "ok" if gpu.get("matmul_ok") else "failed",
                ok=bool(gpu.get("matmul_ok"))),
        Finding("NCCL all-reduce (1 process)", "ok", "ok" if gpu.get("allreduce_ok") else "failed",
                ok=bool(gpu.get("allreduce_ok"))),
    ]


def _compile_findings(compiled: Mapping[str, Any]) -> list[Finding]:
    """One finding per device the check compiled on (``framework.compile``: ``{"api": "torch.compile", "cpu":
    {"ok": bool, "error": str | None}, "gpu": ...}``), an error when it failed; none for a report without it
    (an image checked by an older script).  Raises nothing."""
    if not isinstance(compiled, Mapping):
        return []
    api = str(compiled.get("api") or "JIT compilation")
    out = []
    for device in ("cpu", "gpu"):
        result = compiled.get(device)
        if isinstance(result, Mapping):
            ok = result.get("ok") is True
            actual = "ok" if ok else str(result.get("error") or "failed")
            out.append(Finding(f"{api} on {device.upper()}", "ok", actual, ok=ok))
    return out


def _toolchain_findings(fw: Mapping[str, Any]) -> list[Finding]:
    """The CUDA toolkit of a devel flavour (``framework.cuda_toolchain``: ``{"cuda_home", "nvcc", "nvcc_release",
    "error"}``): an error unless ``torch.utils.cpp_extension`` found an nvcc of the framework's CUDA major.minor
    (``torch.version.cuda``).  None for a report without it (a flavour without the toolkit).  Raises nothing."""
    chain = fw.get("cuda_toolchain")
    if not isinstance(chain, Mapping):
        return []
    expected, release = major_minor(fw.get("cuda")), chain.get("nvcc_release")
    ok = bool(expected and release) and _same_version(expected, str(release), 2)
    actual = f"nvcc {release} at {chain.get('nvcc')}" if release else str(chain.get("error") or "no nvcc")
    return [Finding(f"nvcc of CUDA_HOME for {fw.get('name') or 'framework'} extensions", expected, actual, ok=ok)]


def failed(findings: list[Finding]) -> list[Finding]:
    """The findings that fail the check."""
    return [f for f in findings if not f.ok and f.severity is Severity.ERROR]


def finding_text(finding: Finding) -> str:
    """``WHAT: expected EXPECTED, found ACTUAL`` (``-`` for what is unknown)."""
    return f"{finding.what}: expected {finding.expected or '-'}, found {finding.actual or '-'}"


def finding_line(finding: Finding) -> str:
    """The one line of a finding in a report (``ok``, ``FAIL`` or ``warn``, then :func:`finding_text`): the
    shape ``test`` prints, ``import`` prints and a build logs (pure)."""
    mark = "warn" if not finding.ok and finding.severity is Severity.WARNING else "ok  " if finding.ok else "FAIL"
    return f"{mark}  {finding_text(finding)}"
