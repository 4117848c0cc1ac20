"""Smoke test of the integration-test support: real engine, stand-in base image, stand-in torch, local index.

Self-contained (module-level fixtures, no conftest): a missing engine or a failed rootfs build skips the
module on a workstation and fails it when ``CI=true``.
"""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import requests

from tests.integration.support.engine import (
    STANDIN_LABEL,
    cuda_base_env,
    ensure_dockerd,
    push_to_registry,
    standin_base_image,
)
from tests.integration.support.registry import start_registry
from tests.integration.support.skips import skip_or_fail
from tests.integration.support.wheels import make_standin_framework_wheels, serve_simple_index

pytestmark = pytest.mark.integration

BASE_REF = "imagectl-test/cuda:12.1.1-runtime-ubuntu22.04"
BASE_ENV = cuda_base_env("12.1.1", nccl="2.20.5-1")
PINS = {
    "torch": "2.3.1+cu121",
    "torchvision": "0.18.1+cu121",
    "triton": "2.3.1",
    "nvidia-cudnn-cu12": "8.9.2.26",
    "nvidia-nccl-cu12": "2.20.5",
    "nvidia-cuda-runtime-cu12": "12.1.105",
}
FACTS = {"torch_version": "2.3.1+cu121", "cuda": "12.1", "cudnn": "8.9.2.26", "nccl": "2.20.5"}
PROBE = ("import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), "
         "torch.cuda.nccl.version(), torch.cuda.is_available(), torch.cuda.device_count())")


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    """A client for a running engine (started if we are root and it is not running)."""
    try:
        engine = ensure_dockerd()
    except RuntimeError as exc:
        skip_or_fail(f"no Docker engine: {exc}")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def base_image(client: docker.DockerClient) -> str:
    """The stand-in CUDA base image (built once, cached on disk and in the engine)."""
    try:
        return standin_base_image(client, BASE_REF, python="3.11", env=BASE_ENV)
    except RuntimeError as exc:
        skip_or_fail(f"cannot make the stand-in base image: {exc}")


@pytest.fixture(scope="module")
def index_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PEP 503 index on 127.0.0.1 serving the stand-in framework wheels."""
    wheel_dir = tmp_path_factory.mktemp("wheels")
    make_standin_framework_wheels(wheel_dir, PINS, FACTS)
    url, stop = serve_simple_index(wheel_dir)
    yield url
    stop()


def _pip_install(index: str, requirement: str) -> str:
    """Return a shell line that makes /opt/venv and installs ``requirement`` from ``index`` only."""
    return (f"python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir "
            f"--disable-pip-version-check -q --index-url {index} '{requirement}'")


def test_standin_base_is_cached_and_carries_env(client: docker.DockerClient, base_image: str) -> None:
    """A second call reuses the imported image, which has the base image's ENV and the cache label."""
    before = client.images.get(base_image).id
    started = time.monotonic()
    standin_base_image(client, BASE_REF, python="3.11", env=BASE_ENV)
    assert time.monotonic() - started < 10
    image = client.images.get(base_image)
    assert image.id == before
    assert STANDIN_LABEL in image.labels
    assert "NCCL_VERSION=2.20.5-1" in image.attrs["Config"]["Env"]
    assert "CUDA_VERSION=12.1.1" in image.attrs["Config"]["Env"]


def test_pip_installs_standin_torch_in_container(
    client: docker.DockerClient, base_image: str, index_url: str
) -> None:
    """A host-network container installs torch (and its pinned nvidia deps) from the local index."""
    script = (f"{_pip_install(index_url, 'torch==2.3.1')} && /opt/venv/bin/python -c '{PROBE}' && "
              "/opt/venv/bin/pip list --format=freeze")
    output = client.containers.run(base_image, ["sh", "-c", script], network_mode="host", remove=True)
    lines = output.decode().splitlines()
    assert lines[0] == "2.3.1+cu121 12.1 8902 (2, 20, 5) False 0"
    assert "nvidia-nccl-cu12==2.20.5" in lines
    assert "nvidia-cudnn-cu12==8.9.2.26" in lines
    assert "triton==2.3.1" in lines


def test_pip_installs_standin_torch_in_docker_build(
    client: docker.DockerClient, base_image: str, tmp_path: Path
) -> None:
    """``docker build`` with host networking reaches the index; cuDNN 9 is encoded as 90100."""
    pins = {"torch": "2.4.0", "torchaudio": "2.4.0", "nvidia-cudnn-cu12": "9.1.0.70"}
    facts = {"cuda": "12.4", "cudnn": "9.1.0.70", "nccl": "2.21.5"}
    make_standin_framework_wheels(tmp_path, pins, facts)
    url, stop = serve_simple_index(tmp_path)
    dockerfile = (f"FROM {base_image}\nRUN {_pip_install(url, 'torchaudio==2.4.0')}\n"
                  f"CMD [\"/opt/venv/bin/python\", \"-c\", \"{PROBE}; import torchaudio; "
                  "print(torchaudio.__version__)\"]\n")
    try:
        image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), network_mode="host", rm=True,
                                       forcerm=True)
    finally:
        stop()
    try:
        output = client.containers.run(image.id, remove=True).decode().split("\n")
        assert output[:2] == ["2.4.0 12.4 90100 (2, 21, 5) False 0", "2.4.0"]
    finally:
        client.images.remove(image.id, force=True)


def _tiny_image(client: docker.DockerClient, ref: str) -> str:
    """Import a one-file image as ``ref`` (pushes in well under a second) and return ``ref``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("hello.txt")
        info.size = 6
        archive.addfile(info, io.BytesIO(b"hello\n"))
    repository, tag = ref.rsplit(":", 1)
    client.api.import_image(src=buffer.getvalue(), repository=repository, tag=tag)
    return ref


def test_push_to_loopback_registry_with_basic_auth(client: docker.DockerClient, tmp_path: Path) -> None:
    """An image pushes to a plain-HTTP loopback registry with basic auth; the digest is the manifest's."""
    local = _tiny_image(client, "imagectl-test/tiny:smoke")
    server = start_registry(tmp_path / "registry", auth="htpasswd")
    hostport, stop, user, secret = server.host, server.stop, server.username, server.password
    try:
        ref, digest = push_to_registry(client, local, hostport, "imagectl/base:smoke",
                                       auth={"username": user, "password": secret})
        answer = requests.head(f"http://{hostport}/v2/imagectl/base/manifests/smoke", auth=(user, secret),
                               headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"},
                               timeout=10)
    finally:
        stop()
        client.images.remove(f"{hostport}/imagectl/base:smoke", noprune=True)
        client.images.remove(local)
    assert ref == f"{hostport}/imagectl/base:smoke"
    assert digest.startswith("sha256:")
    assert answer.headers["Docker-Content-Digest"] == digest
