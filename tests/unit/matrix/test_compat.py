import pytest

from imagectl.errors import InputError
from imagectl.matrix.compat import check_combination, gpu_arch, node_verdicts, parse_combination
from imagectl.matrix.names import list_profiles


def verdicts(matrix, driver, gpu=None):
    return {v.profile: v for v in node_verdicts(list_profiles(matrix), driver, gpu_arch(gpu, matrix) if gpu else None,
                                                 runtime="legacy")}


def test_driver_floor(matrix):
    # the fixture's CUDA 12.8: full support from 570.124.06 (R570); no forward-compatible branches recorded
    v = verdicts(matrix, "535.104.05")
    assert v["torch-2.3-cu121"].ok and not v["torch-2.3-cu121"].notes
    assert v["torch-2.3-cu121"].mechanism == "full support"
    # an R535 driver reports CUDA 12.2: `cuda>=12.8` refuses it, and no brand/branch term admits it
    assert not v["torch-2.7-cu128"].ok
    assert "the NVIDIA container runtime refuses to start the image" in v["torch-2.7-cu128"].reasons[0]
    # an earlier R570 release reports 12.8 too: started, on the host's libcuda, under minor-version compatibility
    v = verdicts(matrix, "570.86.16")
    assert v["torch-2.7-cu128"].ok and "minor-version compatibility" in v["torch-2.7-cu128"].notes[0]
    assert v["torch-2.7-cu128"].mechanism == "minor-version compatibility"
    v = verdicts(matrix, "470.82.01")
    assert not v["torch-2.3-cu121"].ok and "below CUDA 12.1's driver branch R530" in v["torch-2.3-cu121"].reasons[0]
    assert not v["torch-2.3-cu118"].ok


def test_blackwell_needs_cuda_12_8(matrix):
    v = verdicts(matrix, "580.65.06", "B200")
    assert v["torch-2.7-cu128"].ok
    assert not v["torch-2.3-cu121"].ok and "B200 (sm_100)" in v["torch-2.3-cu121"].reasons[0]
    assert "newer CUDA build" in v["torch-2.3-cu121"].reasons[0]


@pytest.mark.parametrize("gpu, arch", [
    ("H100", "sm_90"), ("h100", "sm_90"), ("NVIDIA H100", "sm_90"), ("sm_86", "sm_86"), ("8.9", "sm_89"),
    ("rtx 5090", "sm_120"),
])
def test_gpu_names(matrix, gpu, arch):
    assert gpu_arch(gpu, matrix).arch == arch


def test_unknown_gpu_and_bad_driver(matrix):
    with pytest.raises(InputError, match="not a known GPU"):
        gpu_arch("Voodoo2", matrix)
    with pytest.raises(InputError, match="--driver"):
        node_verdicts(list_profiles(matrix), "latest", None)


def test_check_combination(matrix):
    combo = parse_combination(("torch==2.3.1", "cuda=12.1", "python=3.12", "nccl=2.20.5"), matrix)
    reasons, notes, profile = check_combination(combo, matrix)
    assert reasons == [] and profile.name == "torch-2.3.1-cu121-py3.12"
    combo = parse_combination(("torch==2.3", "cuda=11.8", "python=3.13", "cudnn=8.9", "driver=450.80.02"), matrix)
    reasons, notes, profile = check_combination(combo, matrix)
    assert any("Python 3.13" in r for r in reasons) and any("cudnn 8.7.0.84, not 8.9" in r for r in reasons)
    # 450.80.02 is 11.x's minor-version floor, but R450 is older than CUDA 11.8's R520: the runtime refuses the image
    assert any("NVIDIA container runtime refuses" in r for r in reasons)
    reasons, _, _ = check_combination(parse_combination(("torch==2.3.1", "cuda=12.4"), matrix), matrix)
    assert reasons == ["torch 2.3.1 has no CUDA 12.4 build (published: 12.1, 11.8)"]


@pytest.mark.parametrize("items, message", [
    (("cuda=12.1",), "name the framework"),
    (("tensorflow==2.15", "cuda=12.1"), "not a framework"),
    (("torch==2.3.1", "cuda=twelve"), "check: cuda"),
    (("torch==2.3.1", "color=red"), "is not FRAMEWORK==VERSION"),
    (("torch==2.3.1", "python=3"), "check: python"),
])
def test_check_bad_input(matrix, items, message):
    with pytest.raises(InputError, match=message):
        parse_combination(items, matrix)


@pytest.mark.parametrize("items, message", [
    (("torch==2.3.1", "torch==2.2.0"), r"check: 'torch==2.2.0': a framework is already given \(torch==2.3.1\)"),
    (("torch==2.3.1", "cuda=12.1", "cuda=11.8"), r"check: 'cuda=11.8': cuda is already given \(cuda=12.1\)"),
    (("python=3.11", "torch==2.3.1", "python=3.12"), r"python is already given"),
])
def test_an_item_given_twice_is_refused(matrix, items, message):
    with pytest.raises(InputError, match=message) as caught:
        parse_combination(items, matrix)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("items", [
    ("torch==2.3.1", "cuda=12.1"), ("torch=2.3", "cuda=12.1"), ("torch", "2.3", "cuda=12.1"), ("torch=2.3.1",),
])
def test_the_framework_can_be_given_three_ways(shipped_matrix, items):
    from imagectl.matrix.compat import parse_combination

    combo = parse_combination(items, shipped_matrix)
    assert (combo.framework, combo.version[:3]) == ("torch", "2.3")


def test_a_cudnn_query_names_every_build_that_has_it(shipped_matrix):
    from imagectl.matrix.compat import check_combination, parse_combination

    reasons, notes, profile = check_combination(parse_combination(("torch=2.5", "cudnn=9.1"), shipped_matrix),
                                                shipped_matrix)
    assert reasons == [] and profile is not None
    assert any(n.startswith("cudnn=9.1 is in 3 builds of torch 2.5.1: cu118 (cuDNN 9.1.0.70") and "cu124" in n
               for n in notes)
    reasons, _, _ = check_combination(parse_combination(("torch", "2.3", "cudnn=9.9"), shipped_matrix),
                                      shipped_matrix)
    assert reasons == ["no build of torch 2.3.1 ships cudnn 9.9 (cu118: 8.7.0.84, cu121: 8.9.2.26)"]
