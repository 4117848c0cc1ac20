"""Which CUDA a profile's image really runs: the CUDA runtime its lock installs, when that differs from the label.

A JAX CUDA plugin declares only floors (``nvidia-cuda-runtime-cu12>=12.6``), so pip installs the newest CUDA
libraries of the major: the shipped lock of ``jax-0.12-cuda12`` has ``nvidia-cuda-runtime-cu12==12.9.79``.  The
driver floors and the GPU targets of such a profile are CUDA 12.9's, not the nominal 12.6's.  A torch build pins
its runtime exactly, so its lock agrees with its label.  A runtime of a minor no [cuda] table declares (13.5) is
judged by the newest declared toolkit of its major below it, a lower bound of its driver floor.  All functions are
pure: the caller reads the lock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from ..grammar import major_minor, release_numbers
from .model import CudaToolkit, Profile, Variant

# the CUDA runtime's wheel: nvidia-cuda-runtime-cu11/-cu12, nvidia-cuda-runtime (CUDA 13); else the cuda-toolkit
# metapackage torch 2.11+ pins (its version is the toolkit's)
_RUNTIME = re.compile(r"nvidia-cuda-runtime(-cu[0-9]+)?")
_TOOLKIT = "cuda-toolkit"


@dataclass(frozen=True)
class LockedCuda:
    """What a profile's lock says of CUDA: the runtime pin and the matrix's toolkit of that minor."""

    pin: str | None  # "nvidia-cuda-runtime-cu12==12.9.79"; None: the lock pins no CUDA runtime
    cuda: str | None  # "12.9"
    toolkit: CudaToolkit | None  # [cuda."12.9"]; None: no pin, or a CUDA no [cuda] table declares
    # for a CUDA no [cuda] table declares: the newest declared toolkit of its major below it, whose driver floor
    # is a lower bound of the undeclared one's (NVIDIA's floors never fall within a major); None: there is none
    below: CudaToolkit | None = None


def runtime_pin(packages: Mapping[str, str]) -> tuple[str, str] | None:
    """``(name, version)`` of the CUDA runtime among exact pins, or None."""
    for name, version in sorted(packages.items()):
        if _RUNTIME.fullmatch(name):
            return name, version
    if _TOOLKIT in packages:
        return _TOOLKIT, packages[_TOOLKIT]
    return None


def locked_cuda(packages: Mapping[str, str], toolkits: Mapping[str, CudaToolkit]) -> LockedCuda:
    """What a lock's ``name -> version`` packages say of CUDA, with the matrix's toolkits to look it up in."""
    pin = runtime_pin(packages)
    if pin is None:
        return LockedCuda(None, None, None)
    cuda = major_minor(pin[1]) or pin[1]
    toolkit = toolkits.get(cuda)
    return LockedCuda(f"{pin[0]}=={pin[1]}", cuda, toolkit, None if toolkit else nearest_below(cuda, toolkits))


def nearest_below(cuda: str, toolkits: Mapping[str, CudaToolkit]) -> CudaToolkit | None:
    """The newest toolkit of ``cuda``'s major older than ``cuda`` (13.5 -> [cuda."13.2"]), or None."""
    wanted = release_numbers(cuda)
    same = [t for key, t in toolkits.items()
            if release_numbers(key)[:1] == wanted[:1] and release_numbers(key) < wanted]
    return max(same, key=lambda t: release_numbers(t.version)) if same else None


def floating_runtime(variant: Variant) -> bool:
    """True when a build brings CUDA wheels but pins no runtime: pip picks one within the plugin's ranges."""
    return variant.wheel_cuda and runtime_pin(dict(variant.pins)) is None


def runtime_toolkit(profile: Profile, locked: LockedCuda | None) -> tuple[CudaToolkit, list[str]]:
    """The toolkit whose driver floors and GPU targets apply to ``profile`` given its lock (None: no lock
    applies), and a note when that is not simply the nominal one."""
    nominal = profile.toolkit
    if locked is None:
        if floating_runtime(profile.variant):
            return nominal, [f"no lock applies: pip picks the CUDA libraries within the build's ranges at build"
                             f" time; judged by the nominal CUDA {nominal.version}"]
        return nominal, []
    if locked.pin and locked.toolkit is None and locked.below is not None and \
            release_numbers(locked.below.version) > release_numbers(nominal.version):
        return locked.below, [f"the lock installs {locked.pin} (CUDA {locked.cuda}), which no [cuda] table declares:"
                              f" judged by CUDA {locked.below.version}, the newest declared release below it, whose"
                              f" driver floor is a lower bound of CUDA {locked.cuda}'s (not recorded)"]
    if locked.pin and locked.toolkit is None:
        return nominal, [f"the lock installs {locked.pin} (CUDA {locked.cuda}), which no [cuda] table declares:"
                         f" judged by the nominal CUDA {nominal.version}"]
    if locked.toolkit is None or locked.toolkit.version == nominal.version:
        return nominal, []
    return locked.toolkit, [f"the lock installs {locked.pin}: driver floors and GPU targets follow CUDA"
                            f" {locked.toolkit.version}, not the nominal {nominal.version}"]
