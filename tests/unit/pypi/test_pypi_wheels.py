"""Wheel filenames and the glibc Linux x86_64 / CPython filters (pure)."""

from __future__ import annotations

import pytest
from packaging.tags import Tag
from packaging.version import Version

from imagectl.errors import InputError, PackageIndexError
from imagectl.pypi import DistFile, cpython_abis, cpython_tag, linux_x86_64_wheels, parse_wheel, tag_runs_on_cpython

NAMES = [
    "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl",
    "torch-2.3.0-cp312-cp312-manylinux_2_28_x86_64.whl",
    "torch-2.3.0-cp311-cp311-manylinux_2_28_aarch64.whl",
    "torch-2.3.0-cp311-none-macosx_11_0_arm64.whl",
    "torch-2.3.0-cp311-cp311-win_amd64.whl",
    "torch-2.3.0-cp313-cp313t-manylinux_2_28_x86_64.whl",
    "torch-2.3.0-cp311-cp311-musllinux_1_2_x86_64.whl",
    "torch-2.3.0-cp310-cp310-linux_x86_64.whl",
    "ext-1.0-cp38-abi3-manylinux2014_x86_64.whl",
    "pure-1.0-py3-none-manylinux_2_28_x86_64.whl",
    "torch-2.3.0.tar.gz",
]
FILES = [DistFile(name, f"https://files.example/{name}") for name in NAMES]


def names(files: tuple[DistFile, ...]) -> list[str]:
    return [f.filename for f in files]


def test_parse_wheel() -> None:
    wheel = parse_wheel("torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert (wheel.name, wheel.version, wheel.build) == ("torch", Version("2.10.0"), (3, ""))
    assert wheel.tags == frozenset({Tag("cp311", "cp311", "manylinux_2_28_x86_64")})


@pytest.mark.parametrize("filename", ["torch-2.3.0.tar.gz", "torch-2.3.0-cp311.whl", "to rch-1-py3-none-any.whl"])
def test_parse_wheel_rejects_bad_names(filename: str) -> None:
    with pytest.raises(PackageIndexError, match="not a valid wheel filename"):
        parse_wheel(filename)


@pytest.mark.parametrize(("python", "tag"), [("3.11", "cp311"), ("3.9", "cp39"), ("3.13t", "cp313t")])
def test_cpython_tag(python: str, tag: str) -> None:
    assert cpython_tag(python) == tag


@pytest.mark.parametrize("python", ["3", "2.7", "3.11.4", "py311", "3.x"])
def test_cpython_tag_rejects_other_forms(python: str) -> None:
    with pytest.raises(InputError):
        cpython_tag(python)


def test_all_glibc_linux_x86_64_wheels() -> None:
    assert names(linux_x86_64_wheels(FILES)) == [
        "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl",
        "torch-2.3.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch-2.3.0-cp313-cp313t-manylinux_2_28_x86_64.whl",
        "torch-2.3.0-cp310-cp310-linux_x86_64.whl",
        "ext-1.0-cp38-abi3-manylinux2014_x86_64.whl",
        "pure-1.0-py3-none-manylinux_2_28_x86_64.whl",
    ]


def test_wheels_for_one_cpython() -> None:
    assert names(linux_x86_64_wheels(FILES, "3.11")) == [
        "torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl",
        "ext-1.0-cp38-abi3-manylinux2014_x86_64.whl",
        "pure-1.0-py3-none-manylinux_2_28_x86_64.whl",
    ]
    assert names(linux_x86_64_wheels(FILES, "3.13t")) == [
        "torch-2.3.0-cp313-cp313t-manylinux_2_28_x86_64.whl",
        "pure-1.0-py3-none-manylinux_2_28_x86_64.whl",
    ]


@pytest.mark.parametrize(
    ("tag", "python", "runs"),
    [
        (Tag("cp311", "cp311", "linux_x86_64"), "3.11", True),
        (Tag("cp311", "cp311", "linux_x86_64"), "3.12", False),
        (Tag("cp38", "abi3", "linux_x86_64"), "3.12", True),
        (Tag("cp312", "abi3", "linux_x86_64"), "3.11", False),
        (Tag("cp313", "abi3", "linux_x86_64"), "3.13t", False),
        (Tag("cp313", "cp313", "linux_x86_64"), "3.13t", False),
        (Tag("py311", "none", "any"), "3.11", True),
        (Tag("py2", "none", "any"), "3.11", False),
    ],
)
def test_tag_runs_on_cpython(tag: Tag, python: str, runs: bool) -> None:
    assert tag_runs_on_cpython(tag, python) is runs


def test_cpython_abis_sort_by_version_not_text() -> None:
    assert cpython_abis(FILES) == ("cp310", "cp311", "cp312", "cp313t")
