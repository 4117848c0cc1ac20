"""The pure rules behind compat: binary compatibility, GPU driver bounds, the CUDA runtime a lock installs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from imagectl.errors import InputError
from imagectl.matrix.archs import capability, describe, match_arch, newer_than_build, no_match
from imagectl.matrix.compat import arch_verdict, profile_verdict
from imagectl.matrix.gpus import arch_gpu, find_gpu, gpu_driver_reasons
from imagectl.matrix.model import Gpu
from imagectl.matrix.names import resolve_profile
from imagectl.matrix.runtime import LockedCuda, locked_cuda, runtime_pin, runtime_toolkit

TORCH_28_CU129 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")


@pytest.mark.parametrize("arch, cc", [
    ("sm_86", (8, 6)), ("sm_120", (12, 0)), ("compute_90", (9, 0)), ("sm_37", (3, 7)),
])
def test_capability(arch, cc):
    assert capability(arch) == cc


@pytest.mark.parametrize("gpu, build, code, rule", [
    ("sm_90", ("sm_80", "sm_90"), "sm_90", "exact"),
    ("sm_89", ("sm_80", "sm_86", "sm_90"), "sm_86", "same-major"),   # the newest cubin of the same major
    ("sm_121", TORCH_28_CU129, "sm_120", "same-major"),             # a cubin beats the PTX
    ("sm_103", ("sm_90", "sm_100"), "sm_100", "same-major"),
    ("sm_90", ("sm_80", "compute_80"), "compute_80", "ptx"),        # PTX JITs for any later arch
    ("sm_130", TORCH_28_CU129, "compute_120", "ptx"),
])
def test_match_arch(gpu, build, code, rule):
    found = match_arch(gpu, build)
    assert (found.code, found.rule) == (code, rule)


@pytest.mark.parametrize("gpu, build", [
    ("sm_90", ("sm_80", "sm_86")),          # another major: no cubin runs, and there is no PTX
    ("sm_80", ("sm_86",)),                   # a cubin never runs on a lower minor
    ("sm_60", ("sm_70", "compute_70")),      # PTX never runs on an older GPU
    ("sm_110", TORCH_28_CU129),              # Thor: no sm_11x cubin, and compute_120 is newer than 11.0
])
def test_no_code_runs(gpu, build):
    assert match_arch(gpu, build) is None


def test_the_rules_in_words():
    assert match_arch("sm_89", ("sm_86",)).why == "runs sm_86 code (same major, 8.9 >= 8.6)"
    assert match_arch("sm_90", ("compute_80",)).why == "PTX compute_80 JIT-compiled by the driver for sm_90"
    assert no_match("sm_60", ("sm_70",)) == "no cubin for sm_60 or an earlier sm_6x, and no PTX <= 6.0"
    assert describe(TORCH_28_CU129) == "sm_70..sm_120 + PTX compute_120"
    assert describe(("sm_50", "sm_90")) == "sm_50..sm_90, no PTX"
    assert newer_than_build("sm_100", ("sm_50", "sm_90")) and not newer_than_build("sm_60", ("sm_70",))


def test_gpu_driver_bounds():
    rtx = Gpu("RTX 5090", "sm_120", min_driver="570.86.16")
    assert gpu_driver_reasons(rtx, "570.86.16") == []
    assert gpu_driver_reasons(rtx, "565.57.01") == [
        "driver 565.57.01 predates RTX 5090 (sm_120): the first driver that knows it is 570.86.16 (R570)"]
    volta = Gpu("V100", "sm_70", last_branch=580)
    assert gpu_driver_reasons(volta, "580.159.03") == []
    assert "its last driver branch is R580" in gpu_driver_reasons(volta, "590.48.01")[0]
    assert gpu_driver_reasons(Gpu("A100", "sm_80"), "450.80.02") == []  # no bound recorded: nothing to say


def test_an_arch_alone_gets_the_bound_all_its_gpus_share(shipped_matrix):
    assert arch_gpu("sm_120", "sm_120", shipped_matrix).min_driver == "570.86.16"   # the earliest sm_120 GPU's
    assert arch_gpu("sm_86", "sm_86", shipped_matrix).min_driver is None            # A10 & co. have none recorded
    assert arch_gpu("sm_70", "sm_70", shipped_matrix).last_branch == 580
    assert arch_gpu("sm_999", "sm_999", shipped_matrix) == Gpu("sm_999", "sm_999")


@pytest.mark.parametrize("text, name, arch", [
    ("RTX 5090", "RTX 5090", "sm_120"), ("NVIDIA GeForce RTX 5090", "RTX 5090", "sm_120"),
    ("12.0", "sm_120", "sm_120"), ("sm_90", "sm_90", "sm_90"), ("H100 PCIe", "H100 PCIe", "sm_90"),
])
def test_find_gpu(shipped_matrix, text, name, arch):
    gpu = find_gpu(text, shipped_matrix)
    assert (gpu.name, gpu.arch) == (name, arch)


def test_find_gpu_refuses_an_unknown_model(shipped_matrix):
    with pytest.raises(InputError, match="not a known GPU"):
        find_gpu("Voodoo2", shipped_matrix)


def test_runtime_pin_and_locked_cuda(shipped_matrix):
    assert runtime_pin({"jax": "0.12.0.1", "nvidia-cuda-runtime-cu12": "12.9.79"}) == (
        "nvidia-cuda-runtime-cu12", "12.9.79")
    both = {"cuda-toolkit": "13.2.2", "nvidia-cuda-runtime": "13.2.86"}   # the runtime wins over the metapackage
    assert runtime_pin(both) == ("nvidia-cuda-runtime", "13.2.86")
    assert runtime_pin({"cuda-toolkit": "13.0.2"}) == ("cuda-toolkit", "13.0.2")
    assert runtime_pin({"numpy": "2.3.1"}) is None
    locked = locked_cuda({"nvidia-cuda-runtime-cu12": "12.9.79"}, shipped_matrix.cuda)
    assert (locked.pin, locked.cuda, locked.toolkit.version) == ("nvidia-cuda-runtime-cu12==12.9.79", "12.9", "12.9")
    assert locked_cuda({"nvidia-cuda-runtime-cu12": "12.10.1"}, shipped_matrix.cuda).toolkit is None


def test_runtime_toolkit_follows_the_lock(shipped_matrix):
    jax = resolve_profile("jax-0.12-cuda12", shipped_matrix)
    toolkit, notes = runtime_toolkit(jax, locked_cuda({"nvidia-cuda-runtime-cu12": "12.9.79"}, shipped_matrix.cuda))
    assert toolkit.version == "12.9" and "not the nominal 12.6" in notes[0]
    toolkit, notes = runtime_toolkit(jax, None)
    assert toolkit.version == "12.6" and notes[0].startswith("no lock applies")
    toolkit, notes = runtime_toolkit(jax, LockedCuda("nvidia-cuda-runtime-cu12==12.10.1", "12.10", None))
    assert toolkit.version == "12.6" and "which no [cuda] table declares" in notes[0]
    torch = resolve_profile("torch-2.8-cu128", shipped_matrix)   # pins its runtime: no lock, no note
    assert runtime_toolkit(torch, None) == (torch.toolkit, [])


def test_an_undeclared_newer_runtime_gets_the_floor_of_the_newest_release_below_it(shipped_matrix):
    """A JAX cuda13 lock made in November 2026 installs nvidia-cuda-runtime 13.5.37 (CUDA 13.5): without a
    [cuda."13.5"] table it is judged by the newest declared 13.x below it, never by the nominal 13.0."""
    jax = resolve_profile("jax-0.12-cuda13", shipped_matrix)
    assert jax.toolkit.version == "13.0"
    toolkits = {key: shipped_matrix.cuda[key] for key in ("12.9", "13.0", "13.2")}
    locked = locked_cuda({"nvidia-cuda-runtime": "13.5.37"}, toolkits)
    assert (locked.cuda, locked.toolkit, locked.below.version) == ("13.5", None, "13.2")
    toolkit, notes = runtime_toolkit(jax, locked)
    assert toolkit.version == "13.2" and toolkit.min_driver == shipped_matrix.cuda["13.2"].min_driver
    assert "judged by CUDA 13.2, the newest declared release below it" in notes[0]
    assert "lower bound of CUDA 13.5's (not recorded)" in notes[0]
    only_nominal = locked_cuda({"nvidia-cuda-runtime": "13.5.37"}, {"13.0": shipped_matrix.cuda["13.0"]})
    toolkit, notes = runtime_toolkit(jax, only_nominal)   # nothing newer declared: the nominal, as before
    assert toolkit.version == "13.0" and "judged by the nominal CUDA 13.0" in notes[0]
    declared = locked_cuda({"nvidia-cuda-runtime": "13.2.86"}, toolkits)
    assert declared.toolkit.version == "13.2" and declared.below is None


def test_cuda_13_3_has_nvidias_floor_and_13_5_is_judged_by_it(shipped_matrix):
    """Issue 34, part 5.  CUDA 13.3's floor is the driver NVIDIA ships with it: redistrib_13.3.1.json's nvidia_driver
    610.43.02 (NixOS/nixpkgs @65c8b54a keeps the manifest verbatim; the same manifest of 13.2.2 gives 595.71.05,
    Table 3's 13.2 Update 2 row).  13.4 and 13.5 have no primary floor here, so a lock of a 13.5 runtime is judged
    by 13.3's floor as a lower bound, and says so."""
    cuda133 = shipped_matrix.cuda["13.3"]
    assert (cuda133.release, cuda133.min_driver, cuda133.min_driver_compat) == ("13.3.1", "610.43.02", "580")
    assert cuda133.forward_compat == (535, 570, 580, 590, 595)
    assert "13.4" not in shipped_matrix.cuda and "13.5" not in shipped_matrix.cuda
    jax = resolve_profile("jax-0.12-cuda13", shipped_matrix)
    toolkit, notes = runtime_toolkit(jax, locked_cuda({"nvidia-cuda-runtime": "13.5.37"}, shipped_matrix.cuda))
    assert toolkit.min_driver == "610.43.02"
    assert "judged by CUDA 13.3" in notes[0] and "lower bound of CUDA 13.5's (not recorded)" in notes[0]


def test_ptx_needs_a_driver_with_full_support(shipped_matrix):
    """A GPU newer than every cubin runs the build's PTX only if the driver can JIT it: not under minor-version
    compatibility, whose driver predates the PTX."""
    base = resolve_profile("torch-2.8-cu129", shipped_matrix)   # 12.0+PTX; CUDA 12.9: full support from 575.57.08
    future = Gpu("sm_130", "sm_130")
    assert arch_verdict(base, future, "575.57.08")[0] == []
    assert "sm_130 PTX compute_120 JIT-compiled by the driver" in " ".join(arch_verdict(base, future, "575.57.08")[1])
    reasons, _ = arch_verdict(base, future, "570.124.06")
    assert "needs driver >= 575.57.08" in reasons[0] and "does not JIT newer PTX" in reasons[0]
    no_ptx = replace(base, variant=replace(base.variant, archs=base.variant.archs[:-1]))
    assert "a newer CUDA build is needed" in arch_verdict(no_ptx, future, "575.57.08")[0][0]


def test_a_build_without_an_arch_list_is_judged_by_nvcc(shipped_matrix):
    profile = resolve_profile("torch-2.6-cu126", shipped_matrix)   # no archs recorded
    reasons, notes = profile_verdict(profile, "570.124.06", find_gpu("H100", shipped_matrix))
    assert reasons == [] and "no arch list recorded for this build: judged by CUDA 12.6's nvcc targets" in notes
