"""tools/gpu_driver_lists.py (the generator of matrices/gpu-drivers.toml) and what it generated (issue 21, item 3).

The generated facts are checked against what NVIDIA/open-gpu-kernel-modules' README "Compatible GPUs" table says at
the release tags named (read in this session from a fetched snapshot of the repository, tags 515.43.04 .. 595.45.04).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from imagectl.matrix.gpus import gpu_driver_reasons, list_status

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("gpu_driver_lists", ROOT / "tools" / "gpu_driver_lists.py")
tool = importlib.util.module_from_spec(spec)
sys.modules["gpu_driver_lists"] = tool  # dataclasses look their module up there
spec.loader.exec_module(tool)

README = """# NVIDIA Linux Open GPU Kernel Module Source

## Compatible GPUs

The NVIDIA open kernel modules can be used on any Turing or later GPU (see the table below).

| Product Name                                            | PCI ID         |
| ------------------------------------------------------- | -------------- |
| NVIDIA H200                                             | 2335 10DE 18BE |
| NVIDIA A16                                              | 25B6 10DE 14A9 |
| NVIDIA GeForce RTX 4090                                 | 2684           |
"""


def test_the_readme_table_is_the_list():
    ids = tool.readme_ids(README)
    assert ids == ["2335 10DE 18BE", "25B6 10DE 14A9", "2684"]
    assert tool.readme_ids("# README without the section\n") is None
    assert tool.listed(ids, ("2335",)) and tool.listed(ids, ("2684",)) and tool.listed(ids, ("25B6 10DE 14A9",))
    assert not tool.listed(ids, ("25B6 10DE 157E",))  # A2 shares A16's device ID, not its board
    assert not tool.listed(ids, ("2335", "2330"))  # every ID of a GPU must be listed
    assert not tool.listed(ids, ("233",))  # whole fields only


def test_ranges_split_at_every_change_and_every_branch():
    releases = ["550.40.63", "550.40.65", "550.54.14", "550.90.07", "555.42.02", "555.42.06"]
    flags = [False, True, False, True, False, True]
    out = tool.ranges(releases, flags)
    assert out.listed == ("550.40.65..550.40.65", "550.90.07..550.90.07", "555.42.06..555.42.06")
    assert out.missing == ("550.40.63..550.40.63", "550.54.14..550.54.14", "555.42.02..555.42.02")
    assert tool.ranges(["570.1", "575.2"], [True, True]).listed == ("570.1..570.1", "575.2..575.2")


def test_the_output_is_deterministic_toml():
    text = tool.render({"H200": tool.Ranges(("550.40.65..550.40.85",), ("550.54.14..550.78",))},
                       ["550.40.65", "550.78"], ["515.43.04"], "550.78, abc")
    data = tool.toml_loads(text)["driver_lists"]
    assert data["listed"]["H200"] == ["550.40.65..550.40.85"] and data["missing"]["H200"] == ["550.54.14..550.78"]
    assert "left out (no Compatible GPUs table): 515.43.04" in text and text == tool.render(
        {"H200": tool.Ranges(("550.40.65..550.40.85",), ("550.54.14..550.78",))}, ["550.40.65", "550.78"],
        ["515.43.04"], "550.78, abc")


@pytest.mark.parametrize("gpu, driver, listed", [
    # H200 (0x2335): listed from 550.40.65, absent from 550.54.14 .. 550.78 and 555.42.02, back in 550.90.07
    ("H200", "550.40.65", True), ("H200", "550.54.14", False), ("H200", "550.54.15", False), ("H200", "550.67", False),
    ("H200", "550.76", False), ("H200", "550.78", False), ("H200", "555.42.02", False), ("H200", "550.90.07", True),
    ("H200", "535.104.05", False),
    # H100 SXM (0x2330): absent from 525.60.13 and 525.78.01
    ("H100 SXM", "525.47.07", True), ("H100 SXM", "525.60.13", False), ("H100 SXM", "525.78.01", False),
    ("H100 SXM", "525.85.05", True),
    # L4 (0x27B8): in the README table at 525.47.22 (the resource manager's table names the device earlier, as
    # "NVIDIA GPU 27B8-172F", a placeholder); absent from 525.53 .. 525.89.02 and 530.30.02; listed from 525.105.17
    ("L4", "525.47.06", False), ("L4", "525.47.22", True), ("L4", "525.60.13", False), ("L4", "530.30.02", False),
    ("L4", "525.105.17", True), ("L4", "535.54.03", True),
    # GB10 (0x2E12): in 580.94.13, absent from 580.95.05 and 580.105.08, back in 580.119.02
    ("GB10", "580.94.13", True), ("GB10", "580.95.05", False), ("GB10", "580.105.08", False),
    ("GB10", "580.119.02", True),
    # releases not read: the nearest read at or below in the branch stands for them; past every release read, the
    # newest read (595.45.04)
    ("H200", "550.54.99", False), ("H200", "550.95", True), ("H200", "595.71.05", True), ("RTX 5090", "600.10", True),
])
def test_the_generated_lists_say_what_the_readme_said(shipped_matrix, gpu, driver, listed):
    assert list_status(shipped_matrix.gpus[gpu], driver)[0] is listed


def test_a_gpu_without_a_list_or_a_driver_before_every_release_read_is_not_judged_by_a_list(shipped_matrix):
    assert list_status(shipped_matrix.gpus["V100"], "550.54.15") == (None, "")
    assert list_status(shipped_matrix.gpus["A100"], "450.80.02") == (None, "")
    assert gpu_driver_reasons(shipped_matrix.gpus["A100"], "450.80.02") == []


def test_every_gpu_with_pci_ids_has_a_generated_list_and_no_list_contradicts_its_floor(shipped_matrix):
    from imagectl.grammar import driver_key

    for gpu in shipped_matrix.gpus.values():
        assert bool(gpu.pci) == bool(gpu.listed or gpu.missing), gpu.name
        if gpu.listed and gpu.min_driver:
            first = min((r.split("..")[0] for r in gpu.listed), key=driver_key)
            assert driver_key(first) >= driver_key(gpu.min_driver), gpu.name
