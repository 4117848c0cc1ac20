"""compat in both NVIDIA container runtime modes (issue 34, item 3), and GPUs found by the names nvidia-smi prints.

legacy: NVIDIA_REQUIRE_CUDA gates the start (libnvidia-container); jit-cdi (toolkit >= 1.18): the enable-cuda-compat
hook alone decides, and it swaps the image's compat libcuda in on the image's own branch too when the compat driver
is newer than the host's (nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat, UseCompat and its test "host
driver branch same as compat driver branch, compat driver > host driver").
"""

from __future__ import annotations

import pytest

from imagectl.errors import InputError
from imagectl.matrix.admission import admission
from imagectl.matrix.compat import node_verdicts
from imagectl.matrix.gpus import find_gpu
from imagectl.matrix.names import resolve_profile
from imagectl.nvidia_smi import read_runtime_mode


def verdict(matrix, name, driver, gpu, runtime):
    return node_verdicts([resolve_profile(name, matrix)], driver, find_gpu(gpu, matrix), runtime=runtime)[0]


def test_the_same_branch_on_a_geforce_part_is_not_ok_under_jit_cdi(shipped_matrix):
    # 12.8's full-support driver is 570.124.06; a GeForce node on the same branch, below it
    legacy = verdict(shipped_matrix, "torch-2.8-cu128", "570.86.16", "RTX 4090", "legacy")
    cdi = verdict(shipped_matrix, "torch-2.8-cu128", "570.86.16", "RTX 4090", "cdi")
    assert legacy.ok and legacy.mechanism == "minor-version compatibility"
    assert not cdi.ok and "CUDA error 804" in cdi.reasons[0] and "its own branch" in cdi.reasons[0]
    both = verdict(shipped_matrix, "torch-2.8-cu128", "570.86.16", "RTX 4090", "both")
    assert not both.ok and dict((m, ok) for m, ok, _ in both.modes) == {"legacy": True, "cdi": False}
    assert both.reasons[0].startswith("jit-cdi mode: ")


def test_the_same_branch_on_a_data_center_part_runs_on_cuda_compat_under_jit_cdi(shipped_matrix):
    cdi = verdict(shipped_matrix, "torch-2.8-cu128", "570.86.16", "H100", "cdi")
    assert cdi.ok and cdi.mechanism.startswith("forward compatibility")
    both = verdict(shipped_matrix, "torch-2.8-cu128", "570.86.16", "H100", "both")
    assert both.ok and "legacy mode: minor-version compatibility" in both.mechanism and len(both.modes) == 2


def test_one_verdict_where_the_modes_agree(shipped_matrix):
    both = verdict(shipped_matrix, "torch-2.3-cu121", "550.54.14", "T4", "both")
    assert both.ok and both.modes == () and both.mechanism == "full support"


def test_jit_cdi_does_not_check_the_requirement(shipped_matrix):
    # R525 is no forward-compatible branch of 12.6.3: legacy refuses the start; jit-cdi starts it on the host's
    # libcuda, which CUDA 12's minor-version compatibility serves from 525.60.13
    toolkit = shipped_matrix.cuda["12.6"]
    assert admission(toolkit, "525.60.13", None, "legacy").mechanism == "refused"
    assert admission(toolkit, "525.60.13", None, "cdi").mechanism == "host"


def test_the_pre_12_6_images_admit_geforce_but_compat_says_error_804(shipped_matrix):
    got = verdict(shipped_matrix, "torch-2.3-cu121", "525.60.13", "RTX 4090", "legacy")
    assert not got.ok and "admits the geforce brand there and the container starts" in got.reasons[0]


@pytest.mark.parametrize("printed, gpu", [
    ("NVIDIA H800", "H800"), ("NVIDIA A800-SXM4-80GB", "A800"), ("NVIDIA A10G", "A10G"), ("Tesla T4", "T4"),
    ("NVIDIA H20", "H20"), ("NVIDIA L20", "L20"), ("NVIDIA L40", "L40"), ("NVIDIA GeForce RTX 4090 D", "RTX 4090 D"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("Tesla V100-SXM2-32GB", "V100"), ("RTX 4090 48GB", "RTX 4090"),
    ("RTX 4090 D 48GB", "RTX 4090 D"),
])
def test_a_name_nvidia_smi_prints_resolves(shipped_matrix, printed, gpu):
    assert find_gpu(printed, shipped_matrix).name == gpu


def test_an_unknown_name_gets_one_line_with_the_closest_known(shipped_matrix):
    with pytest.raises(InputError) as err:
        find_gpu("H8OO", shipped_matrix)
    assert "closest known: " in str(err.value) and "H800" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("text, mode", [
    ('[nvidia-container-runtime]\nmode = "legacy"\n', "legacy"),
    ('[nvidia-container-runtime]\nmode = "jit-cdi"\n', "cdi"),
    ('[nvidia-container-runtime]\nmode = "cdi"\n', "cdi"),
    ('[nvidia-container-runtime]\nmode = "auto"\n', "both"),
    ("not toml [", "both"),
])
def test_the_node_runtime_mode_is_read_from_the_toolkit_config(tmp_path, text, mode):
    path = tmp_path / "config.toml"
    path.write_text(text)
    assert read_runtime_mode(path) == mode
    assert read_runtime_mode(tmp_path / "absent.toml") == "both"
