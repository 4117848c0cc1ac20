"""The in-image check's library-origin report: the rendered check script's ``library_origins`` over a fake
``/proc/self/maps``, and what ``compare`` makes of it."""

from __future__ import annotations

from typing import Any

import pytest

from imagectl.config import Config
from imagectl.image_spec import ImageSpec
from imagectl.imagecheck.compare import compare, failed
from imagectl.labels import expectations_from_profile
from imagectl.matrix.names import resolve_profile
from imagectl.render.dockerfile import context_files

SITE = "/opt/venv/lib/python3.11/site-packages"
MAPS = f"""\
55d0c0a00000-55d0c0a2c000 r--p 00000000 00:2f 1234   /opt/venv/bin/python3.11
7f1c00000000-7f1c00200000 r-xp 00000000 00:2f 2001   {SITE}/torch/lib/libtorch_cuda.so
7f1c10000000-7f1c10100000 r--p 00000000 00:2f 2002   {SITE}/nvidia/cudnn/lib/libcudnn_ops_infer.so.8
7f1c10100000-7f1c10200000 r-xp 00000000 00:2f 2003   {SITE}/nvidia/cudnn/lib/libcudnn.so.8
7f1c10200000-7f1c10300000 r--p 00100000 00:2f 2003   {SITE}/nvidia/cudnn/lib/libcudnn.so.8
7f1c20000000-7f1c20100000 r-xp 00000000 00:2f 2004   {SITE}/nvidia/cublas/lib/libcublasLt.so.12
7f1c20100000-7f1c20200000 r-xp 00000000 00:2f 2005   {SITE}/nvidia/cublas/lib/libcublas.so.12
7f1c30000000-7f1c30100000 r-xp 00000000 00:2f 3001   /usr/lib/x86_64-linux-gnu/libnccl.so.2.17.1
7f1c40000000-7f1c40001000 rw-p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]
"""


@pytest.fixture
def check_script(matrix) -> tuple[dict[str, Any], Any]:
    """The names the rendered check script of torch-2.3-cu121 defines (run as a module, not as ``__main__``),
    and the profile."""
    profile = resolve_profile("torch-2.3-cu121", matrix)
    source = context_files(ImageSpec(profile), Config())["imagectl-check.py"].decode()
    names: dict[str, Any] = {"__name__": "imagectl_check"}
    exec(compile(source, "imagectl-check.py", "exec"), names)
    return names, profile


def test_library_origins_reads_the_maps(check_script, tmp_path):
    names, _ = check_script
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    assert names["library_origins"](str(maps)) == {
        "libcudnn": {"path": f"{SITE}/nvidia/cudnn/lib/libcudnn.so.8", "origin": "site-packages", "version": "8"},
        "libcublas": {"path": f"{SITE}/nvidia/cublas/lib/libcublas.so.12", "origin": "site-packages", "version": "12"},
        "libnccl": {"path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.17.1", "origin": "system", "version": "2.17.1"},
    }


def test_nothing_loaded_or_no_maps_is_an_empty_report(check_script, tmp_path):
    names, _ = check_script
    maps = tmp_path / "maps"
    maps.write_text("7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0      [stack]\n")
    assert names["library_origins"](str(maps)) == {}
    assert names["library_origins"](str(tmp_path / "missing")) == {}


def test_compare_fails_the_system_nccl_the_report_names(check_script, tmp_path):
    names, profile = check_script
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    libraries = names["library_origins"](str(maps))
    fw = {"version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.17.1"}
    expect = expectations_from_profile(profile)
    report = {"python": "3.10.12", "packages": dict(profile.packages), "framework": fw, "libraries": libraries}
    bad = [f.what for f in failed(compare(expect, report))]
    assert "libnccl origin" in bad and "libcudnn origin" not in bad and "libcublas origin" not in bad
