"""The shipped matrix (matrices/*.toml) agrees exactly with the recorded PyPI metadata of torch's default
wheels (tests/fixtures/pypi/torch-wheels.json), compared by the same pure functions ``matrix verify`` uses.

No network: the recorded metadata stands in for the index.  Refresh it with
``python tests/fixtures/record_wheel_metadata.py``; then ``imagectl matrix verify`` against PyPI and this
test say the same thing.
"""

from __future__ import annotations

from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from imagectl.upstream.index_builds import IndexBuild, applicable, marker_python
from imagectl.upstream.verify import Companion, compare_build, compare_companion
from imagectl.pypi import DistFile, WheelMetadata, exact_pins

FIELDS = ("cuda", "cudnn", "nccl", "yanked")


def recorded_build(recorded: dict[str, Any], version: str) -> IndexBuild:
    entry = recorded["torch"][version]
    wheel = entry["wheel"]
    python = marker_python(DistFile(wheel["filename"], "https://pypi.invalid/" + wheel["filename"]))
    return IndexBuild("torch", version, "", wheel["filename"], python,
                      tuple(Requirement(line) for line in wheel["requires_dist"]), tuple(entry["cpython"]),
                      yanked="" if entry.get("yanked") else None, source=recorded["index"])


def pypi_releases(shipped_matrix):
    fw = shipped_matrix.frameworks["torch"]
    for release in fw.releases:
        for variant in release.variants:
            if variant.pypi:
                yield fw, release, variant


def test_every_torch_minor_from_2_0_to_2_15_has_a_pypi_default_build(shipped_matrix):
    minors = {release.minor for _, release, _ in pypi_releases(shipped_matrix)}
    missing = sorted({f"2.{n}" for n in range(16)} - minors, key=Version)
    assert not missing, f"torch minors without a pypi = true variant in matrices/: {missing}"


def test_every_shipped_release_is_recorded(shipped_matrix, recorded):
    unknown = [r.version for _, r, _ in pypi_releases(shipped_matrix)
               if (recorded["torch"].get(r.version) or {}).get("wheel") is None]
    assert not unknown, f"shipped torch releases with no recorded PyPI metadata: {unknown}"


def test_cuda_cudnn_nccl_and_every_exact_pin_agree(shipped_matrix, recorded):
    disagreements = []
    for fw, release, variant in pypi_releases(shipped_matrix):
        if release.version not in recorded["torch"]:
            continue
        build = recorded_build(recorded, release.version)
        findings = [f for f in compare_build(fw, release, variant, build)
                    if f.what in FIELDS or f.what.startswith("pin ")]
        disagreements += [str(f) for f in findings]  # unstated and unverifiable count too: the pins must be exact
        metadata = WheelMetadata("torch", Version(release.version), None, build.requirements)
        published = {k: v for k, v in exact_pins(metadata, python=build.python).items()
                     if k not in ("torch", *fw.companions)}
        if dict(variant.pins) != published:
            disagreements.append(
                f"torch {release.version}: pins {dict(variant.pins)} != the wheel's == pins {published}"
            )
    assert not disagreements, (
        "the shipped matrix disagrees with the recorded PyPI metadata:\n" + "\n".join(disagreements)
    )


def test_python_lists_agree(shipped_matrix, recorded):
    disagreements = []
    for fw, release, variant in pypi_releases(shipped_matrix):
        if release.version in recorded["torch"]:
            findings = compare_build(fw, release, variant, recorded_build(recorded, release.version))
            disagreements += [str(f) for f in findings if f.what == "python"]
    assert not disagreements, "\n".join(disagreements)


def companion_build(recorded: dict[str, Any], name: str, version: str) -> IndexBuild | None:
    entry = recorded[name].get(version)
    if not entry or not entry["wheel"]:
        return None
    requirements = tuple(Requirement(line) for line in entry["torch_requirements"])
    return IndexBuild(name, version, "", entry["wheel"], "3.11", requirements, ())


def test_companions_agree(shipped_matrix, recorded):
    disagreements = []
    for fw, release, variant in pypi_releases(shipped_matrix):
        if release.version not in recorded["torch"]:
            continue
        build = recorded_build(recorded, release.version)
        own = applicable(build.requirements, build.python)
        for name, version in release.companions:
            companion = Companion(name, version, companion_build(recorded, name, version), "not recorded")
            found = compare_companion(fw, release, fw.tag_of(variant.cuda), companion, own)
            disagreements += [str(f) for f in found if f.failing]
    assert not disagreements, "\n".join(disagreements)
