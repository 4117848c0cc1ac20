"""The GPUs ``compat --gpu`` and ``check gpu=`` know, and the driver releases that can drive them.

A GPU needs a driver whose own supported-GPU list names it: the README's Appendix A "Supported NVIDIA GPU
Products" (and its GSP-firmware table), read release by release into matrices/gpu-drivers.toml by
tools/gpu_driver_lists.py.  Where that file has the GPU's list, it decides: a driver a release range lists is fine,
one a range leaves out is "not in driver X's supported-GPU list" (H200 is absent from 550.40.07 .. 550.78, listed
from 550.90.07), and a driver between releases read takes the status of the nearest release read at or below it in
its branch (else the nearest above; a driver newer than every release read, that of the newest).  Elsewhere (a branch
no release of which was read) the first release that knows the GPU is its ``min_driver`` (``[gpus]`` in
matrices/cuda.toml cites where each comes from).  Maxwell, Pascal and Volta GPUs also have a last branch (R580).
A GPU given as ``sm_XY`` gets the floor every known GPU of that arch shares: the earliest of their floors, and
none when one of them has no floor recorded (no list: the arch does not say which board it is).  A GPU is found by
its name in the matrix or by a product name NVIDIA's list gives it (what ``nvidia-smi`` prints: ``NVIDIA
A800-SXM4-80GB``); a trailing memory size (``RTX 4090 48GB``) names the same GPU.  All functions are pure.
"""

from __future__ import annotations

import difflib
import re

from ..errors import InputError
from ..grammar import driver_branch, driver_key
from .model import Gpu, Matrix

_SM_RE = re.compile(r"^sm_?([0-9]{2,3})$")
_MEMORY = re.compile(r"[-\s]*[0-9]+\s*gb$")  # a board's memory size at the end of its name: "48GB", "-80GB"


def gpu_key(name: str) -> str:
    """A GPU name as compared: case, spaces and the ``NVIDIA``/``GeForce``/``Tesla`` words ignored (pure)."""
    return re.sub(r"\s+|nvidia|geforce|tesla", "", name.lower())


def _by_name(matrix: Matrix) -> dict[str, Gpu]:
    return {gpu_key(label): gpu for gpu in matrix.gpus.values() for label in (gpu.name, *gpu.names)}


def find_gpu(text: str, matrix: Matrix) -> Gpu:
    """The GPU a model name (``RTX 5090``, ``NVIDIA GeForce RTX 5090``, ``nvidia h100``, a name ``nvidia-smi``
    prints such as ``NVIDIA A800-SXM4-80GB``: :func:`gpu_key`; a trailing memory size ignored) or an
    ``sm_XY``/``XY``/``X.Y`` value names; raises InputError for anything else, naming the closest known GPUs."""
    value = text.strip()
    if re.fullmatch(r"[0-9]+\.[0-9]", value):
        value = "sm_" + value.replace(".", "")
    match = _SM_RE.match(value.lower())
    if match:
        return arch_gpu(value, f"sm_{match[1]}", matrix)
    by_name = _by_name(matrix)
    found = by_name.get(gpu_key(value)) or by_name.get(gpu_key(_MEMORY.sub("", value.lower())))
    if not found:
        close = difflib.get_close_matches(gpu_key(value), list(by_name), n=3, cutoff=0.5)
        names = sorted({by_name[key].name for key in close})
        hint = f"closest known: {', '.join(names)}" if names else f"known: {', '.join(sorted(matrix.gpus))}"
        raise InputError(f"--gpu {text!r}: not sm_XY and not a known GPU ({hint})")
    return found


def arch_gpu(label: str, arch: str, matrix: Matrix) -> Gpu:
    """A GPU known only by its arch: the driver bounds every known GPU of ``arch`` shares (none when one lacks it)."""
    same = [gpu for gpu in matrix.gpus.values() if gpu.arch == arch]
    floors = [gpu.min_driver for gpu in same if gpu.min_driver]
    lasts = [gpu.last_branch for gpu in same if gpu.last_branch]
    floor = min(floors, key=driver_key) if same and len(floors) == len(same) else None
    last = max(lasts) if same and len(lasts) == len(same) else None
    hosts = {gpu.host for gpu in same}
    host = hosts.pop() if len(hosts) == 1 else None  # sm_121: only GB10, an aarch64 host
    return Gpu(name=label, arch=arch, min_driver=floor, last_branch=last, host=host)


def gpu_driver_reasons(gpu: Gpu, driver: str) -> list[str]:
    """Why ``driver`` cannot drive ``gpu`` (empty when it can, or when the matrix records no bound)."""
    label = gpu.name if gpu.name == gpu.arch else f"{gpu.name} ({gpu.arch})"
    if gpu.last_branch and driver_branch(driver) > gpu.last_branch:
        return [f"driver {driver} no longer supports {label}: its last driver branch is R{gpu.last_branch}"]
    listed, release = list_status(gpu, driver)
    if listed is False:
        where = (f"driver {driver}'s" if release == driver
                 else f"driver {release}'s (the nearest release read to {driver})")
        return [f"{label} is not in {where} supported-GPU list (the driver README's Appendix A; "
                f"{listed_in(gpu, driver_branch(driver))})"]
    if listed is None and gpu.min_driver and driver_key(driver) < driver_key(gpu.min_driver):
        return [f"driver {driver} predates {label}: the first driver that knows it is {gpu.min_driver}"
                f" (R{driver_branch(gpu.min_driver)})"]
    return []


def _ends(text: str) -> tuple[str, str]:
    first, _, last = text.partition("..")
    return first, last


def _in(driver: str, text: str) -> bool:
    first, last = _ends(text)
    return driver_branch(first) == driver_branch(driver) and driver_key(first) <= driver_key(driver) <= driver_key(last)


def list_status(gpu: Gpu, driver: str) -> tuple[bool | None, str]:
    """``(listed, release)``: whether ``driver``'s supported-GPU list names ``gpu``, judged by ``release`` (``driver``
    itself when it was read, else the release read that stands for it; see the module docstring); ``(None, "")``
    when the GPU has no list or the driver is older than every release read."""
    ranges = [(r, True) for r in gpu.listed] + [(r, False) for r in gpu.missing]
    if not ranges:
        return None, ""
    for text, flag in ranges:
        if _in(driver, text):
            return flag, driver
    same = [(text, flag) for text, flag in ranges if driver_branch(_ends(text)[0]) == driver_branch(driver)]
    below = [(_ends(t)[1], f) for t, f in same if driver_key(_ends(t)[1]) < driver_key(driver)]
    if below:
        last = max(below, key=lambda x: driver_key(x[0]))
        return last[1], last[0]
    above = [(_ends(t)[0], f) for t, f in same if driver_key(_ends(t)[0]) > driver_key(driver)]
    if above:
        first = min(above, key=lambda x: driver_key(x[0]))
        return first[1], first[0]
    newest = max(((_ends(t)[1], f) for t, f in ranges), key=lambda x: driver_key(x[0]))
    if driver_key(driver) > driver_key(newest[0]):
        return newest[1], newest[0]
    return None, ""


def listed_in(gpu: Gpu, in_branch: int) -> str:
    """The releases of ``in_branch`` that list ``gpu`` (``listed in 550.40.65..550.40.85, 550.90.07..550.163.01``), or
    the first release that does."""
    ranges = [r for r in gpu.listed if driver_branch(_ends(r)[0]) == in_branch]
    if ranges:
        return f"listed in {', '.join(ranges)}"
    if gpu.listed:
        first = min((_ends(r)[0] for r in gpu.listed), key=driver_key)
        return f"no R{in_branch} release read lists it; listed from {first}"
    return "no release read lists it"
