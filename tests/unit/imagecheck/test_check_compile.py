"""The in-image check's compile step, run for real over tiny stand-in ``torch`` and ``jax`` packages.

The rendered check script (``imagectl-check.py``) runs in a subprocess with a stand-in package first on
``PYTHONPATH``: tensors are lists of floats, and ``torch.compile`` / ``jax.jit`` work, fail the way inductor
fails without a C++ compiler (``FAKE_COMPILE=no-cxx``), fail only on CUDA the way Triton fails without a C
compiler (``no-cc-on-cuda``) or return a wrong result (``wrong``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.config import Config
from imagectl.image_spec import ImageSpec
from imagectl.imagecheck.compare import compare, failed
from imagectl.labels import expectations_from_profile
from imagectl.matrix.names import resolve_profile
from imagectl.render.dockerfile import context_files
from tests.standin_tensor import TENSOR_SOURCE

# The stand-in tensors (shared with the integration stand-in wheels) and a compiler that FAKE_COMPILE steers.
_LISTS = TENSOR_SOURCE + '''

import os


def compiled_like(fn, failed):
    """``fn`` as a compiler that behaves as FAKE_COMPILE says would make it (``failed`` builds the error)."""
    mode = os.environ.get("FAKE_COMPILE", "ok")

    def run(x):
        if mode in ("no-cxx", "no-python-h") or (mode == "no-cc-on-cuda" and x.device == "cuda"):
            raise failed(mode)
        result = fn(x)
        return result * 1.5 if mode == "wrong" else result

    return run
'''

_TORCH = '''
"""A stand-in torch: versions, list tensors and a compile whose behaviour FAKE_COMPILE sets."""
import os
from types import SimpleNamespace

from torch._lists import Tensor, allclose, arange, compiled_like, float32, sin  # noqa: F401

__version__ = "2.3.1+cu121"
version = SimpleNamespace(cuda="12.1")
backends = SimpleNamespace(cudnn=SimpleNamespace(version=lambda: 8902))
cuda = SimpleNamespace(is_available=lambda: os.environ.get("FAKE_CUDA") == "1", device_count=lambda: 1,
                       nccl=SimpleNamespace(version=lambda: (2, 20, 5)))


class BackendCompilerFailed(RuntimeError):
    pass


def _failure(mode):
    if mode == "no-python-h":  # as torch 2.3.1 words it with g++ but no python3.X-dev
        command = "g++ /tmp/torchinductor_root/k.cpp " + "-I/opt/venv/include " * 40
        return BackendCompilerFailed("backend='inductor' raised:\\nCppCompileError: C++ compile error\\n\\nCommand:\\n"
                                     + command + "\\n\\nOutput:\\n/tmp/torchinductor_root/k.cpp:22:10: fatal error: "
                                     "Python.h: No such file or directory\\n\\nSet TORCH_LOGS=+dynamo for more")
    if mode == "no-cxx":
        return BackendCompilerFailed("backend='inductor' raised:\\nInvalidCxxCompiler: No working C++ compiler "
                                     "found in torch._inductor.config.cpp.cxx: (None, 'g++')\\n\\n"
                                     "Set TORCH_LOGS=+dynamo for more")
    return BackendCompilerFailed("backend='inductor' raised:\\nRuntimeError: Failed to find C compiler. Please "
                                 "specify via CC environment variable.")


def compile(fn, **kwargs):
    return compiled_like(fn, _failure)
'''

_JAX = '''
"""A stand-in jax: a CPU device, list arrays and a jit whose behaviour FAKE_COMPILE sets."""
import contextlib
from types import SimpleNamespace

from jax import numpy  # noqa: F401
from jax._lists import compiled_like

__version__ = "0.12.0.1"


def devices(platform=None):
    if platform not in (None, "cpu"):
        raise RuntimeError("Unknown backend %s" % platform)
    return [SimpleNamespace(platform="cpu")]


def device_put(x, device):
    return x


@contextlib.contextmanager
def disable_jit():
    yield


def jit(fn):
    return compiled_like(fn, lambda mode: RuntimeError("XLA compilation failed (%s)" % mode))
'''


@pytest.fixture
def standins(tmp_path: Path) -> Path:
    """A folder holding the stand-in ``torch``, ``jax`` (with ``jax.numpy``) and ``jaxlib`` packages."""
    root = tmp_path / "standins"
    files = {
        "torch/__init__.py": _TORCH, "torch/_lists.py": _LISTS,
        "jax/__init__.py": _JAX, "jax/_lists.py": _LISTS,
        "jax/numpy.py": "from jax._lists import allclose, arange, float32, sin  # noqa: F401\n",
        "jaxlib/__init__.py": "__version__ = '0.12.0.1'\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def check_script(profile, tmp_path: Path) -> Path:
    """The profile's rendered in-image check script, written to ``tmp_path``."""
    path = tmp_path / f"{profile.name}-check.py"
    path.write_bytes(context_files(ImageSpec(profile), Config())["imagectl-check.py"])
    return path


def run_python(standins: Path, argv: list[str], **env: str) -> str:
    """Run ``python ARGV`` with the stand-ins first on PYTHONPATH; its stdout (fails the test on a crash)."""
    environ = {**os.environ, "PYTHONPATH": str(standins), **env}
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=environ, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def report_of(script: Path, standins: Path, **env: str) -> dict:
    """The JSON report the check script prints."""
    return json.loads(run_python(standins, [str(script)], **env).strip().splitlines()[-1])


@pytest.fixture
def torch_profile(matrix):
    return resolve_profile("torch-2.3-cu121", matrix)


def test_torch_compile_on_the_cpu_matches_eager_mode(torch_profile, standins, tmp_path):
    report = report_of(check_script(torch_profile, tmp_path), standins, FAKE_COMPILE="ok")
    assert report["framework"]["compile"] == {"api": "torch.compile", "cpu": {"ok": True, "error": None}}
    findings = [f for f in compare(expectations_from_profile(torch_profile), report) if "compile" in f.what]
    assert [(f.what, f.actual, f.ok) for f in findings] == [("torch.compile on CPU", "ok", True)]


def test_no_cxx_compiler_fails_the_check_with_inductors_error(torch_profile, standins, tmp_path):
    report = report_of(check_script(torch_profile, tmp_path), standins, FAKE_COMPILE="no-cxx")
    cpu = report["framework"]["compile"]["cpu"]
    assert cpu["ok"] is False and "\n" not in cpu["error"] and "TORCH_LOGS" not in cpu["error"]
    assert cpu["error"].startswith("BackendCompilerFailed: backend='inductor' raised: InvalidCxxCompiler: No working")
    assert report["framework"]["version"] == "2.3.1"  # the rest of the report is still there
    bad = [f for f in failed(compare(expectations_from_profile(torch_profile), report)) if "compile" in f.what]
    assert [f.what for f in bad] == ["torch.compile on CPU"] and "InvalidCxxCompiler" in bad[0].actual


def test_a_long_compiler_error_keeps_its_start_and_the_compilers_own_words(torch_profile, standins, tmp_path):
    report = report_of(check_script(torch_profile, tmp_path), standins, FAKE_COMPILE="no-python-h")
    error = report["framework"]["compile"]["cpu"]["error"]
    assert len(error) <= 405 and " ... " in error
    assert error.startswith("BackendCompilerFailed: backend='inductor' raised: CppCompileError: C++ compile error")
    assert error.endswith("k.cpp:22:10: fatal error: Python.h: No such file or directory")


def test_a_compiled_result_that_differs_from_eager_mode_fails(torch_profile, standins, tmp_path):
    report = report_of(check_script(torch_profile, tmp_path), standins, FAKE_COMPILE="wrong")
    differs = {"ok": False, "error": "the compiled result differs from eager mode"}
    assert report["framework"]["compile"]["cpu"] == differs


@pytest.mark.parametrize("cuda, mode, expected", [
    ("1", "ok", {"cpu": {"ok": True, "error": None}, "gpu": {"ok": True, "error": None}}),
    ("1", "no-cc-on-cuda", {"cpu": {"ok": True, "error": None},
                            "gpu": {"ok": False, "error": "BackendCompilerFailed: backend='inductor' raised: "
                                    "RuntimeError: Failed to find C compiler. Please specify via CC environment "
                                    "variable."}}),
    ("0", "ok", {"cpu": {"ok": True, "error": None}}),  # --gpu without a GPU: the CPU only
])
def test_with_gpu_the_same_runs_on_cuda(torch_profile, standins, tmp_path, cuda, mode, expected):
    """``compile_facts(torch, gpu=True)`` of the rendered script (the GPU matmul and all-reduce need more than
    a stand-in, so the script's compile step is called alone)."""
    driver = ("import json, runpy, sys, torch; facts = runpy.run_path(sys.argv[1])['compile_facts'](torch, True); "
              "print(json.dumps(facts))")
    script = check_script(torch_profile, tmp_path)
    facts = json.loads(run_python(standins, ["-c", driver, str(script)], FAKE_CUDA=cuda, FAKE_COMPILE=mode))
    assert facts == {"api": "torch.compile", **expected}


@pytest.mark.parametrize("mode, ok", [("ok", True), ("no-cxx", False), ("wrong", False)])
def test_jax_jit_on_the_cpu(shipped_matrix, standins, tmp_path, mode, ok):
    profile = resolve_profile("jax-0.12-cuda12", shipped_matrix)
    report = report_of(check_script(profile, tmp_path), standins, FAKE_COMPILE=mode)
    assert report["framework"]["compile"]["api"] == "jax.jit"
    assert report["framework"]["compile"]["cpu"]["ok"] is ok and "gpu" not in report["framework"]["compile"]
    finding = next(f for f in compare(expectations_from_profile(profile), report) if f.what == "jax.jit on CPU")
    assert finding.ok is ok and (finding in failed([finding])) is not ok
