"""compat, the image's NVIDIA_REQUIRE_CUDA and its entry script agree on every driver (issue 21, item 1).

The NVIDIA container runtime (legacy mode) hands every ``NVIDIA_REQUIRE_*`` value to ``nvidia-container-cli
configure --require`` and refuses the container when one is not met.  :func:`runtime_admits` re-implements that
check from NVIDIA/libnvidia-container ``src/cli/dsl.c`` (``dsl_evaluate``, ``evaluate_rule``,
``dsl_compare_version``, ``dsl_compare_string``) and ``src/cli/configure.c`` (the rules ``cuda``, ``driver``,
``arch``, ``brand``; evaluated per visible GPU), read in this session; nvidia-container-toolkit's Go port
(``internal/requirements/constraints/factory.go``, fetched: github:NVIDIA/nvidia-container-toolkit @d34b3046) has the
same grammar: "space-separated constraints being ORed together and comma-separated constraints being ANDed
together", operators ``!= <= >= = < >``.

The ``cuda`` property is the host driver's own CUDA version (``cuDriverGetVersion``); every release of a driver
branch reports its branch's.  :data:`DRIVER_CUDA` is that per branch: the CUDA release each branch was cut for (the
GA row of CUDA release notes Table 3: 450.36.06 CUDA 11.0, 470.42.01 11.4, 515.43.04 11.7, 520.61.05 11.8,
525.60.13 12.0, 530.30.02 12.1, 535.54.03 12.2, 545.23.06 12.3, 550.54.14 12.4, 555.42.02 12.5, 560.28.03 12.6,
570.26 12.8, 575.51.03 12.9, 580.65.06 13.0, 590.44.01 13.1, 595.45.04 13.2) and R565's 12.7 (no toolkit; "host cuda
driver 565.77 (cuda 12.7)", NVIDIA/nvidia-container-toolkit#940, refused by an image requiring cuda>=12.8).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from imagectl.config import Config
from imagectl.image_spec import ImageSpec
from imagectl.lock.runtime import lock_reader
from imagectl.matrix.compat import node_verdicts
from imagectl.matrix.model import Gpu
from imagectl.matrix.names import list_profiles, resolve_profile
from imagectl.render.context import image_env
from imagectl.render.dockerfile import context_files

DRIVER_CUDA = {450: "11.0", 470: "11.4", 515: "11.7", 520: "11.8", 525: "12.0", 530: "12.1", 535: "12.2",
               545: "12.3", 550: "12.4", 555: "12.5", 560: "12.6", 565: "12.7", 570: "12.8", 575: "12.9",
               580: "13.0", 590: "13.1", 595: "13.2"}

# Drivers of the cases: too old for anything (R450); forward-compatible branches (R470, R535, R550, R570, R580);
# branches no cuda-compat lists (R555, R560 for 13.x); earlier releases of a CUDA release's own branch (570.86.16,
# 580.65.06, 595.45.04: minor-version); the full-support floors (570.124.06, 580.95.05, 595.71.05); newer branches.
DRIVERS = ["450.80.02", "470.82.01", "515.65.01", "525.60.13", "530.41.03", "535.104.05", "550.54.15",
           "555.42.06", "560.35.03", "565.77", "570.86.16", "570.124.06", "575.57.08", "580.65.06", "580.95.05",
           "590.48.01", "595.45.04", "595.71.05"]
OPERATORS = ("=", "!=", "<", "<=", ">", ">=")


def compare_version(have: str, op: str, want: str) -> bool:
    """dsl_compare_version: dotted numbers compared field by field, missing fields as zero."""
    a, b = ([int(x) for x in v.split(".")] for v in (have, want))
    width = max(len(a), len(b))
    a, b = a + [0] * (width - len(a)), b + [0] * (width - len(b))
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def evaluate_rule(expr: str, props: dict[str, str | None]) -> bool:
    """evaluate_rule: NAME, then the whole run of operator characters (which must be one operator), then a value."""
    match = re.fullmatch(r"([^<>=!]+)([<>=!]+)(.+)", expr)
    if not match or match[2] not in OPERATORS:
        raise ValueError(f"invalid expression {expr!r}")
    name, op, value = match[1].lower(), match[2], match[3]
    if name not in ("cuda", "driver", "arch", "brand"):
        raise ValueError(f"invalid expression {expr!r}")  # an unknown rule fails the whole check in the C library
    have = props.get(name)
    if have is None:  # "No device is visible, assume ... is ok"
        return True
    if name == "brand":
        if op not in ("=", "!="):
            raise ValueError(f"invalid expression {expr!r}")
        return (have.lower() == value.lower()) == (op == "=")
    return compare_version(have, op, value)


def dsl_evaluate(predicate: str, props: dict[str, str | None]) -> bool:
    """dsl_evaluate: space-separated terms ORed, comma-separated factors ANDed, empty ones skipped."""
    terms = [t for t in predicate.split(" ") if t]
    return any(all(evaluate_rule(f, props) for f in term.split(",") if f) for term in terms)


def runtime_admits(env: dict[str, str], driver: str, brand: str | None) -> bool:
    """Whether the NVIDIA container runtime starts a container of ``env`` on ``driver`` with one GPU of ``brand``
    (None: no GPU visible): every NVIDIA_REQUIRE_* must hold, unless NVIDIA_DISABLE_REQUIRE is true."""
    if env.get("NVIDIA_DISABLE_REQUIRE", "").lower() in ("1", "true"):
        return True
    props = {"cuda": DRIVER_CUDA[int(driver.split(".")[0])], "driver": driver, "brand": brand, "arch": None}
    return all(dsl_evaluate(v, props) for k, v in env.items() if k.startswith("NVIDIA_REQUIRE_"))


def test_the_reimplementation_follows_the_runtimes_grammar():
    # from nvidia-container-toolkit's own tests (internal/requirements/constraints/factory_test.go cases) and the
    # issue's: an image requiring cuda>=12.8 is refused on 550.144.03 unless a brand/branch term admits it
    assert dsl_evaluate("cuda>=12.8", {"cuda": "12.8", "driver": "570.86.16", "brand": "geforce"})
    assert not dsl_evaluate("cuda>=12.8", {"cuda": "12.4", "driver": "550.144.03", "brand": "tesla"})
    nvidia_12_8 = "cuda>=12.8 brand=tesla,driver>=550,driver<551 brand=nvidia,driver>=550,driver<551"
    assert dsl_evaluate(nvidia_12_8, {"cuda": "12.4", "driver": "550.144.03", "brand": "Tesla"})
    assert not dsl_evaluate(nvidia_12_8, {"cuda": "12.4", "driver": "550.144.03", "brand": "geforce"})
    assert not dsl_evaluate(nvidia_12_8, {"cuda": "12.5", "driver": "555.42.06", "brand": "tesla"})
    assert dsl_evaluate(nvidia_12_8, {"cuda": "12.4", "driver": "550.54.15", "brand": None})  # no GPU visible
    assert compare_version("12.8", "=", "12.8.0") and compare_version("550.163.01", "<", "551")
    with pytest.raises(ValueError):
        evaluate_rule("cuda=>12.8", {"cuda": "12.8"})


def cubin_gpu(profile, segment: str) -> Gpu:
    """A GPU the profile's build has a cubin for, of ``segment``, with no driver list of its own: only the driver and
    the runtime decide."""
    arch = next(a for a in (profile.variant.archs or profile.toolkit.archs) if a.startswith("sm_"))
    return Gpu(name=f"a {segment} {arch} GPU", arch=arch, segment=segment)


@pytest.fixture(scope="module")
def shipped(request):
    from pathlib import Path

    from imagectl.matrix.load import load_matrix

    matrix = load_matrix([Path(__file__).resolve().parents[3] / "matrices"])
    return matrix, lock_reader(Config(), matrix)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("segment, brand", [("datacenter", "tesla"), ("datacenter", "nvidia"),
                                            ("consumer", "geforce"), ("consumer", "geforcertx")])
def test_the_rendered_requirement_admits_exactly_what_compat_calls_compatible(shipped, driver, segment, brand):
    """Legacy mode: what the runtime starts is what compat calls compatible -- except a consumer GPU that NVIDIA's
    pre-12.6 images admit (geforce brands) on a forward-compatible branch: the runtime starts it and CUDA then fails
    with error 804, so compat refuses it and says so."""
    matrix, locks = shipped
    for profile in list_profiles(matrix):
        gpu = cubin_gpu(profile, segment)
        verdict = node_verdicts([profile], driver, gpu, locks, runtime="legacy")[0]
        admitted = runtime_admits(image_env(profile), driver, brand)
        if admitted and not verdict.ok and segment == "consumer":
            assert "error 804" in " ".join(verdict.reasons), (profile.name, driver, verdict.reasons)
            assert "brand=geforce," in image_env(profile)["NVIDIA_REQUIRE_CUDA"]
            continue
        assert verdict.ok is admitted, (profile.name, driver, brand, verdict.reasons, image_env(profile))


@pytest.mark.parametrize("name, driver, brand, runs, why", [
    # minor-version compatibility: an R570 release before 12.8 Update 1's 570.124.06 reports CUDA 12.8
    ("torch-2.8-cu128", "570.86.16", "geforce", True, "cuda>=12.8"),
    # the full-support floors
    ("torch-2.8-cu128", "570.124.06", "geforce", True, "cuda>=12.8"),
    ("torch-2.15-cu132", "595.71.05", "geforce", True, "cuda>=13.2"),
    # a too-old driver: R450 is no branch of 11.7.1's cuda-compat (R470 only)
    ("torch-2.0-cu117", "450.80.02", "tesla", False, ""),
    # a tesla branch: 12.8.2 lists R550 for data-center brands only
    ("torch-2.8-cu128", "550.54.15", "tesla", True, "brand=tesla,driver>=550,driver<551"),
    ("torch-2.8-cu128", "550.54.15", "geforce", False, ""),
    # 13.2.1 lists R580 and R590 (13.x's own minor-version range) for data-center brands only
    ("torch-2.15-cu132", "580.95.05", "tesla", True, "brand=tesla,driver>=580,driver<581"),
    ("torch-2.15-cu132", "580.95.05", "geforce", False, ""),
])
def test_the_cases_of_the_issue(shipped, name, driver, brand, runs, why):
    matrix, locks = shipped
    profile = resolve_profile(name, matrix)
    dockerfile = context_files(ImageSpec(profile), Config())["Dockerfile"].decode()
    rendered = re.search(r'NVIDIA_REQUIRE_CUDA="([^"]*)"', dockerfile)[1]
    assert rendered == image_env(profile)["NVIDIA_REQUIRE_CUDA"] and (not why or why in rendered.split(" "))
    assert "NVIDIA_DISABLE_REQUIRE" not in dockerfile
    assert runtime_admits({"NVIDIA_REQUIRE_CUDA": rendered}, driver, brand) is runs
    segment = "datacenter" if brand == "tesla" else "consumer"
    assert node_verdicts([profile], driver, cubin_gpu(profile, segment), locks, runtime="legacy")[0].ok is runs


def test_the_images_requirement_is_nvidia_s_own_for_the_release(shipped):
    """The rendered value is NVIDIA's base image's (dist/12.8.2/ubuntu2204/base/Dockerfile, mirror
    pranavmishra90/nvidia-container-images-cuda @f577282f), term for term."""
    matrix, _ = shipped
    brands = ["unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws",
              "cloudgaming"]
    nvidia = "cuda>=12.8 " + " ".join(f"brand={b},driver>={n},driver<{n + 1}"
                                      for n in (535, 550, 560, 565, 570, 580) for b in brands)
    assert image_env(resolve_profile("torch-2.8-cu128", matrix))["NVIDIA_REQUIRE_CUDA"] == nvidia


# --- the entry script says the same ----------------------------------------------------------------------------


def entry_says(script: str, driver: str, tmp_path) -> str:
    """What the rendered entry script says on a node whose nvidia-smi reports ``driver``: "" (nothing), "minor",
    "forward" or "refused"."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("sh", "timeout"):
        if not (bin_dir / tool).exists():
            os.symlink(shutil.which(tool), bin_dir / tool)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho {driver}\n")
    smi.chmod(0o755)
    path = tmp_path / "entry.sh"
    path.write_text(script)
    err = subprocess.run([shutil.which("sh"), str(path), "sh", "-c", ":"], capture_output=True, text=True,
                         env={"PATH": str(bin_dir)}, timeout=30).stderr
    for word, what in (("minor-version", "minor"), ("forward compatibility", "forward"), ("will not run", "refused")):
        if word in err:
            return what
    assert err == "", err
    return ""


COMPAT_SAYS = {"full support": "", "minor-version compatibility": "minor",
               "forward compatibility (cuda-compat, data-center GPUs only)": "forward"}


@pytest.mark.parametrize("name", ["torch-2.0-cu117", "torch-2.0-cu118", "torch-2.3-cu121", "torch-2.6-cu124",
                                  "torch-2.7-cu126", "torch-2.8-cu128", "torch-2.12-cu130", "torch-2.15-cu132"])
def test_the_entry_script_agrees_with_compat_on_every_driver(shipped, tmp_path, name):
    matrix, locks = shipped
    profile = resolve_profile(name, matrix)
    script = context_files(ImageSpec(profile), Config())["imagectl-entry.sh"].decode()
    for driver in DRIVERS:
        verdict = node_verdicts([profile], driver, None, locks, runtime="legacy")[0]
        expected = COMPAT_SAYS[verdict.mechanism] if verdict.ok else "refused"
        assert entry_says(script, driver, tmp_path) == expected, (name, driver, verdict)
