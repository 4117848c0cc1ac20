"""Shared set-up for the build benchmarks: the same real parts the integration tests use.

A real engine (started if needed), a loopback CNCF registry as the base-image mirror (and push target), the
mmdebstrap stand-in ``nvidia/cuda`` base pushed under its public name, and stand-in wheels for the profiles
served from a local PEP 503 index.  Nothing here reaches the internet.
"""

from __future__ import annotations

import os
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

BASE = "nvidia/cuda:12.1.1-runtime-ubuntu22.04"


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
    local = standin_base_image(client, f"imagectl-test/{BASE}", env=cuda_base_env("12.1.1", nccl="2.17.1-1"))
    push_to_registry(client, local, registry.host, f"hub/{BASE}")
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


def write_config(setup: Setup, project: Path, *, push: bool, namespace: str, context_dir: Path | None = None) -> None:
    """An imagectl.toml in ``project`` for the benchmark."""
    lines = ["[registry]", f'namespace = "{namespace}"']
    if push:
        lines.insert(1, f'url = "{setup.registry_host}"')
    lines += ["[mirrors]", f'"docker.io" = "{setup.registry_host}/hub"', "[pip]", f'index_url = "{setup.index_url}"',
              "[build]", 'network = "host"']
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
