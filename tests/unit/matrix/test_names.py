import pytest

from imagectl.errors import UnknownProfileError
from imagectl.matrix.names import list_profiles, resolve_profile


def test_minor_resolves_to_newest_patch(matrix):
    p = resolve_profile("torch-2.3-cu121", matrix)
    assert p.name == "torch-2.3-cu121" and p.release.version == "2.3.1"
    assert p.python == "3.10" and p.flavor == "runtime" and p.os.name == "ubuntu22.04"
    assert str(p.base_image) == "docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04"


def test_named_patch_python_flavor_os(matrix):
    assert resolve_profile("torch-2.3.0-cu121", matrix).release.version == "2.3.0"
    p = resolve_profile("torch-2.3-cu121-py3.11", matrix)
    assert (p.name, p.python) == ("torch-2.3-cu121-py3.11", "3.11")
    p = resolve_profile("torch-2.7-cu128-py3.12-devel-ubuntu24.04", matrix)
    assert p.name == "torch-2.7-cu128-ubuntu24.04-devel"  # py3.12 is ubuntu24.04's default: dropped
    assert str(p.base_image).endswith("nvidia/cuda:12.8.1-devel-ubuntu24.04")


def test_default_python_suffix_is_canonicalised(matrix):
    assert resolve_profile("torch-2.3-cu121-py3.10", matrix).name == "torch-2.3-cu121"


def test_python_override_argument(matrix):
    assert resolve_profile("torch-2.3-cu121", matrix, python="3.11").name == "torch-2.3-cu121-py3.11"


@pytest.mark.parametrize(
    "name, message",
    [
        ("torch-2.3-cu118x", "is not a profile name|unknown"),
        ("torch-2.4-cu121", "names no torch release 2.4.*closest: torch-2.3-cu121"),
        ("torhc-2.3-cu121", "names no framework.*closest: torch-2.3-cu121"),
        ("torch-2.3-cu124", "names no CUDA build cu124 of torch 2.3.1 \\(cu118, cu121\\)"),
        ("torch-2.3", "ambiguous: name a CUDA build of torch 2.3.1 \\(cu118, cu121\\)"),
        ("torch-2.3-cu121-py3.13", "has no wheels for Python 3.13"),
        ("torch-2.3-cu121-ubuntu24.04", "no ubuntu24.04 base image for CUDA 12.1"),
        ("torch-2.3-cu121-slim", "unknown or repeated suffix -slim"),
        ("torch-2.3-cu121-devel-devel", "repeated suffix"),
        ("x; rm -rf /", "is not a profile name"),
    ],
)
def test_unknown_and_ambiguous_names(matrix, name, message):
    with pytest.raises(UnknownProfileError, match=message):
        resolve_profile(name, matrix)


def test_list_profiles_covers_every_variant_os_flavor(matrix):
    names = [p.name for p in list_profiles(matrix)]
    assert names == [
        "torch-2.7-cu128", "torch-2.7-cu128-devel", "torch-2.7-cu128-ubuntu24.04", "torch-2.7-cu128-ubuntu24.04-devel",
        "torch-2.3-cu121", "torch-2.3-cu121-devel", "torch-2.3-cu118", "torch-2.3-cu118-devel",
    ]
    assert all(resolve_profile(n, matrix).name == n for n in names)


def test_packages_pin_framework_companions_and_wheels(matrix):
    pkgs = dict(resolve_profile("torch-2.3-cu118", matrix).packages)
    assert pkgs["torch"] == "2.3.1" and pkgs["torchvision"] == "0.18.1" and pkgs["nvidia-cudnn-cu11"] == "8.7.0.84"
