"""Running the in-image check script in a throw-away container and judging its report.

Two ways in: an image imagectl built carries the script at ``/opt/imagectl/check.py`` and promises what its
labels say (:func:`check_findings`, :func:`run_check`); a foreign image gets the script of a profile passed
on the command line and run with the image's own Python (:func:`run_foreign_check`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..engine import Engine, LineSink
from ..errors import BuildError, OperationError
from ..labels import expectations
from .compare import Finding, compare, failed, finding_line, parse_report

CHECK_COMMAND = ["python", "/opt/imagectl/check.py"]

# Run the check script given as $1 with the image's python (a venv's on PATH first), else python3.
_RUN_FOREIGN = ('for py in python python3; do if command -v "$py" >/dev/null 2>&1; then exec "$py" -c "$1"; fi; '
                'done; echo "no python or python3 on the PATH of the image" >&2; exit 127')


@dataclass(frozen=True)
class CheckRun:
    """One run of the in-image check: the command, whether the GPU check was asked for, the report the script
    printed and its findings against the image's labels (what a build's check-report attestation records)."""

    command: tuple[str, ...]
    gpu: bool
    report: Mapping[str, Any]
    findings: list[Finding]


def check_run(engine: Engine, image: str, labels: Mapping[str, str], network: str | None, *, gpu: bool) -> CheckRun:
    """Run the in-image check in a container of ``image`` and compare its report with ``labels``.

    Raises OperationError when the image has no imagectl labels or the check script does not run.
    """
    expect = expectations(labels)
    command = CHECK_COMMAND + (["--gpu"] if gpu else [])
    status, output = engine.run(image, command, network, gpus=gpu)
    if status != 0:
        raise OperationError(f"the in-image check exited with status {status}: {output.strip()[-300:]}")
    report = parse_report(output)
    return CheckRun(tuple(command), gpu, report, compare(expect, report))


def check_findings(engine: Engine, image: str, labels: Mapping[str, str], network: str | None, *,
                   gpu: bool) -> list[Finding]:
    """The findings of :func:`check_run`; raises what it raises."""
    return check_run(engine, image, labels, network, gpu=gpu).findings


def run_check(engine: Engine, image: str, network: str | None, log: LineSink, *, gpu: bool = False) -> CheckRun:
    """The in-image check of a fresh build, each finding logged as a ``check:`` line; raises BuildError (step
    ``check``, with the findings' lines as its log) on any mismatch."""
    info = engine.inspect(image)
    try:
        checked = check_run(engine, image, dict(info.labels) if info else {}, network, gpu=gpu)
    except OperationError as exc:
        raise BuildError(str(exc), "check") from None
    findings = checked.findings
    report = "\n".join(finding_line(f) for f in findings)
    for line in report.splitlines():
        log(f"check: {line}")
    bad = failed(findings)
    if bad:
        found = "; ".join(f"{f.what}: expected {f.expected}, found {f.actual}" for f in bad)
        raise BuildError(f"in-image check failed: {found}", "check", report)
    return checked


def run_foreign_check(engine: Engine, image: str, script: str, network: str | None) -> dict[str, Any]:
    """Run ``script`` in a throw-away container of ``image`` with its own Python; the parsed report.

    Raises OperationError when the image has no shell or Python, or the script prints no report.
    """
    status, output = engine.run(image, ["sh", "-c", _RUN_FOREIGN, "imagectl-check", script], network)
    if status != 0:
        raise OperationError(f"import: the in-image check of {image} exited with status {status}: "
                             f"{output.strip()[-300:]}")
    return parse_report(output)
