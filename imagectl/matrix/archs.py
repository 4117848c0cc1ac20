"""Binary compatibility of GPU code: which of a build's cubins or PTX a GPU can run, and by which rule.

The rules are NVIDIA's (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility",
https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility):

- a cubin for ``sm_XY`` runs on compute capability ``X.Z`` with ``Z >= Y`` (same major, same or higher minor):
  sm_86 code runs on an sm_89 RTX 4090, never on sm_90 or sm_80;
- PTX for ``compute_XY`` is JIT-compiled by the driver for any compute capability ``>= X.Y``, given a driver
  that can compile that PTX (the full-support floor of the toolkit that emitted it; under minor-version
  compatibility the driver does not JIT PTX newer than itself).

All functions are pure; an arch is written ``sm_XY`` (a cubin, or a GPU) or ``compute_XY`` (PTX).
"""

from __future__ import annotations

from dataclasses import dataclass

CUBIN = "sm"
PTX = "compute"


def capability(arch: str) -> tuple[int, int]:
    """``(8, 6)`` for ``sm_86``, ``(12, 0)`` for ``compute_120``: the compute capability an arch names."""
    number = int(arch.split("_", 1)[1])
    return number // 10, number % 10


def dotted(arch: str) -> str:
    """``8.6`` for ``sm_86``."""
    major, minor = capability(arch)
    return f"{major}.{minor}"


@dataclass(frozen=True)
class ArchMatch:
    """The code of a build a GPU runs, and the rule that lets it."""

    code: str  # the build's entry: sm_86 or compute_90
    rule: str  # "exact", "same-major" or "ptx"
    why: str  # the rule in words, for a verdict's notes

    @property
    def needs_jit(self) -> bool:
        """True when the driver must JIT-compile PTX (the PTX rule)."""
        return self.rule == "ptx"


def match_arch(gpu: str, build: tuple[str, ...]) -> ArchMatch | None:
    """The best code of ``build`` that a GPU of arch ``gpu`` runs: its own cubin, else the newest cubin of the
    same major with a lower minor, else the newest PTX at or below its compute capability; None when none."""
    if gpu in build:
        return ArchMatch(gpu, "exact", f"{gpu} cubin in the build")
    major, minor = capability(gpu)
    cubins = [a for a in build if a.startswith(CUBIN + "_") and capability(a)[0] == major and capability(a)[1] <= minor]
    if cubins:
        best = max(cubins, key=capability)
        return ArchMatch(best, "same-major", f"runs {best} code (same major, {dotted(gpu)} >= {dotted(best)})")
    ptx = [a for a in build if a.startswith(PTX + "_") and capability(a) <= (major, minor)]
    if ptx:
        best = max(ptx, key=capability)
        return ArchMatch(best, "ptx", f"PTX {best} JIT-compiled by the driver for {gpu}")
    return None


def no_match(gpu: str, build: tuple[str, ...]) -> str:
    """Why no code of ``build`` runs on ``gpu``: ``no cubin for sm_60 and no PTX <= 6.0``."""
    return f"no cubin for {gpu} or an earlier sm_{capability(gpu)[0]}x, and no PTX <= {dotted(gpu)}"


def newer_than_build(gpu: str, build: tuple[str, ...]) -> bool:
    """True when ``gpu`` is newer than every code of ``build`` (a newer toolkit's build is needed, not an older)."""
    return bool(build) and capability(gpu) > max(capability(a) for a in build)


def describe(build: tuple[str, ...]) -> str:
    """``sm_75..sm_120 + PTX compute_120``: a build's code in a few words."""
    cubins = [a for a in build if a.startswith(CUBIN + "_")]
    ptx = [a for a in build if a.startswith(PTX + "_")]
    span = f"{cubins[0]}..{cubins[-1]}" if len(cubins) > 1 else "".join(cubins) or "no cubin"
    return span + (f" + PTX {', '.join(ptx)}" if ptx else ", no PTX")
