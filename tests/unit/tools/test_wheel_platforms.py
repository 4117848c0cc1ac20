"""tools/wheel_platforms.py (the generator of matrices/platforms.toml) over real wheel metadata, and what it generated.

The metadata is tests/fixtures/pypi/platform-wheels.json: the Requires-Dist lines of the cp312 wheels named there, read
from PyPI on 2026-12-02 (PEP 658 ``.metadata`` where PyPI serves it, else ``*.dist-info/METADATA`` by HTTP Range; each
entry keeps its URL and upload time).  Facts checked (issue 20): torch 2.11's ``manylinux_2_28_aarch64`` wheel requires
``cuda-toolkit[...]==13.0.2``, ``nvidia-cudnn-cu13`` and ``nvidia-nccl-cu13`` with no machine marker (a CUDA build);
torch 2.10's aarch64 wheel gates every nvidia-* requirement on ``platform_machine == "x86_64"`` (CPU-only);
jax-cuda12-plugin publishes a ``manylinux_2_27_aarch64`` wheel whose CUDA wheels come with its ``with-cuda`` extra.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from imagectl.matrix.load import load_matrix

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("wheel_platforms", ROOT / "tools" / "wheel_platforms.py")
tool = importlib.util.module_from_spec(spec)
sys.modules["wheel_platforms"] = tool  # dataclasses look their module up there
spec.loader.exec_module(tool)

RECORDED = json.loads((ROOT / "tests" / "fixtures" / "pypi" / "platform-wheels.json").read_text())
WHEELS = RECORDED["wheels"]


def lines(filename: str) -> list[str]:
    return WHEELS[filename]["requires_dist"]


def test_the_fixture_says_where_and_when_it_was_read():
    assert RECORDED["read"] == "2026-12-02" and "PEP 658" in RECORDED["source"]
    for filename, entry in WHEELS.items():
        assert entry["url"].startswith("https://files.pythonhosted.org/")
        assert entry["url"].endswith(filename + (".metadata" if entry["via"] == "pep658" else ""))
        assert entry["via"] in ("pep658", "range") and entry["uploaded"].startswith("2026-")


@pytest.mark.parametrize("filename, machine, fits", [
    ("torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl", "aarch64", True),
    ("torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl", "x86_64", False),
    ("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", "x86_64", True),
    ("jax_cuda12_pjrt-0.12.0.1-py3-none-manylinux_2_27_aarch64.whl", "aarch64", True),
    ("cuda_toolkit-13.0.3.0-py2.py3-none-any.whl", "aarch64", True),  # 13.0.3.0 is 13.0.3 (PEP 440)
    ("torch-2.11.0-cp312-cp312-macosx_11_0_arm64.whl", "aarch64", False),
    ("torch-2.11.0-cp313-cp313-manylinux_2_28_aarch64.whl", "aarch64", False),  # another CPython
])
def test_wheel_fits_by_tag(filename, machine, fits):
    version = "13.0.3" if filename.startswith("cuda_toolkit") else filename.split("-")[1]
    assert tool.wheel_fits(filename, version, machine, "3.12") is fits


def test_torch_2_11_aarch64_is_a_cuda_build():
    found = tool.cuda_lines(lines("torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl"), "aarch64", "3.12")
    names = [line.split("[")[0].split("=")[0].split(";")[0] for line in found]
    assert names[0] == "cuda-toolkit" and {"nvidia-cudnn-cu13", "nvidia-nccl-cu13"} <= set(names)
    assert found[0].startswith("cuda-toolkit[") and "==13.0.2" in found[0] and "platform_machine" not in found[0]
    facts = judge("torch", "torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl",
                  "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert facts.cuda and "cuda-toolkit[" in facts.evidence and "==13.0.2" in facts.evidence
    assert facts.pins == {}  # the aarch64 wheel pins what the x86_64 wheel pins


def test_torch_2_10_aarch64_is_cpu_only():
    assert tool.cuda_lines(lines("torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl"), "aarch64", "3.12") == []
    x86 = tool.cuda_lines(lines("torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl"), "x86_64", "3.12")
    assert x86 and all('platform_machine == "x86_64"' in line for line in x86)
    facts = judge("torch", "torch-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl",
                  "torch-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not facts.cuda and facts.evidence.startswith("CPU-only on aarch64")
    assert 'hold only where platform_machine == "x86_64"' in facts.evidence


def test_the_jax_plugin_brings_cuda_with_its_extra_only():
    plugin = lines("jax_cuda12_plugin-0.12.0.1-cp312-cp312-manylinux_2_27_aarch64.whl")
    assert tool.cuda_lines(plugin, "aarch64", "3.12") == []
    assert len(tool.cuda_lines(plugin, "aarch64", "3.12", ("with-cuda",))) == 12
    facts = judge("jax-cuda12-plugin", "jax_cuda12_plugin-0.12.0.1-cp312-cp312-manylinux_2_27_aarch64.whl",
                  "jax_cuda12_plugin-0.12.0.1-cp312-cp312-manylinux_2_27_x86_64.whl", ("with-cuda",))
    assert facts.cuda and "manylinux_2_27_aarch64" in facts.evidence


def test_pins_that_differ_on_the_platform_are_its_own():
    x86 = ["nvidia-nccl-cu13==2.28.9", "triton==3.6.0"]
    arm = ["nvidia-nccl-cu13==2.28.7", "nvidia-cudnn-cu13==9.19.0.56"]
    facts = tool.judge({"torch": ("torch-x-aarch64.whl", arm, x86)}, [], "aarch64", "3.12", {},
                       {"nvidia-nccl-cu13": "2.28.9", "triton": "3.6.0"})
    assert facts.cuda and facts.pins == {"nvidia-nccl-cu13": "2.28.7", "nvidia-cudnn-cu13": "9.19.0.56"}


def test_a_missing_platform_wheel_is_said():
    facts = tool.judge({}, ["triton==3.4.0"], "aarch64", "3.12", {}, {})
    assert not facts.cuda and facts.evidence == "no aarch64 wheel of triton==3.4.0"


def judge(name, arm, x86, extras=()):
    return tool.judge({name: (arm, lines(arm), lines(x86))}, [], "aarch64", "3.12", {name: extras}, {})


def test_rendered_file_loads(tmp_path):
    facts = {"linux/arm64": tool.BuildFacts(True, 'x.whl requires "cuda-toolkit==13.2.2"', {"triton": "3.9.0"})}
    text = tool.render([("torch", "2.15.0", "13.2", facts)], "2026-12-02")
    (tmp_path / "platforms.toml").write_text(text)
    (tmp_path / "torch.toml").write_text((ROOT / "matrices" / "torch.toml").read_text())
    (tmp_path / "cuda.toml").write_text((ROOT / "matrices" / "cuda.toml").read_text())
    matrix = load_matrix([tmp_path])
    variant = next(v for v in matrix.frameworks["torch"].releases[0].variants if v.cuda == "13.2")
    assert variant.platforms == ("linux/amd64", "linux/arm64")
    assert dict(variant.platform_pins)["linux/arm64"] == (("triton", "3.9.0"),)


def test_the_shipped_file_is_what_the_fixture_says():
    text = (ROOT / "matrices" / "platforms.toml").read_text()
    assert text.startswith("# GENERATED by tools/wheel_platforms.py")
    matrix = load_matrix([ROOT / "matrices"])
    torch = {r.version: r for r in matrix.frameworks["torch"].releases}
    pypi = {version: next(v for v in release.variants if v.pypi) for version, release in torch.items()}
    assert "linux/arm64" in pypi["2.11.0"].platforms and "linux/arm64" in pypi["2.15.0"].platforms
    for version in ("2.8.0", "2.9.1", "2.10.0"):
        assert pypi[version].platforms == ("linux/amd64",), version
        assert "CPU-only on aarch64" in dict(pypi[version].platform_sources)["linux/arm64"]
    evidence = dict(pypi["2.11.0"].platform_sources)["linux/arm64"]
    assert evidence.startswith("torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl requires cuda-toolkit[")
    jax = matrix.frameworks["jax"]
    assert all(v.platforms == ("linux/amd64", "linux/arm64") for r in jax.releases for v in r.variants)
