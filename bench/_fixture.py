"""Shared set-up for the build benchmarks: the same real parts the integration tests use.

A real engine (started if needed), a loopback CNCF registry as the base-image mirror (and push target), the
mmdebstrap stand-in ``nvidia/cuda`` base pushed under its public name, and stand-in wheels for the profiles
served from a local PEP 503 index.  Nothing here reaches the internet.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.support.engine import (  # noqa: E402
    cuda_base_env, ensure_dockerd, push_to_registry, standin_base_image,
)
from tests.integration.support.registry import start_registry  # noqa: E402
from tests.integration.support.wheels import make_standin_framework_wheels, serve_simple_index  # noqa: E402

# The stand-in of each public base a benchmarked profile may name: (CUDA release, NCCL_VERSION the real image sets;
# the base flavour has no system NCCL), as tests/integration/conftest.py's BASES.
BASES = {"nvidia/cuda:12.1.1-base-ubuntu22.04": ("12.1.1", None),
         "nvidia/cuda:12.1.1-runtime-ubuntu22.04": ("12.1.1", "2.17.1-1")}


CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"  # [build] ca_bundle of the --real runs (PyPI over TLS)
JIT_PACKAGES = "gcc g++ python3.11-dev"  # what imagectl's image adds for torch.compile on the CUDA 12.1 base

# The hand-written Dockerfile: what a person writes for this image, given the lock.  CA: --real only.  (apt-get clean:
# the real Ubuntu base's docker-clean hook does it; the stand-in Debian rootfs has none.)
HANDWRITTEN_DOCKERFILE = """\
FROM {base}
RUN apt-get update && apt-get install -y --no-install-recommends {jit} && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
{ca}COPY requirements.txt /tmp/requirements.txt
RUN pip install --no-cache-dir --disable-pip-version-check --index-url {index} \\
        --require-hashes --no-deps -r /tmp/requirements.txt
"""


@dataclass
class Setup:
    workdir: Path
    registry_host: str
    registry_root: Path
    index_url: str


def start(stack: ExitStack, profiles: list[str]) -> Setup:
    """Start everything for ``profiles`` (all on the CUDA 12.1 base); torn down with ``stack``."""
    from imagectl.cli.workspace import Workspace

    client = ensure_dockerd()
    work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="imagectl-bench-")))
    registry = start_registry(work / "registry")
    stack.callback(registry.stop)
    mirror_bases(client, registry.host, profiles)
    wheels = work / "wheels"
    ws = Workspace()
    for name in profiles:
        pins = dict(ws.profile(name).packages)
        facts = {"torch_version": pins["torch"], "cuda": "12.1", "cudnn": pins.get("nvidia-cudnn-cu12", "8.9.2.26"),
                 "nccl": pins.get("nvidia-nccl-cu12", "2.20.5")}
        make_standin_framework_wheels(wheels, pins, facts)
    url, stop = serve_simple_index(wheels)
    stack.callback(stop)
    return Setup(work, registry.host, work / "registry", url)


def mirror_bases(client, registry_host: str, profiles: list[str]) -> dict[str, str]:
    """Push the stand-in of each base ``profiles`` name to ``REGISTRY/hub/<public name>``; {public name: digest}."""
    from imagectl.cli.workspace import Workspace

    ws, digests = Workspace(), {}
    for public in sorted({ws.profile(name).base_image.familiar for name in profiles}):
        cuda, nccl = BASES[public]
        local = standin_base_image(client, f"imagectl-test/{public}", env=cuda_base_env(cuda, nccl=nccl))
        digests[public] = push_to_registry(client, local, registry_host, f"hub/{public}")[1]
    return digests


def write_config(setup: Setup, project: Path, *, push: bool, namespace: str, context_dir: Path | None = None,
                 registry: dict[str, str] | None = None, build: dict[str, str] | None = None) -> None:
    """An imagectl.toml in ``project`` for the benchmark; ``registry`` and ``build`` add keys (TOML values as
    written) to those sections; without ``setup.index_url`` pip uses the profile's own index."""
    lines = ["[registry]", f'namespace = "{namespace}"', *(f"{k} = {v}" for k, v in (registry or {}).items())]
    if push:
        lines.insert(1, f'url = "{setup.registry_host}"')
    lines += ["[mirrors]", f'"docker.io" = "{setup.registry_host}/hub"']
    if setup.index_url:
        lines += ["[pip]", f'index_url = "{setup.index_url}"']
    lines += ["[build]", 'network = "host"', *(f"{k} = {v}" for k, v in (build or {}).items())]
    if context_dir is not None:
        lines += ["[paths]", f'context = ["{context_dir}"]']
    project.mkdir(parents=True, exist_ok=True)
    (project / "imagectl.toml").write_text("\n".join(lines) + "\n")


def imagectl(project: Path, *args: str) -> list[str]:
    """The argv of an imagectl command run in ``project``."""
    return [sys.executable, "-m", "imagectl", *args]


def env() -> dict[str, str]:
    """The environment for subprocesses (the repository importable)."""
    out = dict(os.environ)
    out["PYTHONPATH"] = str(REPO) + os.pathsep + out.get("PYTHONPATH", "")
    return out


def write_handwritten_context(context: Path, *, base: str, lock: str, index: str, real: bool) -> None:
    """Write the hand-written Dockerfile's build context into the new folder ``context``: ``FROM base`` (a reference
    by digest), the JIT packages, a venv and one ``pip install --require-hashes`` of ``lock`` (requirements text)
    from ``index``; with ``real``, the system CA bundle for pip (PyPI over TLS).

    Raises:
        FileExistsError: ``context`` exists.
    """
    context.mkdir()
    (context / "requirements.txt").write_text(lock)
    ca = ""
    if real:
        shutil.copyfile(CA_BUNDLE, context / "ca.crt")
        ca = "COPY ca.crt /etc/ssl/certs/bench-ca.crt\nENV PIP_CERT=/etc/ssl/certs/bench-ca.crt\n"
    (context / "Dockerfile").write_text(HANDWRITTEN_DOCKERFILE.format(base=base, jit=JIT_PACKAGES, ca=ca, index=index))
