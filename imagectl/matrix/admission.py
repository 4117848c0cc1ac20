"""Whether NVIDIA's container runtime starts an image on a driver, and which CUDA driver the image's code then uses.

The image states ``NVIDIA_REQUIRE_CUDA`` as NVIDIA's own base images do (:func:`require_cuda`): ``cuda>=X.Y``, or,
for each driver branch the release's cuda-compat package supports (``[cuda] forward_compat``) and each brand of
``[base] forward_compat_brands``, ``brand=B,driver>=N,driver<N+1``.  The runtime (libnvidia-container,
``src/cli/dsl.c`` and ``configure.c``) refuses a container whose requirement the node does not meet; its ``cuda``
property is the host driver's own CUDA version, which every driver of a branch reports alike (an R570 driver reports
12.8), so ``cuda>=X.Y`` admits exactly the branches at or above that of the release's full-support driver.

Every flavour of nvidia/cuda carries the release's cuda-compat libraries, and the runtime puts them in place of the
host's ``libcuda`` whenever their branch is newer than the host driver's (nvidia-container-toolkit's
``enable-cuda-compat`` hook, libnvidia-container ``filter_by_major_version``).  So below the release's own branch the
image never runs on the host's ``libcuda`` under minor-version compatibility: it runs under forward compatibility,
which works on data-center GPUs only (on others CUDA fails with error 804), and which ``NVIDIA_REQUIRE_CUDA`` admits
only on the listed branches and brands.  At or above the release's own branch the host's driver is used; below the
full-support floor of the same branch that is minor-version compatibility.

:func:`admission` says which of these applies.  That is the ``legacy`` runtime mode, which ``docker --gpus`` uses.
Since NVIDIA Container Toolkit 1.18 the ``nvidia`` runtime defaults to ``jit-cdi`` (``cdi``), where no
``NVIDIA_REQUIRE_CUDA`` is checked: the ``enable-cuda-compat`` hook alone decides, from the ELF note of the image's
compat ``libcuda`` (the driver branches it supports), whether it replaces the host's -- when the host's branch is one
it supports and the compat driver is newer than the host's, which happens on the image's *own* branch too
(nvidia-container-toolkit ``cmd/nvidia-cdi-hook/cudacompat``: ``UseCompat`` and its tests "host driver branch same as
compat driver branch, compat driver > host driver").  The compat driver is modelled as the release's full-support
driver (``min_driver``: the cuda-compat package is at least that), its supported branches as ``forward_compat`` and
the release's own.  All functions are pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..grammar import driver_branch, driver_key
from .model import CudaToolkit, Gpu

Mechanism = Literal["host", "forward", "refused"]
Runtime = Literal["legacy", "cdi"]
RUNTIMES: tuple[Runtime, ...] = ("legacy", "cdi")
RUNTIME_LABELS = {"legacy": "legacy mode (docker --gpus; NVIDIA_REQUIRE_CUDA gates the start)",
                  "cdi": "jit-cdi mode (the nvidia runtime's default since toolkit 1.18; the enable-cuda-compat hook "
                         "decides)"}
FORWARD = "forward compatibility (cuda-compat, data-center GPUs only)"


def require_cuda(toolkit: CudaToolkit) -> str:
    """The image's ``NVIDIA_REQUIRE_CUDA``: ``cuda>=X.Y``, then one ``brand=B,driver>=N,driver<N+1`` term per
    forward-compatible branch and brand (space-separated terms are ORed, comma-separated ones ANDed)."""
    terms = [f"cuda>={toolkit.version}"]
    terms += [f"brand={brand},driver>={n},driver<{n + 1}" for n in toolkit.forward_compat
              for brand in toolkit.forward_compat_brands]
    return " ".join(terms)


@dataclass(frozen=True)
class Admission:
    """How an image of ``toolkit`` starts on a driver: ``host`` (on the host's libcuda), ``forward`` (on the image's
    cuda-compat libcuda) or ``refused``; ``driver`` is the CUDA driver the image's code then talks to (the host's, or
    the cuda-compat one: at least the release's full-support driver), ``why`` the reason or the note."""

    mechanism: Mechanism
    driver: str | None
    why: str = ""


def admission(toolkit: CudaToolkit, driver: str, gpu: Gpu | None = None, runtime: Runtime = "legacy") -> Admission:
    """How an image whose base is CUDA ``toolkit`` starts on ``driver`` (and ``gpu``, when known) under ``runtime``."""
    if runtime == "cdi":
        return _cdi(toolkit, driver, gpu)
    t, own, have = toolkit, driver_branch(toolkit.min_driver), driver_branch(driver)
    if have >= own:
        return Admission("host", driver)
    below = f"driver {driver} (R{have}) is below CUDA {t.version}'s driver branch R{own}"
    if have not in t.forward_compat:
        supported = ", ".join(f"R{n}" for n in t.forward_compat if n < own) or "none"
        return Admission("refused", None, f"{below}, and its cuda-compat supports no R{have} (forward-compatible "
                                          f"branches: {supported}): the NVIDIA container runtime refuses to start the "
                                          f"image (NVIDIA_REQUIRE_CUDA)")
    return _forward(t, gpu, f"{below}; only {FORWARD} runs it there", have, below)


def _cdi(t: CudaToolkit, driver: str, gpu: Gpu | None) -> Admission:
    """jit-cdi: the image's compat libcuda replaces the host's when the host's branch is one its note lists and the
    compat driver is newer (on the image's own branch too); else the host's libcuda, ungated."""
    own, have = driver_branch(t.min_driver), driver_branch(driver)
    if have in (*t.forward_compat, own) and driver_key(t.min_driver) > driver_key(driver):
        where = "its own branch" if have == own else f"R{have}, a branch its cuda-compat supports"
        why = (f"under jit-cdi the enable-cuda-compat hook puts the image's cuda-compat {t.version} libcuda "
               f"({t.min_driver} or later) in place of driver {driver}'s: on {where}, the compat driver is newer")
        return _forward(t, gpu, why, have, why)
    return Admission("host", driver)


def _forward(t: CudaToolkit, gpu: Gpu | None, why: str, have: int, how: str) -> Admission:
    """The image runs on its cuda-compat libcuda: data-center GPUs only (``why``: how it came to that, for a refusal;
    ``how``, for the note)."""
    segment = gpu.segment if gpu else None
    name = gpu.name if gpu else ""
    if segment == "consumer":
        gate = ("NVIDIA_REQUIRE_CUDA admits the geforce brand there and the container starts, but"
                if "geforce" in t.forward_compat_brands else f"NVIDIA_REQUIRE_CUDA admits no GeForce brand on R{have}, "
                                                              "and")
        return Admission("refused", None, f"{why}, and {name} is a consumer GPU: {gate} cuda-compat fails on it "
                                          "(CUDA error 804)")
    if segment == "workstation":
        return Admission("refused", None, f"{why}, and {name} is a workstation GPU: NVIDIA supports forward "
                                          "compatibility on data-center GPUs and select NGC-Ready RTX cards only (the "
                                          "container starts; CUDA may fail with error 804)")
    return Admission("forward", t.min_driver, f"under {FORWARD}: {how}; the image's cuda-compat {t.version} "
                                              "libraries stand in for the host's libcuda")
