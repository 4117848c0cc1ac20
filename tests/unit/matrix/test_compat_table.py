"""compat over the shipped matrix: (GPU, driver, profile) -> verdict, each row with the source that decides it.

Sources (the same tags as the matrix files cite):
  [archs]   the `archs` of the torch variant in matrices/torch.toml (TORCH_CUDA_ARCH_LIST of its build script, or
            torch.cuda.get_arch_list() measured on the wheel; see that file's header)
  [bincompat] CUDA C++ Programming Guide, "Binary Compatibility": a cubin for X.y runs on X.z with z >= y only
  [okm]     the first NVIDIA/open-gpu-kernel-modules release whose product table names the GPU (matrices/cuda.toml)
  [archmatrix] NVIDIA Data Center Drivers, "CUDA Toolkit, Driver, and Architecture Matrix" (Volta: last R580)
  [relnotes] CUDA release notes, Table 3 and the minor-version compatibility floors (matrices/cuda.toml)
  [lock]    matrices/locks/jax-0.12.0.1-cuda12-py3.12.txt: nvidia-cuda-runtime-cu12==12.9.79
  [list]    matrices/gpu-drivers.toml: the releases whose open-gpu-kernel-modules README "Compatible GPUs" table names
            the GPU (tools/gpu_driver_lists.py over every release tag 515.48.07 .. 595.45.04)
  [require] NVIDIA_REQUIRE_CUDA of NVIDIA's base image of the profile's CUDA release (dist/<release>/ubuntu2204/base/
            Dockerfile): `cuda>=X.Y` (the driver's own CUDA version: every release of a branch reports its branch's)
            or, on a listed forward-compatible branch, a data-center brand; the image renders the same
  [fwdcompat] docs.nvidia.com/deploy/cuda-compatibility, "Forward Compatibility": data-center GPUs only
  [host]    GH200, GB200, GB300 and GB10 come in Grace (Arm, aarch64) hosts (issue 20; sources in matrices/cuda.toml
            [gpus] and tests/unit/matrix/test_compat_hosts.py): only an image with a linux/arm64 platform starts there
  [platforms] matrices/platforms.toml: the builds whose PyPI aarch64 wheels require CUDA wheels (torch 2.11 .. 2.15,
            jax 0.10 .. 0.12); torch 2.8 .. 2.10's aarch64 wheels are CPU-only
"""

from __future__ import annotations

import pytest

from imagectl.config import Config
from imagectl.lock.runtime import lock_reader
from imagectl.matrix.compat import node_verdicts, profile_verdict
from imagectl.matrix.gpus import find_gpu
from imagectl.matrix.names import resolve_profile

ROWS = [
    # GPU, driver, profile, runs?
    # The case: R550 cannot drive an RTX 5090, whose first driver is 570.86.16 [okm]
    ("RTX 5090", "550.54.15", "torch-2.7-cu128", False),
    # 2.7 cu128 ships sm_120 [archs: CorridorKey#141]; 570.86.16 >= 12.x's 525.60.13: minor-version compat [relnotes]
    ("RTX 5090", "570.86.16", "torch-2.7-cu128", True),
    # 2.6.0+cu124 is sm_50..sm_90 without PTX [archs: pytorch#144071]: nothing an sm_120 GPU can run
    ("RTX 5090", "580.95.05", "torch-2.6-cu124", False),
    # 2.8/2.10 cu128 start at sm_70 [archs: #157558, #182250]; no cubin of major 6, no PTX
    ("P100", "580.95.05", "torch-2.8-cu128", False),
    ("P100", "580.95.05", "torch-2.10-cu128", False),
    # 2.7 cu126 still has sm_60 [archs: CorridorKey#141]
    ("P100", "570.124.06", "torch-2.7-cu126", True),
    # 2.7 cu128 dropped sm_70 (PR #147607) [archs]; 2.8 brought it back (PR #157558); 2.11 dropped it (#182250)
    ("V100", "570.124.06", "torch-2.7-cu128", False),
    ("V100", "570.124.06", "torch-2.8-cu128", True),
    ("V100", "580.95.05", "torch-2.11-cu128", False),
    # Volta's last driver branch is R580 [archmatrix]: a 595 driver no longer drives a V100
    ("V100", "595.58.03", "torch-2.7-cu126", False),
    # sm_86 code runs on sm_89 (same major, 8.9 >= 8.6) [bincompat]; 2.0 cu117 is sm_37..sm_86 [archs: builder 2.0]
    ("RTX 4090", "535.104.05", "torch-2.0-cu117", True),
    ("L4", "535.104.05", "torch-2.0-cu117", True),
    # ... but not on sm_90 (another major) and 2.0 cu117 has no PTX [bincompat]
    ("H100", "535.104.05", "torch-2.0-cu117", False),
    # 2.0.1 cu118 carries sm_90 [archs: builder release/2.0:62]
    ("H100", "535.104.05", "torch-2.0-cu118", True),
    # R515 predates Hopper: H100's first driver is 520.56.06 [okm]
    ("H100", "515.65.01", "torch-2.0-cu118", False),
    # H200 is in no R535 list, and in R550 only from 550.40.65 to 550.40.85 and from 550.90.07 on [list]
    ("H200", "535.104.05", "torch-2.3-cu121", False),
    ("H200", "550.54.15", "torch-2.3-cu121", False),   # issue 21: absent from 550.54.14 .. 550.78
    ("H200", "550.90.07", "torch-2.3-cu121", True),
    # H100 SXM is absent from 525.60.13 and 525.78.01 [list]; torch 2.0 cu118 runs on R525 (CUDA 11.8's R520 below)
    ("H100 SXM", "525.60.13", "torch-2.0-cu118", False),
    ("H100 SXM", "525.85.05", "torch-2.0-cu118", True),
    # L4: listed 525.47.22 .. 525.47.35, then from 525.105.17 [list]: not in 525.60.13's list
    ("L4", "525.60.13", "torch-2.0-cu117", False),
    ("L4", "525.105.17", "torch-2.0-cu117", True),
    # GB10 is listed in 580.94.13 and from 580.119.02, not in 580.95.05 or 580.105.08 [list]; and a GB10 (DGX Spark)
    # sits in an aarch64 Grace host, where no image here (linux/amd64 only) starts [host]
    ("GB10", "580.95.05", "torch-2.8-cu128", False),
    ("GB10", "580.105.08", "torch-2.8-cu128", False),
    ("GB10", "580.119.02", "torch-2.8-cu128", False),
    ("GH200", "580.95.05", "torch-2.8-cu128", False),
    ("GB200", "580.95.05", "torch-2.11-cu130", True),   # linux/arm64 [platforms]
    ("GH200", "580.95.05", "torch-2.10-cu128", False),  # its aarch64 wheel is CPU-only [platforms]
    ("GH200", "580.95.05", "jax-0.12-cuda12", True),    # linux/arm64 [platforms]
    ("sm_121", "580.119.02", "torch-2.8-cu128", False),  # every known sm_121 GPU (GB10) is in an aarch64 host
    ("sm_90", "580.95.05", "torch-2.8-cu128", True),     # H100 is in x86_64 hosts too
    # B300 (sm_103) runs the sm_100 cubin [bincompat] (an HGX B300 host is x86_64)
    ("B300", "580.95.05", "torch-2.11-cu130", True),
    ("B300", "575.57.08", "torch-2.8-cu128", False),
    # JAX cuda12 installs CUDA 12.9 [lock], whose nvcc targets sm_100; 575.57.08 is 12.9's floor [relnotes]
    ("B200", "575.57.08", "jax-0.12-cuda12", True),
    ("B200", "560.35.05", "jax-0.12-cuda12", False),   # B200's first driver is 570.86.15 [okm]
    # no lock for cuda13: the nominal CUDA 13.0 (sm_100 target, floor 580) [relnotes]
    ("B200", "580.95.05", "jax-0.12-cuda13", True),
    # an arch alone: every known sm_120 GPU needs 570.86.16 or later [okm]
    ("sm_120", "560.35.05", "torch-2.8-cu128", False),
    # 450.80.02 is CUDA 11.x's minor-version floor [relnotes], but R450 is older than 11.7's R515 and not a branch its
    # cuda-compat supports (11.7.1 lists R470 only) [require]: the runtime refuses the image
    ("A100", "450.80.02", "torch-2.0-cu117", False),
    ("A100", "470.82.01", "torch-2.0-cu117", True),    # R470: forward compatibility, a data-center GPU [require]
    # 12.1.1's NVIDIA_REQUIRE_CUDA admits R470 (and R525) for data-center brands: forward compatibility [require]
    ("T4", "470.82.01", "torch-2.3-cu121", True),
    ("RTX 3090", "470.82.01", "torch-2.3-cu121", False),  # ... not for GeForce [require] [fwdcompat]
    # issue 21: a data-center GPU on a driver below the CUDA release's own branch runs under forward compatibility
    # where the release's cuda-compat supports that branch [require]: R550 for 12.8.2, R570 and R535 for 13.0.3,
    # R580 for 13.2.1; a consumer GPU on the same driver cannot [fwdcompat]
    ("H100", "550.54.15", "torch-2.8-cu128", True),
    ("RTX 4090", "550.54.15", "torch-2.8-cu128", False),
    ("H100", "570.124.06", "torch-2.12-cu130", True),
    ("A100", "535.104.05", "torch-2.12-cu130", True),
    ("H100", "580.95.05", "torch-2.15-cu132", True),
    ("RTX 5090", "580.95.05", "torch-2.15-cu132", False),
    ("H100", "550.54.15", "jax-0.12-cuda12", True),       # the 12.6.3 base admits R550 [require]
    ("RTX 4090", "550.54.15", "jax-0.12-cuda12", False),
    # 12.8.2's cuda-compat no longer lists R470 (12.8.1's did) [require]: too old for torch 2.8 cu128 anywhere
    ("A100", "470.82.01", "torch-2.8-cu128", False),
    # R555 is no forward-compatible branch of 12.8.2 [require]: refused although >= 12.x's minor floor 525.60.13
    ("H100", "555.42.06", "torch-2.8-cu128", False),
    # the full-support floor: 570.124.06 is 12.8 Update 1's [relnotes]; an earlier R570 release is started
    # (it reports CUDA 12.8) and runs under minor-version compatibility
    ("H100", "570.124.06", "torch-2.8-cu128", True),
    ("RTX 4090", "570.86.16", "torch-2.8-cu128", True),
    # a workstation GPU is not a data-center GPU: no forward compatibility [fwdcompat]
    ("RTX 6000 Ada", "550.54.15", "torch-2.8-cu128", False),
]

MECHANISMS = [
    # profile, driver, GPU, the mechanism compat names
    ("torch-2.8-cu128", "570.124.06", "H100", "full support"),
    ("torch-2.8-cu128", "570.86.16", "RTX 4090", "minor-version compatibility"),
    ("torch-2.8-cu128", "550.54.15", "H100", "forward compatibility (cuda-compat, data-center GPUs only)"),
    ("jax-0.12-cuda12", "550.54.15", "H100",
     "forward compatibility (cuda-compat, data-center GPUs only) and minor-version compatibility"),
]


@pytest.fixture
def locks(shipped_matrix):
    return lock_reader(Config(), shipped_matrix)


@pytest.mark.parametrize("gpu, driver, name, runs", ROWS, ids=[f"{g}-{d}-{n}" for g, d, n, _ in ROWS])
def test_compat_table(shipped_matrix, locks, gpu, driver, name, runs):
    reasons, notes = profile_verdict(resolve_profile(name, shipped_matrix), driver, find_gpu(gpu, shipped_matrix),
                                     locks)
    assert (not reasons) is runs, (reasons, notes)


def test_the_verdict_says_which_rule_applied(shipped_matrix, locks):
    def verdict(gpu, driver, name):
        return profile_verdict(resolve_profile(name, shipped_matrix), driver, find_gpu(gpu, shipped_matrix), locks)

    _, notes = verdict("RTX 4090", "535.104.05", "torch-2.0-cu117")
    assert "RTX 4090 (sm_89) runs sm_86 code (same major, 8.9 >= 8.6)" in notes
    reasons, _ = verdict("P100", "580.95.05", "torch-2.8-cu128")
    assert "no cubin for sm_60 or an earlier sm_6x, and no PTX <= 6.0" in reasons[0]
    assert "(sm_70..sm_120, no PTX)" in reasons[0] and "not built for it" in reasons[0]
    reasons, _ = verdict("H100", "535.104.05", "torch-2.0-cu117")
    assert "a newer CUDA build is needed" in reasons[0]
    reasons, _ = verdict("RTX 5090", "550.54.15", "torch-2.7-cu128")
    assert "RTX 5090 is a consumer GPU: NVIDIA_REQUIRE_CUDA admits no GeForce brand on R550" in reasons[0]
    assert reasons[1] == ("RTX 5090 (sm_120) is not in driver 550.54.15's supported-GPU list (the driver README's "
                          "Appendix A; no R550 release read lists it; listed from 580.126.09)")
    reasons, _ = verdict("H200", "550.54.15", "torch-2.3-cu121")
    assert reasons == ["H200 (sm_90) is not in driver 550.54.15's supported-GPU list (the driver README's Appendix A; "
                       "listed in 550.90.07..550.163.01)"]
    reasons, _ = verdict("GB10", "580.119.02", "torch-2.8-cu128")
    assert reasons == ["GB10 sits in an aarch64 host (Grace CPU): torch-2.8-cu128 has no linux/arm64 image (its index "
                       "has no aarch64 CUDA wheels: no aarch64 wheel of triton==3.4.0 (Python 3.9, 3.10, 3.11, 3.12, "
                       "3.13); CPU-only on aarch64: no CUDA wheel required by "
                       "torch-2.8.0-cp312-cp312-manylinux_2_28_aarch64.whl (its nvidia-* requirements hold only where "
                       "platform_machine == \"x86_64\")); its linux/amd64 image does not start there (exec format "
                       "error)"]
    reasons, _ = verdict("B200", "550.54.20", "jax-0.12-cuda12")  # not read, inside a range of releases read
    assert "B200 (sm_100) is not in driver 550.54.20's supported-GPU list" in reasons[0]
    reasons, _ = verdict("B200", "560.35.05", "jax-0.12-cuda12")  # no R560 release read: B200's first driver decides
    assert reasons[0] == "driver 560.35.05 predates B200 (sm_100): the first driver that knows it is 570.86.15 (R570)"
    _, notes = verdict("H100", "550.54.15", "torch-2.8-cu128")
    assert notes[0].startswith("under forward compatibility (cuda-compat, data-center GPUs only): driver 550.54.15 "
                               "(R550) is below CUDA 12.8's driver branch R570")
    reasons, _ = verdict("V100", "595.58.03", "torch-2.7-cu126")
    assert reasons == ["driver 595.58.03 no longer supports V100 (sm_70): its last driver branch is R580"]


@pytest.mark.parametrize("name, driver, gpu, mechanism", MECHANISMS)
def test_compat_names_the_mechanism_that_admits_the_driver(shipped_matrix, locks, name, driver, gpu, mechanism):
    profile = resolve_profile(name, shipped_matrix)
    verdict = node_verdicts([profile], driver, find_gpu(gpu, shipped_matrix), locks, runtime="legacy")[0]
    assert verdict.ok and verdict.mechanism == mechanism


def test_jax_follows_its_lock(shipped_matrix, locks):
    profile = resolve_profile("jax-0.12-cuda12", shipped_matrix)
    reasons, notes = profile_verdict(profile, "570.124.06", None, locks)
    assert reasons == [] and any("nvidia-cuda-runtime-cu12==12.9.79" in n and "CUDA 12.9" in n for n in notes)
    assert any("575.57.08: runs under CUDA minor-version compatibility" in n for n in notes)  # 12.9's floor, not 12.6's
    _, notes = profile_verdict(resolve_profile("jax-0.12-cuda13", shipped_matrix), "580.95.05", None, locks)
    assert any(n.startswith("no lock applies") and "nominal CUDA 13.0" in n for n in notes)


def test_compat_cli_says_no_for_an_rtx_5090_on_r550(run_cli):
    r = run_cli("compat", "--driver", "550.54.15", "--gpu", "RTX 5090", "--runtime", "legacy")
    assert r.code == 0 and r.out == "" and r.err.startswith("0 of ")  # nothing runs: nothing listed
    r = run_cli("compat", "--driver", "550.54.15", "--gpu", "RTX 5090", "--all", "--runtime", "legacy")
    assert "no    torch-2.7-cu128: driver 550.54.15 (R550) is below CUDA 12.8's driver branch R570" in r.out
    assert "RTX 5090 (sm_120) is not in driver 550.54.15's supported-GPU list" in r.out
    r = run_cli("check", "torch==2.7.1", "cuda=12.8", "driver=550.54.15", "gpu=RTX 5090")
    assert r.code == 1 and "RTX 5090 is a consumer GPU" in r.out
