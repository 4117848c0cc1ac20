"""The predicates of ``build``'s two statements besides the SBOM: SLSA v1 provenance (https://slsa.dev/spec/v1.0/
provenance) and the in-image check's report.  Pure: facts in, JSON-able dicts out.

Provenance says what was built from what, by what and when:

- ``buildDefinition.externalParameters``: what the user asked for (the profile, the extras, a ``--base``);
- ``resolvedDependencies``: the matrix entry (its facts), the lock (sha256 and where it came from), the base image
  (by digest), the rendered templates (sha256 over the build context's files) and imagectl itself;
- ``runDetails``: the builder (imagectl with the engine, each with its version, and for an assembled build the
  byte format of the layers imagectl wrote itself: ``layer-writer``, :data:`imagectl.assemble.layer.LAYER_WRITER`),
  the build key, and the build's start (the moment its planning began) and end (its image pushed).

The check report says what ran (the command, whether the GPU check was asked for and whether it really ran on a
GPU: only when the framework saw a CUDA device), where (the engine, the image's platform, imagectl's host) and what
it found (every finding, and the facts the check reported).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import __version__
from ..imagecheck.compare import Finding, failed

BUILD_TYPE = "https://imagectl.dev/build/v1"
BUILDER_ID = "https://imagectl.dev/builder"


@dataclass(frozen=True)
class EngineFacts:
    """The engine that built the image: its name and version."""

    name: str
    version: str


@dataclass(frozen=True)
class BuildFacts:
    """Everything the provenance of one build records (see the module docstring)."""

    profile: str
    matrix_entry: Mapping[str, Any]
    extras: Sequence[str]
    user_base: str | None
    lock_sha256: str
    lock_origin: str
    lock_id: str
    base: str  # the base image as pulled, without digest
    base_digest: str
    templates_sha256: str
    build_key: str
    engine: EngineFacts
    started: datetime
    finished: datetime
    repository: str = ""
    gpu_check: bool = False
    layer_writer: str = ""  # the format of the layers imagectl wrote itself (an assembled build), else ""


def templates_digest(files: Mapping[str, bytes]) -> str:
    """sha256 over the names and contents of the rendered build context (pure, order-free)."""
    h = hashlib.sha256(b"imagectl-templates-v1\0")
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).hexdigest().encode() + b"\0")
    return h.hexdigest()


def _time(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _sha256(value: str) -> dict[str, str]:
    return {"sha256": value.partition(":")[2] if ":" in value else value}


def provenance_predicate(facts: BuildFacts) -> dict[str, Any]:
    """The SLSA v1 provenance predicate of ``facts``."""
    external: dict[str, Any] = {"profile": facts.profile, "extras": list(facts.extras)}
    if facts.user_base:
        external["base"] = facts.user_base
    entry = {k: _plain(v) for k, v in sorted(facts.matrix_entry.items())}
    base: dict[str, Any] = {"name": "base-image", "uri": f"oci://{facts.base}"}
    if facts.base_digest:
        base["digest"] = _sha256(facts.base_digest)
    dependencies: list[dict[str, Any]] = [
        {"name": "matrix-entry", "uri": f"imagectl:profile/{facts.profile}",
         "digest": {"sha256": _entry_digest(entry)}, "annotations": entry},
        {"name": "lock", "uri": f"imagectl:lock/{facts.lock_id}", "digest": _sha256(facts.lock_sha256),
         "annotations": {"origin": facts.lock_origin}},
        base,
        {"name": "templates", "digest": {"sha256": facts.templates_sha256}},
        {"name": "imagectl", "uri": f"pkg:pypi/imagectl@{__version__}"},
    ]
    versions = {"imagectl": __version__, facts.engine.name: facts.engine.version}
    if facts.layer_writer:
        versions["layer-writer"] = facts.layer_writer
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": external,
            "internalParameters": {"buildKey": facts.build_key, "gpuCheck": facts.gpu_check},
            "resolvedDependencies": dependencies,
        },
        "runDetails": {
            "builder": {"id": f"{BUILDER_ID}/imagectl@{__version__}/{facts.engine.name}@{facts.engine.version}",
                        "version": versions},
            "metadata": {"invocationId": facts.build_key, "startedOn": _time(facts.started),
                         "finishedOn": _time(facts.finished)},
        },
    }


def _plain(value: Any) -> Any:
    """A matrix fact as JSON data (versions and paths as text)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def _entry_digest(entry: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CheckFacts:
    """One run of the in-image check: the command, where it ran, its report and findings."""

    command: Sequence[str]
    gpu_requested: bool
    report: Mapping[str, Any]
    findings: Sequence[Finding]
    engine: EngineFacts
    platform: str  # the image's os/architecture (the container ran it, emulated or not)
    host: str  # imagectl's machine architecture
    when: datetime | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def gpu_ran(report: Mapping[str, Any]) -> bool:
    """Whether the report's GPU check really ran on a GPU: asked for, and the framework saw a CUDA device (pure)."""
    gpu = (report.get("framework") or {}).get("gpu")
    return bool(report.get("gpu_requested")) and isinstance(gpu, Mapping) and gpu.get("available") is True


def check_predicate(check: CheckFacts) -> dict[str, Any]:
    """The check-report predicate of ``check`` (see the module docstring)."""
    report = check.report
    framework = report.get("framework") if isinstance(report.get("framework"), Mapping) else {}
    gpu = framework.get("gpu") if isinstance(framework.get("gpu"), Mapping) else {}
    ran_on_gpu = gpu_ran(report)
    return {
        "ran": {"command": list(check.command), "gpuRequested": check.gpu_requested, "gpuRan": ran_on_gpu,
                "gpuDevice": str(gpu.get("device") or "") if ran_on_gpu else None},
        "where": {"engine": {"name": check.engine.name, "version": check.engine.version},
                  "platform": check.platform, "host": check.host},
        "when": _time(check.when) if check.when else None,
        "result": "fail" if failed(list(check.findings)) else "pass",
        "findings": [f.as_dict() for f in check.findings],
        "found": {
            "python": report.get("python"),
            "framework": {k: v for k, v in framework.items() if k in ("name", "version", "local_version", "cuda",
                                                                      "cudnn", "nccl")},
            "gpu": dict(gpu) if ran_on_gpu else None,
            "packages": dict(report.get("packages") or {}),
            "lockFiles": list(report.get("lock_files") or []),
        },
    }
