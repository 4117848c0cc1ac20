"""Python variants of the shipped matrix (issue 11, items 1 and 2): pins per Python from the wheels' markers,
Pythons a release cannot be installed on, the Python an OS provides, and every resolvable name passing every rule.

The facts come from the recorded PyPI metadata (tests/fixtures/pypi/torch-wheels.json): torch's Requires-Dist,
the wheel tags of torchvision, torchaudio and triton.  No network.
"""

from __future__ import annotations

import json

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from imagectl.errors import InputError, UnknownProfileError
from imagectl.matrix.names import list_profiles, resolvable_profiles, resolve_profile, unbuildable_variants
from imagectl.matrix.rules import MATRIX_RULES, run_rules
from imagectl.matrix.validate import validate_matrix
from imagectl.pypi import tag_runs_on_cpython
from imagectl.upstream.index_builds import applicable, exact_version


def pypi_builds(matrix):
    fw = matrix.frameworks["torch"]
    for release in fw.releases:
        for variant in release.variants:
            if variant.pypi:
                yield fw, release, variant


def requirements(recorded, version):
    return [Requirement(line) for line in recorded["torch"][version]["wheel"]["requires_dist"]]


def installs_on(tags, python) -> bool:
    """Whether a Linux x86_64 wheel with one of ``tags`` (``cp312-abi3``) installs on CPython ``python``."""
    return any(tag_runs_on_cpython(Tag(*t.split("-", 1), "manylinux_2_28_x86_64"), python) for t in tags)


# --- item 1: wheels per Python -----------------------------------------------------------------------------


def test_one_wheels_markers_speak_for_every_python(recorded):
    """Every CPython wheel of a release carries the same == pins and markers (only 2.4.x cp312 adds an unpinned
    setuptools), so the recorded cp311 wheel's markers, evaluated per Python, are every wheel's."""
    for version, entry in recorded["torch"].items():
        for abi, change in entry.get("abi_metadata", {}).items():
            assert "error" not in change, (version, abi, change)
            changed = [Requirement(line) for line in change["added"] + change["removed"]]
            assert all(exact_version(r) is None for r in changed), (version, abi, change)
    assert set(recorded["torch"]["2.4.1"]["abi_metadata"]) == {"cp312"}


def test_pins_per_python_are_the_wheels_exact_pins_there(shipped_matrix, recorded):
    """For every Python of every PyPI build, the pins that apply there are exactly the wheel's == pins whose
    markers hold there (triton==2.3.1; python_version < "3.12" is pinned on 3.8 .. 3.11 only)."""
    wrong = []
    for fw, release, variant in pypi_builds(shipped_matrix):
        skip = {fw.package, *fw.companions}
        for python in release.python:
            exact = {canonicalize_name(r.name): exact_version(r)
                     for r in applicable(requirements(recorded, release.version), python)}
            wanted = {n: v for n, v in exact.items() if v is not None and n not in skip}
            have = {canonicalize_name(n): v for n, v in variant.pins_for(python)}
            if have != wanted:
                wrong.append(f"torch {release.version} on {python}: {have} != {wanted}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("version, below", [("2.2.1", "3.12"), ("2.2.2", "3.12"), ("2.3.0", "3.12"),
                                            ("2.3.1", "3.12"), ("2.4.1", "3.13"), ("2.5.1", "3.13")])
def test_triton_is_pinned_only_where_the_marker_holds(shipped_matrix, version, below):
    release = next(r for r in shipped_matrix.frameworks["torch"].releases if r.version == version)
    variant = next(v for v in release.variants if v.pypi)
    assert dict(variant.pin_python)["triton"] == f"<{below}"
    older = f"3.{int(below.split('.')[1]) - 1}"
    assert "triton" in dict(variant.pins_for(older)) and "triton" not in dict(variant.pins_for(below))


def test_profile_packages_and_lock_inputs_follow_the_python(shipped_matrix):
    from imagectl.lock.target import lock_inputs

    p = resolve_profile("torch-2.3.1-cu121-ubuntu20.04-py3.9", shipped_matrix)
    assert dict(p.packages)["triton"] == "2.3.1" and "triton==2.3.1" in lock_inputs(p)
    on_312 = resolve_profile("torch-2.7.1-cu126-ubuntu24.04", shipped_matrix)
    assert dict(on_312.packages)["triton"] == "3.3.1"  # 2.7 pins triton on every Python


def unavailable_from_wheels(recorded, release) -> dict[str, list[str]]:
    """Python -> what cannot be installed there: a companion none of whose wheels installs on it, or a
    required triton none of whose matching releases has a wheel for it (or an sdist)."""
    out: dict[str, list[str]] = {}
    reqs = requirements(recorded, release.version)
    for python in release.python:
        why = [f"{name} {version}" for name, version in release.companions
               if not installs_on(recorded[name][version]["wheel_tags"], python)]
        for req in (r for r in applicable(reqs, python) if r.name == "triton"):
            ok = [v for v, e in recorded["triton"].items() if req.specifier.contains(Version(v))
                  and (installs_on(e["wheel_tags"], python) or e["sdist"])]
            why += [] if ok else [f"triton{req.specifier}"]
        if why:
            out[python] = why
    return out


def test_unavailable_pythons_are_those_a_companion_or_triton_cannot_install(shipped_matrix, recorded):
    """A release's ``unavailable`` Pythons are exactly those where a companion, or the triton torch requires
    there, has no wheel that installs (a cp312-abi3 wheel installs on 3.12 and later)."""
    wrong = []
    for _, release, _ in pypi_builds(shipped_matrix):
        found = unavailable_from_wheels(recorded, release)
        if set(found) != set(dict(release.unavailable)):
            wrong.append(f"torch {release.version}: matrix {dict(release.unavailable)}, wheels {found}")
    assert not wrong, "\n".join(wrong)


def test_the_unavailable_pythons_of_the_shipped_matrix(shipped_matrix, recorded):
    releases = {r.version: r for r in shipped_matrix.frameworks["torch"].releases}
    assert {v: [p for p, _ in r.unavailable] for v, r in releases.items() if r.unavailable} == {
        "2.5.0": ["3.13"], "2.5.1": ["3.13"]}
    assert "torchvision 0.20.1 and torchaudio 2.5.1 publish no cp313 wheel" in releases["2.5.1"].unavailable[0][1]
    # triton 3.9.0 has no cp313-cp313 wheel, but its cp312-abi3 wheel installs on 3.13: torch 2.15 is installable
    assert "cp312-abi3" in recorded["triton"]["3.9.0"]["wheel_tags"]
    assert releases["2.15.0"].unavailable_reason("3.13") is None


def test_resolve_refuses_an_unavailable_python_naming_why_and_what_works(shipped_matrix):
    with pytest.raises(UnknownProfileError) as refused:
        resolve_profile("torch-2.5.1-cu124-py3.13", shipped_matrix)
    message = str(refused.value)
    assert isinstance(refused.value, InputError) and refused.value.exit_code == 2
    assert "torch 2.5.1 cannot be installed on Python 3.13: torchvision 0.20.1 and torchaudio 2.5.1" in message
    assert "names that work: torch-2.5.1-cu124, torch-2.5.1-cu124-py3.11, torch-2.5.1-cu124-ubuntu20.04" in message
    assert all(resolve_profile(n, shipped_matrix) for n in message.split("names that work: ")[1].split(", "))


def test_show_and_check_of_an_unavailable_python(run_cli):
    shown = run_cli("show", "torch-2.5.0-cu124-py3.13")
    assert shown.code == 2 and "cannot be installed on Python 3.13" in shown.err
    checked = run_cli("check", "torch==2.5.1", "cuda=12.4", "python=3.13", "--json")
    verdict = json.loads(checked.out)
    assert checked.code == 1 and verdict["compatible"] is False and verdict["profile"] is None
    assert verdict["reasons"][0].startswith("torch 2.5.1 cannot be installed on Python 3.13: torchvision 0.20.1")


# --- item 2: Python from the OS ----------------------------------------------------------------------------


def test_a_python_no_os_of_the_cuda_provides_is_refused(shipped_matrix):
    with pytest.raises(UnknownProfileError) as refused:
        resolve_profile("torch-2.3.1-cu121-py3.12", shipped_matrix)
    message = str(refused.value)
    assert ("Python 3.12 comes neither as python3 nor from the archive of any OS of CUDA 12.1's base images"
            " (ubuntu22.04 has 3.10, 3.11; ubuntu20.04 has 3.8, 3.9)") in message
    assert message.endswith("names that work: torch-2.3.1-cu121, torch-2.3.1-cu121-py3.11,"
                            " torch-2.3.1-cu121-ubuntu20.04, torch-2.3.1-cu121-ubuntu20.04-py3.9")
    with pytest.raises(UnknownProfileError, match="the archive of ubuntu22.04 \\(ubuntu22.04 has 3.10, 3.11\\)"):
        resolve_profile("torch-2.7-cu126-ubuntu22.04-py3.12", shipped_matrix)


@pytest.mark.parametrize("name, python, canonical, os_name", [
    ("torch-2.7-cu126-py3.12", None, "torch-2.7-cu126-ubuntu24.04", "ubuntu24.04"),
    ("torch-2.7-cu126", "3.12", "torch-2.7-cu126-ubuntu24.04", "ubuntu24.04"),  # --python picks the OS too
    ("torch-2.3-cu121-py3.9", None, "torch-2.3-cu121-ubuntu20.04-py3.9", "ubuntu20.04"),
    ("torch-2.3-cu121-py3.11", None, "torch-2.3-cu121-py3.11", "ubuntu22.04"),
])
def test_a_name_without_an_os_gets_one_that_provides_its_python(shipped_matrix, name, python, canonical, os_name):
    p = resolve_profile(name, shipped_matrix, python)
    assert (p.name, p.os.name) == (canonical, os_name)
    again = resolve_profile(p.name, shipped_matrix)
    assert (again.name, again.os.name, again.python) == (p.name, p.os.name, p.python)


def test_check_applies_python_available(run_cli):
    r = run_cli("check", "torch==2.3.1", "cuda=12.1", "python=3.12")
    assert r.code == 1 and r.out.startswith("incompatible") and "any OS of CUDA 12.1's base images" in r.out
    r = run_cli("check", "torch==2.7.1", "cuda=12.6", "python=3.12")
    assert r.code == 0 and r.out.startswith("compatible (torch-2.7.1-cu126-ubuntu24.04)")


def test_every_resolvable_profile_passes_every_rule(shipped_matrix):
    profiles = resolvable_profiles(shipped_matrix)
    assert run_rules(profiles, MATRIX_RULES) == [] and unbuildable_variants(shipped_matrix) == []
    for p in profiles:  # each resolves, by its own name, to itself
        again = resolve_profile(p.name, shipped_matrix)
        assert (again.release.version, again.variant.cuda, again.os.name, again.flavor, again.python) == (
            p.release.version, p.variant.cuda, p.os.name, p.flavor, p.python), p.name


def test_validate_covers_every_release_python_os_and_flavour(shipped_matrix):
    report = validate_matrix(shipped_matrix)
    names = {p.name for p in resolvable_profiles(shipped_matrix)}
    assert report.violations == () and report.profiles == len(names) > len(list_profiles(shipped_matrix))
    assert {"torch-2.3.1-cu121-ubuntu20.04-py3.9", "torch-2.3.0-cu121-py3.11", "torch-2.7.1-cu126-ubuntu24.04-devel",
            "jax-0.10.2-cuda12-ubuntu24.04"} <= names
    assert not any(n.startswith("torch-2.5.1-cu124") and n.endswith("py3.13") for n in names)
    assert {"python_installable", "unverified_stated"} <= set(report.rules)


def test_validate_flags_a_build_no_os_can_install(matrix_copy):
    matrix_copy.edit("torch.toml", 'version = "2.3.0"\npython = ["3.8", "3.9", "3.10", "3.11", "3.12"]',
                     'version = "2.3.0"\npython = ["3.8", "3.9"]')
    [violation] = validate_matrix(matrix_copy.load()).violations
    assert violation.rule == "python-available" and violation.subject == "torch-2.3.0-cu121"
    assert "no name of this build resolves" in violation.message


# --- the TOML representation: what the loader accepts and refuses ------------------------------------------


@pytest.mark.parametrize("old, new, message", [
    ('"triton" = { version = "2.3.1", python = "<3.12" } }\n\n  [[release.variant]]\n  cuda = "11.8"',
     '"triton" = { version = "2.3.1", python = "below 3.12" } }\n\n  [[release.variant]]\n  cuda = "11.8"',
     "'below 3.12' is not a PEP 440 specifier"),
    ('"triton" = { version = "2.3.1", python = "<3.12" } }', '"triton" = { version = "2.3.1", marker = "x" } }',
     "a table pin has exactly the keys version and python"),
    ('companions = { torchvision = "0.18.1", torchaudio = "2.3.1" }',
     'companions = { torchvision = "0.18.1", torchaudio = "2.3.1" }\nunavailable = { "3.13" = "no wheel" }',
     "unavailable: Python '3.13' is not in its python list"),
    ('companions = { torchvision = "0.18.1", torchaudio = "2.3.1" }',
     'companions = { torchvision = "0.18.1", torchaudio = "2.3.1" }\nunavailable = { "3.12" = " " }',
     "the reason must be a non-empty string"),
    ('  cuda = "11.8"\n', '  cuda = "11.8"\n  unverified = ""\n', "unverified must be a non-empty string"),
    ('check = "torch"', 'check = "torch"\nlock_requires = "numpy"', "lock_requires must be a list of strings"),
    ('check = "torch"', 'check = "torch"\nlock_requires = ["numpy; os_name == \'nt\'"]', "lock_requires"),
])
def test_the_loader_checks_the_new_keys(matrix_copy, old, new, message):
    matrix_copy.edit("torch.toml", old, new)
    matrix_copy.refused(message)


def test_the_loader_reads_the_new_keys(matrix):
    release = next(r for r in matrix.frameworks["torch"].releases if r.version == "2.3.1")
    variant = next(v for v in release.variants if v.pypi)
    assert variant.pin_python == (("triton", "<3.12"),) and dict(variant.pins)["triton"] == "2.3.1"
    assert release.unavailable == () and variant.verified and variant.unverified is None


def test_a_name_whose_profile_breaks_a_rule_is_refused(matrix_copy):
    matrix_copy.edit("torch.toml", 'cudnn = "8.7.0.84"', 'cudnn = "8.9.7.29"')
    broken = matrix_copy.load()
    with pytest.raises(UnknownProfileError, match=r"\[cudnn-pin-agrees\] cudnn = 8.9.7.29 but pins say .*"
                                                  "no name of this build works"):
        resolve_profile("torch-2.3-cu118", broken)
    assert resolve_profile("torch-2.3-cu121", broken).name == "torch-2.3-cu121"
