"""torch.compile in a built image (issue 13, item 1): the JIT layer brings a C++ compiler and the Python headers.

The stand-in torch's ``compile`` builds and loads a tiny C++ Python extension with ``g++`` against
``sysconfig.get_paths()["include"]``, as inductor's CPU backend does, so the in-image check's compile step
passes only in an image that has both; a matrix whose ``jit_packages`` is empty builds one that fails it.
"""

from __future__ import annotations

import pytest

from imagectl.shipped import shipped_dir
from tests.integration.conftest import write_config

pytestmark = pytest.mark.integration

# the runtime flavour: its stand-in base lacks the toolchain (the -base stand-in carries it: BASES in
# tests/integration/conftest.py), so the JIT layer installs it from the archive; Debian bookworm's python is 3.11
PROFILE = "torch-2.3-cu121-runtime-py3.11"
COMPILE_OK = "ok    torch.compile on CPU: expected ok, found ok"
# A C++ program, and a C++ Python extension built against the include path of the image's Python
PROBE = """set -eu
printf '#include <iostream>\\nint main() { std::cout << "c++ runs" << std::endl; }\\n' > /tmp/probe.cpp
c++ /tmp/probe.cpp -o /tmp/probe && /tmp/probe
include=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
echo "include $include"
test -f "$include/Python.h"
printf '#include <Python.h>\\nint probe(void) { return PY_MAJOR_VERSION; }\\n' > /tmp/probe.c
gcc -fPIC -shared -I"$include" /tmp/probe.c -o /tmp/probe.so && echo "python headers build"
"""


def without_jit_packages(tmp_path) -> None:
    """A user matrix directory whose torch [framework] is the shipped one with ``jit_packages = []``,
    added to the configuration in ``tmp_path``."""
    shipped = (shipped_dir("matrices") / "torch.toml").read_text()
    framework = "[framework]" + shipped.split("\n[framework]", 1)[1].split("\n[[release]]", 1)[0]
    keys = [line for line in framework.splitlines()[1:] if line and not line.startswith(("#", "jit_packages"))]
    (tmp_path / "no-jit").mkdir()
    (tmp_path / "no-jit" / "torch.toml").write_text("\n".join(["[framework]", *keys, "jit_packages = []", ""]))
    with (tmp_path / "imagectl.toml").open("a") as config:
        config.write('[paths]\nmatrices = ["./no-jit"]\n')


def test_the_image_compiles_and_one_without_the_jit_layer_does_not(run_cli, tmp_path, mirror, wheel_index,
                                                                     docker_client):
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, namespace="jit")
    built = run_cli("build", PROFILE)
    assert built.code == 0, built.err[-3000:]
    assert f"check: {COMPILE_OK}" in built.err
    image = docker_client.images.get(f"localhost/jit/{PROFILE}:latest")
    probe = docker_client.containers.run(image.id, ["sh", "-c", PROBE], remove=True).decode()
    assert "c++ runs\n" in probe and "include /usr/include/python3.11\n" in probe and "python headers build" in probe

    # the layer installs only what the base lacks: run again on the image, it needs no archive (no network)
    rendered = run_cli("render", PROFILE).out
    jit_run = rendered.split("[framework] jit_packages", 1)[1].split("\nRUN ", 1)[1].split("\n\n", 1)[0]
    assert "apt-get install -y --no-install-recommends $missing" in jit_run
    rerun = docker_client.containers.run(image.id, ["sh", "-c", f"{jit_run}\necho nothing missing"],
                                         network_mode="none", remove=True).decode()
    assert rerun.strip().endswith("nothing missing") and "apt" not in rerun

    tested = run_cli("test", PROFILE)
    assert tested.code == 0 and COMPILE_OK in tested.out + tested.err

    without_jit_packages(tmp_path)
    bare = run_cli("build", PROFILE, "--quiet")
    assert bare.code == 1
    assert ("check: in-image check failed: torch.compile on CPU: expected ok, found BackendCompilerFailed: "
            "backend='inductor' raised: InvalidCxxCompiler: No working C++ compiler found") in bare.err
