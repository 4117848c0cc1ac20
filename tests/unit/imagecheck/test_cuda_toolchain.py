"""The devel flavour's toolchain check (templates/check/cuda_toolchain.py.j2), rendered and run on the host over
a stand-in ``torch.utils.cpp_extension`` (which finds CUDA_HOME as the real one does: ``$CUDA_HOME``, else the
directory above ``nvcc`` on PATH) and a fake ``nvcc``; its report goes through :func:`compare`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.config import Config
from imagectl.image_spec import ImageSpec
from imagectl.imagecheck.compare import compare, failed
from imagectl.labels import expectations, labels_for
from imagectl.matrix.names import resolve_profile
from imagectl.render.context import render_context
from imagectl.render.dockerfile import context_files, make_environment, render_template
from imagectl.shipped import template_dirs

PARTIAL = "check/cuda_toolchain.py.j2"
WHAT = "nvcc of CUDA_HOME for torch extensions"

CPP_EXTENSION = '''import os
import shutil


def _find_cuda_home():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        if nvcc is not None:
            home = os.path.dirname(os.path.dirname(nvcc))
    return home


CUDA_HOME = _find_cuda_home()
'''


def fake_torch(root: Path) -> Path:
    """A ``torch`` package with only ``torch.utils.cpp_extension.CUDA_HOME``."""
    pkg = root / "site"
    (pkg / "torch" / "utils").mkdir(parents=True)
    (pkg / "torch" / "__init__.py").write_text("")
    (pkg / "torch" / "utils" / "__init__.py").write_text("")
    (pkg / "torch" / "utils" / "cpp_extension.py").write_text(CPP_EXTENSION)
    return pkg


def fake_nvcc(home: Path, release: str) -> Path:
    """``HOME/bin/nvcc`` printing what ``nvcc --version`` of CUDA ``release`` prints."""
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n[ \"$1\" = --version ] || exit 2\n"
                    "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.105'\n"
                    f"echo 'Build cuda_{release}.r{release}/compiler.32688072_0'\n")
    nvcc.chmod(0o755)
    return nvcc


def run_partial(profile, tmp_path: Path, path: str, env: dict[str, str] | None = None):
    """Render the partial for ``profile``, run it with this Python; its ``cuda_toolchain_facts()``."""
    context = render_context(ImageSpec(profile), Config())
    text = render_template(make_environment(template_dirs(Config())), PARTIAL, context)
    script = tmp_path / "toolchain.py"
    script.write_text("import os\nimport subprocess\n" + text
                      + "\n\nimport json\nprint(json.dumps(cuda_toolchain_facts()))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True,
                         env={"PATH": path, "PYTHONPATH": str(fake_torch(tmp_path)), **(env or {})})
    return json.loads(out.stdout)


def judged(profile, facts):
    """The toolchain findings of a report carrying ``facts`` for an image of ``profile``."""
    report = {"python": profile.python, "packages": dict(profile.packages), "system_nccl": {},
              "framework": {"name": "torch", "version": profile.release.version, "cuda": profile.variant.cuda,
                            "cudnn": profile.variant.cudnn, "nccl": profile.variant.nccl}}
    if facts is not None:
        report["framework"]["cuda_toolchain"] = facts
    findings = compare(expectations(labels_for(ImageSpec(profile), profile.base_image)), report)
    return [f for f in findings if f.what == WHAT], failed(findings)


@pytest.fixture
def devel(matrix):
    return resolve_profile("torch-2.3-cu121-devel", matrix)


def test_nvcc_of_the_torch_cuda_on_path_passes(devel, tmp_path):
    nvcc = fake_nvcc(tmp_path / "cuda-12.1", "12.1")
    facts = run_partial(devel, tmp_path, f"{nvcc.parent}:/usr/bin:/bin")
    assert facts == {"expected_home": "/usr/local/cuda", "cuda_home": str(tmp_path / "cuda-12.1"), "nvcc": str(nvcc),
                     "nvcc_release": "12.1", "error": None}
    findings, bad = judged(devel, facts)
    assert [(f.expected, f.ok) for f in findings] == [("12.1", True)] and bad == []


def test_cuda_home_wins_over_path(devel, tmp_path):
    fake_nvcc(tmp_path / "on-path", "12.4")
    nvcc = fake_nvcc(tmp_path / "home", "12.1")
    facts = run_partial(devel, tmp_path, f"{tmp_path / 'on-path' / 'bin'}:/usr/bin:/bin",
                        {"CUDA_HOME": str(tmp_path / "home")})
    assert facts["nvcc"] == str(nvcc) and facts["nvcc_release"] == "12.1"


def test_nvcc_of_another_cuda_minor_fails(devel, tmp_path):
    nvcc = fake_nvcc(tmp_path / "cuda-12.4", "12.4")
    facts = run_partial(devel, tmp_path, f"{nvcc.parent}:/usr/bin:/bin")
    findings, bad = judged(devel, facts)
    assert [(f.what, f.expected, f.actual) for f in bad] == [(WHAT, "12.1", f"nvcc 12.4 at {nvcc}")]


def test_no_nvcc_fails(devel, tmp_path):
    facts = run_partial(devel, tmp_path, "/usr/bin:/bin", {"CUDA_HOME": str(tmp_path / "nowhere")})
    assert facts["nvcc"] is None and "finds no nvcc" in facts["error"]
    _, bad = judged(devel, facts)
    assert [(f.what, f.actual) for f in bad] == [(WHAT, facts["error"])]


def test_an_nvcc_that_names_no_release_fails(devel, tmp_path):
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("#!/bin/sh\necho garbage\n")
    (tmp_path / "cuda" / "bin" / "nvcc").chmod(0o755)
    facts = run_partial(devel, tmp_path, "/usr/bin:/bin", {"CUDA_HOME": str(tmp_path / "cuda")})
    assert facts["nvcc_release"] is None and "names no release" in facts["error"]
    assert [f.what for f in judged(devel, facts)[1]] == [WHAT]


def test_a_flavour_without_the_toolkit_reports_nothing_and_gets_no_finding(matrix, tmp_path):
    runtime = resolve_profile("torch-2.3-cu121", matrix)
    assert run_partial(runtime, tmp_path, "/usr/bin:/bin") is None
    assert judged(runtime, None) == ([], [])


def test_the_check_script_reports_the_toolchain_only_on_devel(matrix, devel):
    check = context_files(ImageSpec(devel), Config())["imagectl-check.py"].decode()
    assert '_CUDA_HOME_EXPECTED = "/usr/local/cuda"\n' in check
    assert 'facts["cuda_toolchain"] = toolchain' in check
    compile(check, "check.py", "exec")
    runtime = context_files(ImageSpec(resolve_profile("torch-2.3-cu121", matrix)), Config())["imagectl-check.py"]
    runtime = runtime.decode()
    assert '_CUDA_HOME_EXPECTED = ""\n' in runtime
