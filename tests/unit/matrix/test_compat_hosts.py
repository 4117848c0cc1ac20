"""``compat`` knows the host (issue 20, item 6): a node runs only the images that have a platform of its CPU.

Sources of the hosts ([grace] in matrices/cuda.toml's [gpus] header): GH200, GB200 and GB300 pair their GPUs with
NVIDIA's Grace CPU (Arm Neoverse V2 cores: nvidia.com/en-us/data-center/grace-hopper-superchip/, /gb200-nvl72/,
/gb300-nvl72/), GB10 (DGX Spark, compute capability 12.1 on developer.nvidia.com/cuda-gpus) pairs its GPU with 20 Arm
cores (nvidia.com/en-us/products/workstations/dgx-spark/): all four are aarch64 hosts.  The images' platforms come
from matrices/platforms.toml (PyPI's wheels: torch 2.11 .. 2.15 and jax 0.10 .. 0.12 have aarch64 CUDA wheels, torch
2.8 .. 2.10's aarch64 wheels are CPU-only).  The node probe reads ``uname -m`` (``platform.machine()``, the real one
of this machine) next to nvidia-smi (a stand-in script on PATH, as the command would find the real one).
"""

from __future__ import annotations

import json
import platform
import stat

import pytest

from imagectl.matrix.compat import node_verdicts
from imagectl.matrix.gpus import find_gpu
from imagectl.matrix.names import list_profiles, resolve_profile

GRACE = ["GH200", "GB200", "GB300", "GB10"]
DRIVER = "580.119.02"  # lists every Grace GPU (matrices/gpu-drivers.toml)


@pytest.mark.parametrize("gpu, arch", [("GH200", "sm_90"), ("GB200", "sm_100"), ("GB300", "sm_103"),
                                       ("GB10", "sm_121")])
def test_grace_gpus_sit_in_aarch64_hosts(shipped_matrix, gpu, arch):
    found = find_gpu(gpu, shipped_matrix)
    assert found.host == "aarch64" and found.arch == arch
    assert find_gpu(arch, shipped_matrix).host == ("aarch64" if arch == "sm_121" else None)  # sm_90: H100 too


@pytest.mark.parametrize("gpu", GRACE)
def test_on_a_grace_host_only_images_with_arm64_run(shipped_matrix, gpu):
    profiles = list_profiles(shipped_matrix)
    verdicts = node_verdicts(profiles, DRIVER, find_gpu(gpu, shipped_matrix))
    by_name = {p.name: p for p in profiles}
    ok = [v.profile for v in verdicts if v.ok]
    assert ok and all("linux/arm64" in by_name[name].platforms for name in ok)
    for v in verdicts:
        if "linux/arm64" not in by_name[v.profile].platforms:
            assert not v.ok and v.reasons[0].startswith(f"{gpu} sits in an aarch64 host (Grace CPU): {v.profile} has "
                                                        "no linux/arm64 image")
            assert v.reasons[0].endswith("its linux/amd64 image does not start there (exec format error)")


def test_the_reason_names_what_the_index_offers(shipped_matrix):
    gh200 = find_gpu("GH200", shipped_matrix)
    cpu_only, unread = (resolve_profile(n, shipped_matrix) for n in ("torch-2.10-cu128", "torch-2.15-cu130"))
    (cpu,), (other,) = (node_verdicts([p], DRIVER, gh200)[0].reasons[:1] for p in (cpu_only, unread))
    assert "its index has no aarch64 CUDA wheels: CPU-only on aarch64: no CUDA wheel required by " \
           "torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl" in cpu
    assert "no aarch64 CUDA wheels are recorded for its build: its index was not read" in other


def test_arch_overrides_the_gpus_host(shipped_matrix):
    profiles = list_profiles(shipped_matrix)
    gh200 = find_gpu("GH200", shipped_matrix)
    grace = sum(v.ok for v in node_verdicts(profiles, DRIVER, gh200))
    as_x86 = sum(v.ok for v in node_verdicts(profiles, DRIVER, gh200, host="x86_64"))
    h100_on_arm = node_verdicts(profiles, DRIVER, find_gpu("H100", shipped_matrix), host="aarch64")
    assert as_x86 > grace == sum(v.ok for v in h100_on_arm)
    assert all(v.reasons[0].startswith("the node is an aarch64 host") for v in h100_on_arm if not v.ok
               and "linux/arm64" not in resolve_profile(v.profile, shipped_matrix).platforms)


def test_compat_cli_gh200_lists_only_grace_images(run_cli):
    r = run_cli("compat", "--gpu", "GH200", "--driver", "580.95.05", "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    ok = {row["name"] for row in rows if row["compatible"]}
    assert "torch-2.15-cu132" in ok and "jax-0.12-cuda12" in ok
    assert not ok & {"torch-2.10-cu128", "torch-2.8-cu128", "torch-2.3-cu121"}
    shown = run_cli("list", "--platform", "linux/arm64", "--json")
    assert ok <= {row["name"] for row in json.loads(shown.out)}
    x86 = run_cli("compat", "--gpu", "GH200", "--driver", "580.95.05", "--arch", "x86_64")
    assert "torch-2.10-cu128\n" in x86.out and "(x86_64 host)" in x86.err
    bad = run_cli("compat", "--gpu", "H100", "--driver", "580.95.05", "--arch", "sparc")
    assert bad.code == 2 and bad.err.startswith("imagectl: --arch 'sparc'") and len(bad.err.splitlines()) == 1


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    """A stand-in nvidia-smi on PATH that answers the probe's query as a GH200 node with driver 580.95.05 would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\necho '580.95.05, 9.0'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_the_node_probe_reads_uname_next_to_nvidia_smi(run_cli, nvidia_smi):
    machine = platform.machine()  # this machine's own uname -m
    r = run_cli("compat", "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)}
    if machine == "x86_64":
        assert rows["torch-2.10-cu128"]["compatible"]  # an x86_64 node runs the amd64-only images
    else:
        assert not rows["torch-2.10-cu128"]["compatible"]
    summary = run_cli("compat").err
    assert f"with driver 580.95.05 on sm_90 ({machine} host)" in summary
    arm = run_cli("compat", "--arch", "aarch64", "--json")  # --arch overrides the probe's uname -m
    row = next(row for row in json.loads(arm.out) if row["name"] == "torch-2.10-cu128")
    assert not row["compatible"] and row["reasons"][0].startswith("the node is an aarch64 host")
