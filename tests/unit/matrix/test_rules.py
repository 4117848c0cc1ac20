from dataclasses import replace

from imagectl.matrix import rules
from imagectl.matrix.names import list_profiles, resolve_profile


def variant_profile(matrix, name="torch-2.3-cu121", **changes):
    p = resolve_profile(name, matrix)
    return replace(p, variant=replace(p.variant, **changes))


def test_fixture_matrix_holds(matrix):
    assert rules.run_rules(list_profiles(matrix)) == []


def test_python_supported(matrix):
    p = replace(resolve_profile("torch-2.3-cu121", matrix), python="3.13")
    [v] = rules.python_supported(p)
    assert v.rule == "python-supported" and "3.13" in v.message and "torch.toml" in v.source


def test_python_available(matrix):
    p = replace(resolve_profile("torch-2.3-cu121", matrix), python="3.12")
    [v] = rules.python_available(p)
    assert "neither ubuntu22.04's python3 (3.10)" in v.message
    assert rules.python_available(resolve_profile("torch-2.3-cu121-py3.11", matrix)) == []


def test_cudnn_and_nccl_must_equal_pins(matrix):
    [v] = rules.cudnn_pin_agrees(variant_profile(matrix, cudnn="8.9.7.29"))
    assert "cudnn = 8.9.7.29 but pins say nvidia-cudnn-cu12==8.9.2.26" in v.message
    [v] = rules.nccl_pin_agrees(variant_profile(matrix, nccl="2.19.3"))
    assert "nvidia-nccl-cu12==2.20.5" in v.message


def test_cuda_runtime_agrees(matrix):
    p = variant_profile(matrix, pins=(("nvidia-cuda-runtime-cu12", "12.4.127"),))
    [v] = rules.cuda_runtime_agrees(p)
    assert "CUDA 12.1 build pins nvidia-cuda-runtime-cu12==12.4.127" in v.message


def test_pin_suffix_agrees(matrix):
    p = variant_profile(matrix, pins=(("nvidia-nccl-cu11", "2.20.5"),))
    [v] = rules.pin_suffix_agrees(p)
    assert "for CUDA 11" in v.message


def test_pypi_pins_complete(matrix):
    [v] = rules.pypi_pins_complete(variant_profile(matrix, nccl=None))
    assert v.rule == "pypi-pins-complete"


def test_driver_floors_and_release(matrix):
    p = resolve_profile("torch-2.3-cu121", matrix)
    bad = replace(p, toolkit=replace(p.toolkit, min_driver_compat="999.0", release="12.2.0"))
    assert [v.rule for v in rules.driver_floors_ordered(bad)] == ["driver-floors"]
    assert [v.rule for v in rules.toolkit_release_matches(bad)] == ["toolkit-release"]


def test_run_rules_reports_each_violation_once(matrix):
    p = resolve_profile("torch-2.3-cu121", matrix)
    bad = replace(p, toolkit=replace(p.toolkit, min_driver_compat="999.0"))
    assert len(rules.run_rules([bad, bad, bad])) == 1
