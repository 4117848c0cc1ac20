"""The in-image check's comparison: what a container reports (``check.py`` JSON) against what was promised.

Everything here is pure: the report comes in as a dict, findings go out.  A finding that is not ``ok`` with
severity ``error`` fails the check; a ``warning`` (a system NCCL that differs from the one the framework
loads, no GPU for ``--gpu``) is reported and does not.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import OperationError
from ..grammar import major_minor


@dataclass(frozen=True)
class Finding:
    """One compared fact."""

    what: str
    expected: str | None
    actual: str | None
    ok: bool
    severity: str = "error"  # "error" fails the check, "warning" does not

    def as_dict(self) -> dict[str, Any]:
        """The finding as plain data for ``--json``."""
        return asdict(self)


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
                _same_version(expect["python"], report.get("python"), 2)),
        Finding(f"{expect['framework']} version", expect["version"], fw.get("version") or fw.get("error"),
                _same_version(expect["version"], fw.get("version"))),
        Finding(f"{expect['framework']} CUDA", expect["cuda"], fw.get("cuda"),
                _same_version(expect["cuda"], fw.get("cuda"), 2)),
    ]
    for what in ("cudnn", "nccl"):
        if expect[what]:
            actual = fw.get(what)
            out.append(Finding(f"{what} loaded by {expect['framework']}", expect[what], actual,
                               _same_version(expect[what], actual, 3)))
    out += _package_findings(expect["packages"], report.get("packages") or {})
    out += _system_nccl_findings(fw.get("nccl"), report.get("system_nccl") or {})
    out += _library_findings(expect, report.get("libraries") or {})
    out += _toolchain_findings(fw)
    if report.get("gpu_requested"):
        out += _gpu_findings(fw.get("gpu") or {})
    out += _compile_findings(fw.get("compile") or {})
    return out


def _package_findings(pins: Mapping[str, str], installed: Mapping[str, str]) -> list[Finding]:
    have = {canonicalize_name(k): v for k, v in installed.items()}
    out = []
    for name, version in sorted(pins.items()):
        actual = have.get(canonicalize_name(name))
        ok = actual is not None and _same_version(version, actual.split("+")[0])
        out.append(Finding(f"pip {name}", version, actual, ok))
    return out


def _system_nccl_findings(loaded: str | None, system: Mapping[str, Any]) -> list[Finding]:
    out = []
    for source in ("env", "dpkg"):
        value = system.get(source)
        if value and loaded:
            label = "NCCL_VERSION of the base image" if source == "env" else "system libnccl2 package"
            same = _same_version(loaded, value.split("-")[0], 3)
            out.append(Finding(f"{label} vs NCCL the framework loads", loaded, value, same, "warning"))
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
        return Finding(f"{name} origin", "site-packages", path, True)
    actual = f"system {version or '(no version)'}: {path}"
    expected = f"site-packages or system {pinned or '(nothing pinned)'}"
    if pinned is None or not version:
        return Finding(f"{name} origin", expected, actual, False, "warning")
    return Finding(f"{name} origin", expected, actual, _same_version(pinned, str(version), str(version).count(".") + 1))


def _gpu_findings(gpu: Mapping[str, Any]) -> list[Finding]:
    if not gpu.get("available"):
        return [Finding("GPU present for --gpu", "a CUDA device", "none", False, "warning")]
    return [
        Finding("CUDA matmul on GPU", "ok", "ok" if gpu.get("matmul_ok") else "failed", bool(gpu.get("matmul_ok"))),
        Finding("NCCL all-reduce (1 process)", "ok", "ok" if gpu.get("allreduce_ok") else "failed",
                bool(gpu.get("allreduce_ok"))),
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
            out.append(Finding(f"{api} on {device.upper()}", "ok", actual, ok))
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
    return [Finding(f"nvcc of CUDA_HOME for {fw.get('name') or 'framework'} extensions", expected, actual, ok)]


def failed(findings: list[Finding]) -> list[Finding]:
    """The findings that fail the check."""
    return [f for f in findings if not f.ok and f.severity == "error"]


def format_findings(findings: list[Finding]) -> str:
    """A readable report: one line per finding."""
    marks = {True: "ok  ", False: "FAIL"}
    lines = []
    for f in findings:
        mark = marks[f.ok] if f.ok or f.severity == "error" else "warn"
        lines.append(f"{mark}  {f.what}: expected {f.expected or '-'}, found {f.actual or '-'}")
    return "\n".join(lines)
