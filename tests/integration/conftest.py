"""Fixtures against real parts: a Docker engine, CNCF distribution registries, stand-in base images
pushed under their public names into a mirror, and stand-in wheels served from a local PEP 503 index.

Without an engine or a registry these tests skip on a developer's machine and FAIL under ``CI=true``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.support.engine import cuda_base_env, ensure_dockerd, push_to_registry, standin_base_image
from tests.integration.support.registry import RegistryServer, start_registry
from tests.integration.support.skips import skip_or_fail  # also for the tests that import it from here
from tests.integration.support.wheels import make_standin_framework_wheels, make_wheel, serve_simple_index

MIRROR_PREFIX = "hub"  # docker.io/<path> is mirrored at <registry>/hub/<path>


@pytest.fixture(scope="session")
def docker_client():
    try:
        client = ensure_dockerd()
    except RuntimeError as exc:
        skip_or_fail(f"no Docker engine: {exc}")
    # ensure_dockerd's client waits 5 s per call (enough for its ping); a busy engine (builds running beside
    # the tests) takes longer to list hundreds of images or commit a layer, so wait as imagectl's engine does
    client.api.timeout = 600
    return client


def _registry(tmp_path_factory, auth: str | None) -> Iterator[RegistryServer]:
    try:
        server = start_registry(tmp_path_factory.mktemp(f"registry-{auth or 'open'}"), auth=auth)
    except RuntimeError as exc:
        skip_or_fail(f"no registry: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory) -> Iterator[RegistryServer]:
    """An anonymous registry: the base-image mirror, and where built images go."""
    yield from _registry(tmp_path_factory, None)


@pytest.fixture(scope="session")
def auth_registry(tmp_path_factory) -> Iterator[RegistryServer]:
    """A registry that requires htpasswd basic auth."""
    yield from _registry(tmp_path_factory, "htpasswd")


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory) -> Iterator[RegistryServer]:
    """A registry behind a bearer-token challenge."""
    yield from _registry(tmp_path_factory, "token")


@dataclass(frozen=True)
class Mirror:
    """The stand-in base images as the mirror serves them."""

    registry: RegistryServer
    prefix: str
    digests: dict[str, str]

    @property
    def mapping(self) -> str:
        return f"docker.io={self.registry.host}/{self.prefix}"


BASES = {
    # public name -> (CUDA release, NCCL_VERSION the real image sets: the base flavour has no system NCCL, whether
    # the stand-in carries the JIT toolchain)
    "nvidia/cuda:12.1.1-base-ubuntu22.04": ("12.1.1", None, True),  # the default of torch-2.3-cu121 (nvidia-* pins)
    "nvidia/cuda:12.1.1-runtime-ubuntu22.04": ("12.1.1", "2.17.1-1", False),
}
# The -base stand-in carries torch's JIT toolchain ([framework] jit_packages: gcc, g++, python3.11-dev), so the
# builds on it (most tests, and every build from empty storage) find nothing for the JIT step to install and skip
# apt; the -runtime stand-in does not, so its builds run the apt step for real (test_jit, test_system_lock,
# test_flavours).


def jit_toolchain(python: str = "3.11") -> tuple[str, ...]:
    """The OS packages torch's JIT step installs for ``python``, as the shipped matrix says."""
    from imagectl.cli.workspace import Workspace

    framework = Workspace().profile("torch-2.3-cu121").framework
    return tuple(p.format(python=python) for p in framework.jit_packages)


@pytest.fixture(scope="session")
def mirror(docker_client, registry) -> Mirror:
    """Stand-in ``nvidia/cuda`` images pushed to ``<registry>/hub/nvidia/cuda:...``."""
    digests = {}
    for public, (cuda, nccl, toolchain) in BASES.items():
        local = standin_base_image(docker_client, f"imagectl-test/{public}", env=cuda_base_env(cuda, nccl=nccl),
                                   packages=jit_toolchain() if toolchain else ())
        _, digest = push_to_registry(docker_client, local, registry.host, f"{MIRROR_PREFIX}/{public}")
        digests[public] = digest
    return Mirror(registry, MIRROR_PREFIX, digests)


NO_DAEMON = "unix:///nonexistent/imagectl-test-no-docker.sock"


@pytest.fixture(params=["docker", "buildah"])
def engine(request, monkeypatch, mirror) -> str | None:
    """The build tests run on both engines: the value for :func:`write_config`'s ``engine``.  ``docker`` names the
    Docker engine; ``buildah`` leaves ``[build] engine`` unwritten (the default, ``auto``, takes buildah where it
    is installed) and points ``DOCKER_HOST`` at no daemon, as on a runner without one (the mirror is made first:
    its stand-in bases come from Docker)."""
    if request.param == "docker":
        return "docker"
    from tests.integration.support.skips import require_binary

    require_binary("buildah")
    monkeypatch.setenv("DOCKER_HOST", NO_DAEMON)
    return None


def shipped_pins(name: str) -> dict[str, str]:
    """The pins the shipped matrix gives a profile (the stand-in wheels are made from these)."""
    from imagectl.cli.workspace import Workspace

    return dict(Workspace().profile(name).packages)


def standin_torch_wheels(wheels: Path) -> Path:
    """Stand-in wheels of torch-2.3-cu121's pins (torch and its CUDA wheels, real dependency tree) in ``wheels``."""
    pins = shipped_pins("torch-2.3-cu121")
    facts = {"torch_version": pins["torch"], "cuda": "12.1", "cudnn": pins["nvidia-cudnn-cu12"],
             "nccl": pins["nvidia-nccl-cu12"]}
    make_standin_framework_wheels(wheels, pins, facts)
    return wheels


@pytest.fixture(scope="session")
def wheel_index(tmp_path_factory) -> Iterator[str]:
    """A PEP 503 index of stand-in wheels matching torch-2.3-cu121's pins exactly."""
    wheels = standin_torch_wheels(tmp_path_factory.mktemp("wheels"))
    make_wheel(wheels, "team-extra", "1.0", {"team_extra/__init__.py": "__version__ = '1.0'\n"})
    url, stop = serve_simple_index(wheels)
    yield url
    stop()


@pytest.fixture(scope="session")
def empty_index(tmp_path_factory) -> Iterator[str]:
    """A package index with nothing in it: every pip install from it fails."""
    url, stop = serve_simple_index(tmp_path_factory.mktemp("empty-index"))
    yield url
    stop()


@pytest.fixture(scope="session")
def lying_wheel_index(tmp_path_factory) -> Iterator[str]:
    """Stand-in wheels whose torch loads a different NCCL than the pins say (the check must catch it)."""
    pins = shipped_pins("torch-2.3-cu121")
    facts = {"torch_version": pins["torch"], "cuda": "12.1", "cudnn": pins["nvidia-cudnn-cu12"], "nccl": "2.19.3"}
    wheels = tmp_path_factory.mktemp("lying-wheels")
    make_standin_framework_wheels(wheels, pins, facts)
    url, stop = serve_simple_index(wheels)
    yield url
    stop()


@pytest.fixture
def docker_config(tmp_path, monkeypatch) -> Path:
    """An empty Docker client config directory (DOCKER_CONFIG) for this test."""
    path = tmp_path / "docker-config"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"auths": {}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(path))
    return path


def login(docker_config: Path, server: RegistryServer) -> None:
    """Write ``server``'s credentials into the test's Docker config, as ``docker login`` does."""
    import base64

    data = json.loads((docker_config / "config.json").read_text())
    token = base64.b64encode(f"{server.username}:{server.password}".encode()).decode()
    data["auths"][server.host] = {"auth": token}
    (docker_config / "config.json").write_text(json.dumps(data))


def write_config(path: Path, *, mirror: Mirror, index_url: str, registry: RegistryServer | None = None,
                 namespace: str = "ml", locks: Path | None = None, engine: str | None = "docker") -> Path:
    """An imagectl.toml for the integration tests: mirror, local index, host networking, optional registry and
    optional team lock directory (``[paths] locks``, which must exist).  ``engine`` is ``[build] engine``: Docker
    unless a test asks for another (None: not written, so the default ``auto`` decides)."""
    lines = []
    if registry is not None:
        lines += ["[registry]", f'url = "{registry.host}"', f'namespace = "{namespace}"', ""]
    else:
        lines += ["[registry]", f'namespace = "{namespace}"', ""]
    lines += ["[mirrors]", f'"docker.io" = "{mirror.registry.host}/{mirror.prefix}"', "",
              "[pip]", f'index_url = "{index_url}"', "", "[build]", 'network = "host"']
    lines += [f'engine = "{engine}"', ""] if engine is not None else [""]
    if locks is not None:
        lines += ["[paths]", f"locks = [{json.dumps(str(locks))}]", ""]
    target = path / "imagectl.toml"
    target.write_text("\n".join(lines))
    return target


def empty_storage(monkeypatch, where: Path) -> None:
    """Point buildah at empty containers-storage under ``where``, as on a fresh CI runner (CONTAINERS_STORAGE_CONF:
    every buildah call of the engine reads it)."""
    where.mkdir(parents=True)
    conf = where / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{where}/root"\nrunroot = "{where}/run"\n')
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
