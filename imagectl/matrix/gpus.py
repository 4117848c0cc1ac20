"""The GPUs ``compat --gpu`` and ``check gpu=`` know, and the driver branches that can drive them.

A GPU needs a driver that knows it: the first release that does is its ``min_driver`` (``[gpus]`` in
matrices/cuda.toml cites where each comes from); Maxwell, Pascal and Volta GPUs also have a last branch (R580).
A GPU given as ``sm_XY`` gets the floor every known GPU of that arch shares: the earliest of their floors, and
none when one of them has no floor recorded.  All functions are pure.
"""

from __future__ import annotations

import re

from ..errors import InputError
from ..grammar import driver_key
from .model import Gpu, Matrix

_SM_RE = re.compile(r"^sm_?([0-9]{2,3})$")


def find_gpu(text: str, matrix: Matrix) -> Gpu:
    """The GPU a model name (``RTX 5090``, ``NVIDIA GeForce RTX 5090``, ``nvidia h100``: case, spaces and the
    ``NVIDIA``/``GeForce`` words ignored) or an ``sm_XY``/``XY``/``X.Y`` value names; raises InputError for
    anything else."""
    value = text.strip()
    if re.fullmatch(r"[0-9]+\.[0-9]", value):
        value = "sm_" + value.replace(".", "")
    match = _SM_RE.match(value.lower())
    if match:
        return arch_gpu(value, f"sm_{match[1]}", matrix)
    key = lambda name: name.lower().replace(" ", "").replace("nvidia", "").replace("geforce", "")  # noqa: E731
    by_name = {key(gpu.name): gpu for gpu in matrix.gpus.values()}
    found = by_name.get(key(value))
    if not found:
        raise InputError(f"--gpu {text!r}: not sm_XY and not a known GPU ({', '.join(sorted(matrix.gpus))})")
    return found


def arch_gpu(label: str, arch: str, matrix: Matrix) -> Gpu:
    """A GPU known only by its arch: the driver bounds every known GPU of ``arch`` shares (none when one lacks it)."""
    same = [gpu for gpu in matrix.gpus.values() if gpu.arch == arch]
    floors = [gpu.min_driver for gpu in same if gpu.min_driver]
    lasts = [gpu.last_branch for gpu in same if gpu.last_branch]
    floor = min(floors, key=driver_key) if same and len(floors) == len(same) else None
    last = max(lasts) if same and len(lasts) == len(same) else None
    return Gpu(name=label, arch=arch, min_driver=floor, last_branch=last)


def branch(driver: str) -> int:
    """The branch of a driver version: 570 for 570.86.16."""
    return int(driver.split(".")[0])


def gpu_driver_reasons(gpu: Gpu, driver: str) -> list[str]:
    """Why ``driver`` cannot drive ``gpu`` (empty when it can, or when the matrix records no bound)."""
    label = gpu.name if gpu.name == gpu.arch else f"{gpu.name} ({gpu.arch})"
    if gpu.min_driver and driver_key(driver) < driver_key(gpu.min_driver):
        return [f"driver {driver} predates {label}: the first driver that knows it is {gpu.min_driver}"
                f" (R{branch(gpu.min_driver)})"]
    if gpu.last_branch and branch(driver) > gpu.last_branch:
        return [f"driver {driver} no longer supports {label}: its last driver branch is R{gpu.last_branch}"]
    return []
