"""Facts about the node imagectl runs on, read from ``nvidia-smi`` and ``uname -m``."""

from __future__ import annotations

import platform
import shutil
import subprocess

from .errors import InputError, OperationError


def read_node(nvidia_smi: str = "nvidia-smi") -> tuple[str, str | None]:
    """``(driver version, sm_XY of GPU 0 or None)``; raises InputError when nvidia-smi is absent."""
    exe = shutil.which(nvidia_smi)
    if exe is None:
        raise InputError("no --driver given and nvidia-smi is not on PATH: pass --driver VERSION")
    try:
        proc = subprocess.run([exe, "--query-gpu=driver_version,compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise OperationError(f"nvidia-smi failed: {exc}") from None
    line = proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout.strip() else ""
    if not line:
        raise OperationError(f"nvidia-smi found no GPU (exit {proc.returncode}): pass --driver VERSION")
    driver, _, cap = (part.strip() for part in line.partition(","))
    return driver, ("sm_" + cap.replace(".", "")) if cap and cap[0].isdigit() else None


def read_machine() -> str:
    """The node's CPU architecture as ``uname -m`` says it (``x86_64``, ``aarch64`` on a Grace host): the images it
    runs are those with a platform of it.  Raises OperationError when the machine cannot say."""
    machine = platform.machine()
    if not machine:
        raise OperationError("cannot read this node's CPU architecture (uname -m said nothing): pass --arch")
    return machine
