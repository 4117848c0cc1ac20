"""The default flavour on the real engine: torch-2.3-cu121's pins bring nvidia-* wheels, so it builds on
``nvidia/cuda:12.1.1-base-ubuntu22.04`` (no system NCCL, no warning); ``-runtime`` still builds and warns."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import write_config

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # as test_build.py: the stand-in base is Debian bookworm, whose python is 3.11
RUNTIME = "torch-2.3-cu121-runtime-py3.11"
NCCL_WARNING = "warn  NCCL_VERSION of the base image vs NCCL the framework loads: expected 2.20.5, found 2.17.1-1"

# Run in a container of the built image: map a copy of a system library as a wheel's libnccl and another as a
# system libcudnn, then print what the image's own check script (/opt/imagectl/check.py) reads from
# /proc/self/maps.
_LOAD_AND_REPORT = """
import ctypes, glob, json, os, runpy, shutil
zlib = sorted(glob.glob("/usr/lib/*/libz.so.1") + glob.glob("/lib/*/libz.so.1"))[0]
wheel = "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib"
os.makedirs(wheel, exist_ok=True)
shutil.copy(zlib, wheel + "/libnccl.so.2")
shutil.copy(zlib, os.path.dirname(zlib) + "/libcudnn.so.8.9.2")
ctypes.CDLL(wheel + "/libnccl.so.2")
ctypes.CDLL(os.path.dirname(zlib) + "/libcudnn.so.8.9.2")
print(json.dumps(runpy.run_path("/opt/imagectl/check.py")["library_origins"]()))
"""


def run_in(docker_client, image: str, command: list[str]) -> str:
    return docker_client.containers.run(image, command, remove=True, network_mode="none").decode()


def test_default_flavour_is_base_and_its_check_passes_without_the_nccl_warning(run_cli, tmp_path, mirror,
                                                                               wheel_index, docker_client):
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, namespace="flavours")
    shown = json.loads(run_cli("show", PROFILE, "--json").out)
    assert shown["flavor"] == "base" and shown["base_image"] == "docker.io/nvidia/cuda:12.1.1-base-ubuntu22.04"

    built = run_cli("build", PROFILE)
    assert built.code == 0, built.err[-3000:]
    assert "check: ok" in built.err and "NCCL_VERSION of the base image" not in built.out + built.err
    image = f"localhost/flavours/{PROFILE}:latest"
    labels = docker_client.images.get(image).labels
    assert labels["imagectl.flavor"] == "base"
    assert labels["org.opencontainers.image.base.digest"] == mirror.digests["nvidia/cuda:12.1.1-base-ubuntu22.04"]

    tested = run_cli("test", PROFILE, "--json")
    assert tested.code == 0, tested.err[-2000:]
    findings = json.loads(tested.out)["findings"]
    assert not [f for f in findings if "NCCL_VERSION" in f["what"] or "libnccl2" in f["what"]]

    report = json.loads(run_in(docker_client, image, ["python", "/opt/imagectl/check.py"]).strip().splitlines()[-1])
    assert report["libraries"] == {}  # present; the stand-in torch loads no CUDA library
    assert report["system_nccl"] == {"env": None, "dpkg": None}

    origins = json.loads(run_in(docker_client, image, ["python", "-c", _LOAD_AND_REPORT]).strip().splitlines()[-1])
    assert origins["libnccl"] == {"path": "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                  "origin": "site-packages", "version": "2"}
    assert origins["libcudnn"]["origin"] == "system" and origins["libcudnn"]["version"] == "8.9.2"


def test_the_runtime_flavour_still_builds_and_warns_about_its_system_nccl(run_cli, tmp_path, mirror, wheel_index,
                                                                          docker_client):
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, namespace="flavours")
    built = run_cli("build", RUNTIME)
    assert built.code == 0, built.err[-3000:]
    assert f"{RUNTIME}  built" in built.out and NCCL_WARNING in built.out + built.err
    labels = docker_client.images.get(f"localhost/flavours/{RUNTIME}:latest").labels
    assert labels["imagectl.flavor"] == "runtime"
    assert labels["org.opencontainers.image.base.digest"] == mirror.digests["nvidia/cuda:12.1.1-runtime-ubuntu22.04"]
