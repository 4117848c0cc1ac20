"""The recorded PyPI fixture (tests/fixtures/pypi/torch-wheels.json) is well formed and reads as expected.

Refresh it with ``python tests/fixtures/record_wheel_metadata.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from imagectl.pypi import WheelMetadata, exact_pins, loose_requirements, parse_wheel
from imagectl.pypi.wheels import cpython_sort_key

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "pypi" / "torch-wheels.json"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def torch_metadata(recorded: dict[str, Any], version: str) -> WheelMetadata:
    wheel = recorded["torch"][version]["wheel"]
    lines = tuple(wheel["requires_dist"])
    return WheelMetadata("torch", Version(version), wheel["requires_python"], tuple(map(Requirement, lines)), lines)


def test_every_torch_release_since_2_0_is_recorded(recorded: dict[str, Any]) -> None:
    versions = sorted(map(Version, recorded["torch"]))
    assert versions[0] == Version("2.0.0") and Version("2.3.0") in versions
    for version, entry in recorded["torch"].items():
        assert entry["cpython"] == sorted(entry["cpython"], key=cpython_sort_key) and entry["cpython"]
        if entry["wheel"] is None:
            assert entry["errors"], f"torch {version} has neither metadata nor an error"
            continue
        wheel = parse_wheel(entry["wheel"]["filename"])
        assert wheel.version == Version(version) and "x86_64" in entry["wheel"]["filename"]
        SpecifierSet(entry["wheel"]["requires_python"])


def test_torch_2_3_0_pins_its_cuda_libraries(recorded: dict[str, Any]) -> None:
    pins = exact_pins(torch_metadata(recorded, "2.3.0"), python="3.11")
    assert pins["nvidia-nccl-cu12"] == "2.20.5"
    assert pins["nvidia-cudnn-cu12"] == "8.9.2.26"
    assert pins["nvidia-cuda-runtime-cu12"] == "12.1.105"
    assert exact_pins(torch_metadata(recorded, "2.3.0"), platform_machine="aarch64") == {}


def test_every_recorded_torch_wheel_parses_and_pins_nccl_on_linux(recorded: dict[str, Any]) -> None:
    for version, entry in recorded["torch"].items():
        if entry["wheel"] is not None:
            metadata = torch_metadata(recorded, version)
            pins = exact_pins(metadata, python="3.11")
            loose_requirements(metadata, python="3.11")
            assert any(name.startswith("nvidia-nccl") for name in pins), f"torch {version}: {pins}"


@pytest.mark.parametrize(
    ("project", "version", "torch"), [("torchvision", "0.18.0", "2.3.0"), ("torchaudio", "2.3.0", "2.3.0")]
)
def test_companions_map_to_torch(recorded: dict[str, Any], project: str, version: str, torch: str) -> None:
    assert recorded[project][version]["torch"] == torch


def test_companion_pins_name_released_torch_versions(recorded: dict[str, Any]) -> None:
    torch_versions = {Version(v) for v in recorded["torch"]}
    for project in ("torchvision", "torchaudio"):
        for version, entry in recorded[project].items():
            if entry["torch"] is not None:
                assert Version(entry["torch"]).public in {str(v) for v in torch_versions}, f"{project} {version}"
