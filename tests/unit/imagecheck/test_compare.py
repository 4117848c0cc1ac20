import json

import pytest

from imagectl.imagecheck.compare import compare, failed, format_findings, parse_report
from imagectl.labels import expectations
from imagectl.errors import OperationError

LABELS = {
    "imagectl.framework": "torch", "imagectl.framework.version": "2.3.1", "imagectl.cuda": "12.1",
    "imagectl.cudnn": "8.9.2.26", "imagectl.nccl": "2.20.5", "imagectl.python": "3.11",
    "imagectl.packages": "nvidia-nccl-cu12==2.20.5,torch==2.3.1,torchvision==0.18.1",
}


def report(**changes):
    base = {
        "python": "3.11.2",
        "packages": {"nvidia-nccl-cu12": "2.20.5", "torch": "2.3.1+cu121", "torchvision": "0.18.1", "pip": "23.0"},
        "system_nccl": {"env": "2.20.5-1", "dpkg": None},
        "gpu_requested": False,
        "framework": {"name": "torch", "version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.20.5"},
    }
    base.update(changes)
    return base


def test_matching_image_passes():
    findings = compare(expectations(LABELS), report())
    assert failed(findings) == [] and all(f.ok for f in findings)


@pytest.mark.parametrize("change, what", [
    ({"python": "3.10.12"}, "python"),
    ({"framework": {"version": "2.3.0", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.20.5"}}, "torch version"),
    ({"framework": {"version": "2.3.1", "cuda": "11.8", "cudnn": "8.9.2", "nccl": "2.20.5"}}, "torch CUDA"),
    ({"framework": {"version": "2.3.1", "cuda": "12.1", "cudnn": "8.7.0", "nccl": "2.20.5"}}, "cudnn loaded by torch"),
    ({"framework": {"version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.19.3"}}, "nccl loaded by torch"),
    ({"framework": {"error": "ImportError: libcudnn.so.8"}}, "torch version"),
    ({"packages": {"torch": "2.3.1", "torchvision": "0.18.1"}}, "pip nvidia-nccl-cu12"),
])
def test_each_mismatch_fails(change, what):
    bad = failed(compare(expectations(LABELS), report(**change)))
    assert what in [f.what for f in bad]


def test_system_nccl_difference_is_a_warning():
    findings = compare(expectations(LABELS), report(system_nccl={"env": "2.17.1-1", "dpkg": "2.17.1-1+cuda12.1"}))
    warnings = [f for f in findings if not f.ok]
    assert failed(findings) == [] and len(warnings) == 2 and all(f.severity == "warning" for f in warnings)
    assert "warn  NCCL_VERSION of the base image" in format_findings(findings)


def test_gpu_part():
    no_gpu = compare(expectations(LABELS), report(gpu_requested=True))
    assert [f.severity for f in no_gpu if not f.ok] == ["warning"]
    fw = {"version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.20.5",
          "gpu": {"available": True, "matmul_ok": True, "allreduce_ok": False}}
    findings = compare(expectations(LABELS), report(gpu_requested=True, framework=fw))
    assert [f.what for f in failed(findings)] == ["NCCL all-reduce (1 process)"]


def test_parse_report_and_foreign_images():
    assert parse_report("pip noise\n" + json.dumps(report()) + "\n")["python"] == "3.11.2"
    with pytest.raises(OperationError, match="printed no report"):
        parse_report("Traceback ...\nModuleNotFoundError: torch")
    with pytest.raises(OperationError, match="no imagectl labels"):
        expectations({"maintainer": "someone"})
