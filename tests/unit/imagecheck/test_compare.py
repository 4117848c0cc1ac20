import json

import pytest

from imagectl.cli.finding_views import format_findings
from imagectl.imagecheck.compare import compare, failed, parse_report
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


def with_compile(compiled):
    return report(framework={"version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.20.5",
                             "compile": compiled})


def test_compile_findings():
    ok = {"api": "torch.compile", "cpu": {"ok": True, "error": None}}
    findings = compare(expectations(LABELS), with_compile(ok))
    assert [(f.what, f.expected, f.actual, f.ok) for f in findings if "compile" in f.what] == [
        ("torch.compile on CPU", "ok", "ok", True)]
    no_cxx = {"api": "torch.compile", "cpu": {"ok": False, "error": "InvalidCxxCompiler: No working C++ compiler"},
              "gpu": {"ok": False, "error": "RuntimeError: Failed to find C compiler."}}
    bad = failed(compare(expectations(LABELS), with_compile(no_cxx)))
    assert [(f.what, f.actual, f.severity) for f in bad] == [
        ("torch.compile on CPU", "InvalidCxxCompiler: No working C++ compiler", "error"),
        ("torch.compile on GPU", "RuntimeError: Failed to find C compiler.", "error")]
    assert "FAIL  torch.compile on CPU: expected ok, found InvalidCxxCompiler" in format_findings(bad)


@pytest.mark.parametrize("compiled", [None, {}, "garbage", {"api": "torch.compile"}, {"cpu": "ok?"}])
def test_a_report_without_compile_results_has_no_compile_finding(compiled):
    """Images checked by an older script (no ``framework.compile``) still compare."""
    findings = compare(expectations(LABELS), with_compile(compiled))
    assert failed(findings) == [] and not [f for f in findings if "on CPU" in f.what or "on GPU" in f.what]


def test_a_compile_result_without_ok_true_fails():
    bad = failed(compare(expectations(LABELS), with_compile({"api": "jax.jit", "cpu": {"ok": "yes"}})))
    assert [(f.what, f.actual) for f in bad] == [("jax.jit on CPU", "failed")]


def with_toolchain(toolchain, cuda="12.1"):
    return report(framework={"name": "torch", "version": "2.3.1", "cuda": cuda, "cudnn": "8.9.2", "nccl": "2.20.5",
                             "cuda_toolchain": toolchain})


NVCC = "/usr/local/cuda/bin/nvcc"
TOOLCHAIN_WHAT = "nvcc of CUDA_HOME for torch extensions"


def test_a_devel_image_whose_nvcc_matches_torch_cuda_passes():
    found = {"cuda_home": "/usr/local/cuda", "nvcc": NVCC, "nvcc_release": "12.1", "error": None}
    findings = [f for f in compare(expectations(LABELS), with_toolchain(found)) if f.what == TOOLCHAIN_WHAT]
    assert [(f.expected, f.actual, f.ok) for f in findings] == [("12.1", f"nvcc 12.1 at {NVCC}", True)]


@pytest.mark.parametrize("toolchain, actual", [
    ({"cuda_home": "/usr/local/cuda", "nvcc": NVCC, "nvcc_release": "12.4", "error": None}, f"nvcc 12.4 at {NVCC}"),
    ({"cuda_home": None, "nvcc": None, "nvcc_release": None,
      "error": "torch.utils.cpp_extension finds no nvcc (CUDA_HOME None)"},
     "torch.utils.cpp_extension finds no nvcc (CUDA_HOME None)"),
    ({"cuda_home": "/usr/local/cuda", "nvcc": NVCC, "nvcc_release": None, "error": None}, "no nvcc"),
    ({}, "no nvcc"),
])
def test_a_devel_image_without_a_matching_nvcc_fails(toolchain, actual):
    bad = failed(compare(expectations(LABELS), with_toolchain(toolchain)))
    assert [(f.what, f.expected, f.actual, f.severity) for f in bad] == [(TOOLCHAIN_WHAT, "12.1", actual, "error")]


def test_nvcc_is_compared_with_the_cuda_torch_was_built_with():
    """torch.version.cuda is the reference (its own finding says when that differs from the labels)."""
    found = {"cuda_home": "/usr/local/cuda", "nvcc": NVCC, "nvcc_release": "11.8", "error": None}
    findings = compare(expectations(LABELS), with_toolchain(found, cuda="11.8"))
    assert {f.what for f in failed(findings)} == {"torch CUDA"}
    nocuda = failed(compare(expectations(LABELS), with_toolchain(found, cuda=None)))
    assert TOOLCHAIN_WHAT in {f.what for f in nocuda}


@pytest.mark.parametrize("toolchain", [None, "garbage", ["list"]])
def test_a_flavour_without_the_toolkit_has_no_toolchain_finding(toolchain):
    findings = compare(expectations(LABELS), with_toolchain(toolchain))
    assert failed(findings) == [] and TOOLCHAIN_WHAT not in {f.what for f in findings}
    assert TOOLCHAIN_WHAT not in {f.what for f in compare(expectations(LABELS), report())}


WHEELS = "/opt/venv/lib/python3.11/site-packages/nvidia"


def library(path, version, origin="system"):
    return {"path": path, "origin": origin, "version": version}


def library_findings(libraries):
    return {f.what: f for f in compare(expectations(LABELS), report(libraries=libraries)) if "origin" in f.what}


def test_libraries_from_the_wheels_are_ok():
    found = library_findings({
        "libcudnn": library(f"{WHEELS}/cudnn/lib/libcudnn.so.8", "8", "site-packages"),
        "libnccl": library(f"{WHEELS}/nccl/lib/libnccl.so.2", "2", "site-packages"),
    })
    assert set(found) == {"libcudnn origin", "libnccl origin"} and all(f.ok for f in found.values())
    assert found["libnccl origin"].actual == f"{WHEELS}/nccl/lib/libnccl.so.2"


def test_a_system_library_at_another_version_than_the_pin_fails():
    libraries = {"libnccl": library("/usr/lib/x86_64-linux-gnu/libnccl.so.2.17.1", "2.17.1")}
    bad = failed(compare(expectations(LABELS), report(libraries=libraries)))
    assert [(f.what, f.expected, f.actual) for f in bad] == [
        ("libnccl origin", "site-packages or system 2.20.5",
         "system 2.17.1: /usr/lib/x86_64-linux-gnu/libnccl.so.2.17.1"),
    ]


def test_a_system_library_at_the_stated_version_passes_and_an_unpinned_one_warns():
    found = library_findings({
        "libcudnn": library("/usr/lib/x86_64-linux-gnu/libcudnn.so.8.9.2", "8.9.2"),  # the profile states 8.9.2.26
        "libcublas": library("/usr/local/cuda-12.1/targets/x86_64-linux/lib/libcublas.so.12.1.3.1", "12.1.3.1"),
    })
    assert found["libcudnn origin"].ok
    cublas = found["libcublas origin"]  # LABELS pin no nvidia-cublas-cu12: nothing to compare with
    assert (cublas.ok, cublas.severity) == (False, "warning")
    assert cublas.expected == "site-packages or system (nothing pinned)"


def test_the_pin_names_the_version_of_a_system_library():
    labels = {**LABELS, "imagectl.packages": LABELS["imagectl.packages"] + ",nvidia-cublas-cu12==12.1.3.1"}
    libraries = {"libcublas": library("/usr/local/cuda/lib64/libcublas.so.12.1.0.26", "12.1.0.26")}
    [bad] = [f for f in failed(compare(expectations(labels), report(libraries=libraries))) if "origin" in f.what]
    assert bad.what == "libcublas origin" and bad.expected == "site-packages or system 12.1.3.1"


def test_libraries_not_loaded_give_no_finding():
    assert library_findings({}) == {} and library_findings(None) == {}
    assert "origin" not in format_findings(compare(expectations(LABELS), report()))


def test_no_system_nccl_no_warning():
    """The base flavour sets no NCCL_VERSION and has no libnccl2: nothing to warn about."""
    findings = compare(expectations(LABELS), report(system_nccl={"env": None, "dpkg": None}))
    assert not [f for f in findings if "NCCL_VERSION" in f.what or "libnccl2" in f.what]
    assert all(f.ok for f in findings)
