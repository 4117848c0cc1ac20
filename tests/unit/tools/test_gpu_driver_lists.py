"""tools/gpu_driver_lists.py (the generator of matrices/gpu-drivers.toml) and what it generated (issue 34, item 1).

The source is the driver's own README (Appendix A "Supported NVIDIA GPU Products" and its GSP-firmware table), its
PCI device IDs per release as Debian's packaging extracts them into debian/nv-readme.ids (read in this session from
a fetched mirror of that history, GXDE-OS/nvidia-graphics-drivers; each release's commit is in the generated file).
The facts asserted below are those files' lines, e.g. ``10DE1EB8`` (Tesla T4) in 525.60.13's, 535.104.05's and
550.54.14's lists.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.matrix.gpus import gpu_driver_reasons, list_status

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("gpu_driver_lists", ROOT / "tools" / "gpu_driver_lists.py")
tool = importlib.util.module_from_spec(spec)
sys.modules["gpu_driver_lists"] = tool  # dataclasses look their module up there
spec.loader.exec_module(tool)

RULES = "nv-readme.ids: unpack-stamp\n\tsed -r -n '/^Chapter [0-9]+\\. GSP Firmware|^A1\\. CURRENT NVIDIA GPUS/' x\n"


def test_the_ids_file_is_the_list():
    ids = tool.readme_ids("10DE1EB8\n10de2335\n10DE25B6\nnot an id\n")
    assert ids == {"1EB8", "2335", "25B6"}
    assert tool.listed(ids, ("25B6 10DE 14A9",)) and tool.listed(ids, ("1EB8", "2335"))
    assert not tool.listed(ids, ("1EB8", "2901"))


def test_the_changelog_names_the_release():
    assert tool.changelog_version("nvidia-graphics-drivers (550.54.14-1) unstable; urgency=medium\n") == "550.54.14"
    assert tool.changelog_version("nvidia-graphics-drivers-tesla-470 (470.256.02-1) x\n") == "470.256.02"
    assert tool.changelog_version("something-else (1.0-1) x\n") is None


def test_a_gap_after_a_listing_is_not_judged_but_a_release_before_it_is_missing():
    releases = ["535.43.02", "535.161.07", "535.183.01", "545.29.06", "550.40.07", "555.42.02"]
    flags = tool.judged(releases, [False, True, False, False, True, False])
    # before its first R535 listing: missing; a later R535 release or a later branch that leaves it out: not judged
    assert flags == [False, True, None, None, True, None]
    got = tool.ranges(releases, flags)
    assert got.listed == ("535.161.07..535.161.07", "550.40.07..550.40.07")
    assert got.missing == ("535.43.02..535.43.02",)
    assert got.gaps == ("535.183.01..535.183.01", "545.29.06..545.29.06", "555.42.02..555.42.02")


def test_the_releases_are_read_from_the_packaging_history(tmp_path):
    """A real git repository in Debian's layout: the newest commit of each upstream version is read, and a version
    whose extraction skips the GSP table (older debian/rules) is left out."""
    repo = tmp_path / "ngd"
    (repo / "debian").mkdir(parents=True)

    def commit(version: str, ids: str, rules: str = RULES) -> None:
        (repo / "debian" / "changelog").write_text(f"nvidia-graphics-drivers ({version}-1) unstable; urgency=low\n")
        (repo / "debian" / "nv-readme.ids").write_text(ids)
        (repo / "debian" / "rules").write_text(rules)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m",
                        version], check=True)

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commit("510.54", "10DE2204\n", rules="nv-readme.ids: A. Supported only\n")
    commit("525.60.13", "10DE1EB8\n")
    commit("535.104.05", "10DE1EB8\n10DE2335\n")
    commits = tool.release_commits(repo, "450.51")
    assert list(commits) == ["525.60.13", "535.104.05"]
    out = tmp_path / "gpu-drivers.toml"
    matrix = tmp_path / "cuda.toml"
    matrix.write_text('[gpus]\n"T4" = { arch = "sm_75", pci = ["1EB8"] }\n'
                      '"H200" = { arch = "sm_90", pci = ["2335"] }\n')
    assert tool.main(["--repo", str(repo), "--matrix", str(matrix), "--output", str(out)]) == 0
    data = tool.toml_loads(out.read_text())["driver_lists"]
    assert data["listed"]["T4"] == ["525.60.13..525.60.13", "535.104.05..535.104.05"]
    assert data["missing"]["H200"] == ["525.60.13..525.60.13"] and data["releases"]["535.104.05"] == commits[
        "535.104.05"][:12]


def test_the_output_is_deterministic_toml():
    gpus = {"H200": tool.Ranges(("550.90.07..550.163.01",), ("550.54.14..550.78",), ("555.42.02..555.58.02",))}
    commits = {"550.54.14": "a" * 40, "550.163.01": "b" * 40}
    text = tool.render(gpus, commits, "a mirror")
    data = tool.toml_loads(text)["driver_lists"]
    assert data["listed"]["H200"] == ["550.90.07..550.163.01"] and data["missing"]["H200"] == ["550.54.14..550.78"]
    assert "#   H200: 555.42.02..555.58.02" in text and text == tool.render(gpus, commits, "a mirror")


# Each case is a line of that release's debian/nv-readme.ids (the README's list), named in the generated file.
@pytest.mark.parametrize("gpu, driver", [
    ("T4", "525.60.13"), ("T4", "535.104.05"), ("T4", "550.54.14"),         # 10DE1EB8 (Tesla T4)
    ("V100", "535.104.05"), ("P100", "535.104.05"),                         # 10DE1DB1/1DB4/1DB5/1DB6, 15F7/15F8/15F9
    ("A10G", "535.104.05"), ("A10G", "550.54.14"),                          # 10DE2237
    ("H20", "535.161.07"), ("H20", "550.54.14"),                            # 10DE2329
    ("H800", "535.104.05"), ("H800", "550.54.14"),                          # 10DE2324
    ("A800", "535.104.05"), ("A800", "550.54.14"),                          # 10DE20F3, 10DE20F5
    ("L20", "535.154.05"), ("L20", "550.54.14"),                            # 10DE26BA
    ("L40", "535.104.05"), ("L40", "550.54.14"),                            # 10DE26B5
    ("RTX 4090 D", "550.54.14"),                                            # 10DE2685
])
def test_the_driver_lists_the_gpus_users_run(shipped_matrix, gpu, driver):
    assert list_status(shipped_matrix.gpus[gpu], driver) == (True, driver)
    assert gpu_driver_reasons(shipped_matrix.gpus[gpu], driver) == []


@pytest.mark.parametrize("gpu, driver", [
    ("H200", "550.54.14"), ("H200", "535.104.05"),   # 2335 from 550.90.07 only
    ("H20", "535.104.05"),                           # 2329 from 535.161.07
    ("L20", "535.104.05"),                           # 26BA from 535.154.05
])
def test_a_driver_older_than_the_gpu_does_not_list_it(shipped_matrix, gpu, driver):
    assert list_status(shipped_matrix.gpus[gpu], driver)[0] is False
    assert "not in driver" in gpu_driver_reasons(shipped_matrix.gpus[gpu], driver)[0]


def test_pre_turing_gpus_are_judged_by_their_last_branch(shipped_matrix):
    assert gpu_driver_reasons(shipped_matrix.gpus["V100"], "580.126.09") == []
    assert "last driver branch is R580" in gpu_driver_reasons(shipped_matrix.gpus["V100"], "590.48.01")[0]


def test_every_gpu_with_pci_ids_has_a_generated_list_and_every_range_ends_in_a_release_read(shipped_matrix):
    text = (ROOT / "matrices" / "gpu-drivers.toml").read_text()
    read = set(tool.toml_loads(text)["driver_lists"]["releases"])
    for gpu in shipped_matrix.gpus.values():
        assert bool(gpu.pci) == bool(gpu.listed or gpu.missing), gpu.name
        for text_range in gpu.listed + gpu.missing:
            first, last = text_range.split("..")
            assert first in read and last in read, (gpu.name, text_range)
