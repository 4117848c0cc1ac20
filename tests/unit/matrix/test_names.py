from dataclasses import replace

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
        "torch-2.7-cu128", "torch-2.7-cu128-devel", "torch-2.7-cu128-base",
        "torch-2.7-cu128-ubuntu24.04", "torch-2.7-cu128-ubuntu24.04-devel", "torch-2.7-cu128-ubuntu24.04-base",
        "torch-2.3-cu121", "torch-2.3-cu121-devel", "torch-2.3-cu121-base",
        "torch-2.3-cu118", "torch-2.3-cu118-devel", "torch-2.3-cu118-base",
    ]
    assert all(resolve_profile(n, matrix).name == n for n in names)


def wheel_default(matrix, **variant_changes):
    """The test matrix with ``[base] wheel_cuda_flavor = "base"`` (as the shipped one has), each variant changed
    by ``variant_changes``."""
    fw = matrix.frameworks["torch"]
    releases = tuple(replace(r, variants=tuple(replace(v, **variant_changes) for v in r.variants))
                     for r in fw.releases)
    return replace(matrix, base=replace(matrix.base, wheel_cuda_flavor="base"),
                   frameworks={"torch": replace(fw, releases=releases)})


def test_a_build_whose_pins_bring_nvidia_wheels_defaults_to_the_wheel_flavor(matrix):
    m = wheel_default(matrix)
    p = resolve_profile("torch-2.3-cu121", m)
    assert (p.name, p.flavor) == ("torch-2.3-cu121", "base") and p.variant.wheel_cuda
    assert str(p.base_image) == "docker.io/nvidia/cuda:12.1.1-base-ubuntu22.04"
    assert resolve_profile("torch-2.3-cu121-base", m).name == "torch-2.3-cu121"  # the default suffix is dropped
    runtime = resolve_profile("torch-2.3-cu121-py3.11-runtime", m)
    assert runtime.name == "torch-2.3-cu121-runtime-py3.11" and runtime.flavor == "runtime"
    assert str(runtime.base_image).endswith("nvidia/cuda:12.1.1-runtime-ubuntu22.04")
    assert [p.name for p in list_profiles(m)][6:9] == ["torch-2.3-cu121", "torch-2.3-cu121-runtime",
                                                       "torch-2.3-cu121-devel"]


def test_a_build_without_nvidia_wheels_keeps_runtime_and_cannot_use_base(matrix):
    m = wheel_default(matrix, pins=(("triton", "2.3.1"),))
    p = resolve_profile("torch-2.3-cu121", m)
    assert (p.name, p.flavor, p.variant.wheel_cuda) == ("torch-2.3-cu121", "runtime", False)
    assert resolve_profile("torch-2.3-cu121-devel", m).flavor == "devel"
    with pytest.raises(UnknownProfileError, match="flavour base has no CUDA libraries and the build's pins bring"
                                                  r" no nvidia-\* wheels \(flavours: runtime, devel\)"):
        resolve_profile("torch-2.3-cu121-base", m)
    assert not any(p.flavor == "base" for p in list_profiles(m))


def test_shipped_torch_2_3_cu121_is_built_on_base(shipped_matrix):
    p = resolve_profile("torch-2.3-cu121", shipped_matrix)
    assert (p.name, p.flavor) == ("torch-2.3-cu121", "base")
    assert str(p.base_image) == "docker.io/nvidia/cuda:12.1.1-base-ubuntu22.04"
    assert resolve_profile("torch-2.3-cu121-runtime", shipped_matrix).name == "torch-2.3-cu121-runtime"
    listed = {p.name: p.flavor for p in list_profiles(shipped_matrix)}
    assert all(f == "base" for n, f in listed.items() if not n.endswith(("-runtime", "-devel"))
               and resolve_profile(n, shipped_matrix).variant.wheel_cuda)


def test_packages_pin_framework_companions_and_wheels(matrix):
    pkgs = dict(resolve_profile("torch-2.3-cu118", matrix).packages)
    assert pkgs["torch"] == "2.3.1" and pkgs["torchvision"] == "0.18.1" and pkgs["nvidia-cudnn-cu11"] == "8.7.0.84"
