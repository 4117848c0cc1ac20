"""Facts about the node imagectl runs on, read from ``nvidia-smi`` and ``uname -m``."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

from .errors import InputError, OperationError
from .tomlfile import load_toml


def read_node(nvidia_smi: str = "nvidia-smi") -> tuple[str, str | None, str | None]:
    """``(driver version, sm_XY of GPU 0 or None, GPU 0's product name or None)``; raises InputError when nvidia-smi
    is absent, OperationError when it fails or finds no GPU."""
    exe = shutil.which(nvidia_smi)
    if exe is None:
        raise InputError("no --driver given and nvidia-smi is not on PATH: pass --driver VERSION")
    try:
        proc = subprocess.run([exe, "--query-gpu=driver_version,compute_cap,name", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise OperationError(f"nvidia-smi failed: {exc}") from None
    line = proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout.strip() else ""
    if not line:
        raise OperationError(f"nvidia-smi found no GPU (exit {proc.returncode}): pass --driver VERSION")
    driver, cap, name = ([*(part.strip() for part in line.split(",", 2)), "", ""])[:3]
    sm = ("sm_" + cap.replace(".", "")) if cap and cap[0].isdigit() else None
    return driver, sm, (name if name and not name.startswith("[") else None)


# the NVIDIA Container Toolkit's configuration: its [nvidia-container-runtime] mode is what the nvidia runtime does
RUNTIME_CONFIG = Path("/etc/nvidia-container-runtime/config.toml")


def read_runtime_mode(path: Path = RUNTIME_CONFIG) -> str:
    """The NVIDIA container runtime mode of this node as compat judges it: ``legacy`` when the toolkit's config says
    ``mode = "legacy"``, ``cdi`` for ``cdi``/``jit-cdi``, else ``both`` (``auto`` or no config: the nvidia runtime
    runs jit-cdi since toolkit 1.18 while ``docker --gpus`` stays legacy, so both can happen on one node).  Never
    raises: a file it cannot read is ``both``."""
    try:
        data = load_toml(path)
    except InputError:  # unreadable or not TOML
        return "both"
    section = data.get("nvidia-container-runtime", {})
    mode = section.get("mode") if isinstance(section, dict) else None
    return {"legacy": "legacy", "cdi": "cdi", "jit-cdi": "cdi"}.get(mode if isinstance(mode, str) else "", "both")


def read_machine() -> str:
    """The node's CPU architecture as ``uname -m`` says it (``x86_64``, ``aarch64`` on a Grace host): the images it
    runs are those with a platform of it.  Raises OperationError when the machine cannot say."""
    machine = platform.machine()
    if not machine:
        raise OperationError("cannot read this node's CPU architecture (uname -m said nothing): pass --arch")
    return machine
