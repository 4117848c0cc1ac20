"""The matrix as frozen data: toolkits, operating systems, frameworks, releases, variants, profiles.

Nothing here reads files; :mod:`imagectl.matrix.load` builds these objects from TOML.  Versions are kept as
the strings the matrix wrote (validated as PEP 440 at load) and compared by :mod:`imagectl.grammar`'s version
helpers (plain release numbers read there, anything else by ``packaging.version``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from ..grammar import major_minor, release_numbers
from ..reference import Reference


@dataclass(frozen=True)
class OsInfo:
    """An operating system of the base images and the Pythons its archive carries."""

    name: str
    python: str
    apt_python: tuple[str, ...]


@dataclass(frozen=True)
class CudaToolkit:
    """One CUDA minor release: driver floors, GPU targets and the OSes nvidia/cuda publishes it for."""

    version: str  # "12.1"
    release: str  # "12.1.1": the update the base images carry
    min_driver: str  # full compatibility
    min_driver_compat: str  # minor-version compatibility floor
    archs: tuple[str, ...]
    os: tuple[str, ...]  # the first is the default
    # driver branches below its own that NVIDIA's base image of this release admits under forward compatibility
    # (its cuda-compat package), as its NVIDIA_REQUIRE_CUDA lists them: (535, 550, ...)
    forward_compat: tuple[int, ...] = ()
    forward_compat_brands: tuple[str, ...] = ()  # [base] forward_compat_brands, set by the loader
    end_of_life: str | None = None  # why NVIDIA's images of this release are past end of life (with the source)
    eol_since: str | None = None  # the day (YYYY-MM-DD) they went end of life, where a source gives it

    @property
    def major(self) -> int:
        """The CUDA major version (12 for 12.1)."""
        return release_numbers(self.version)[0]


# The OCI platforms of an image: every build has linux/amd64 (the matrix's pins were read from x86_64 wheels);
# linux/arm64 where its index has aarch64 CUDA wheels.  MACHINES: the ``uname -m`` of each.
AMD64 = "linux/amd64"
ARM64 = "linux/arm64"
MACHINES = {AMD64: "x86_64", ARM64: "aarch64"}

# A pin of this prefix is a wheel that brings CUDA libraries of its own (nvidia-cudnn-cu12, nvidia-nccl-cu12, ...).
WHEEL_CUDA_PREFIX = "nvidia-"


@dataclass(frozen=True)
class BaseImages:
    """How a base image reference is made: repository, flavours, the default flavour and the tag pattern.

    The default flavour of a variant is ``wheel_cuda_flavor`` when its pins carry ``nvidia-*`` wheels (they
    bring the CUDA libraries the framework loads, so a base image without the toolkit's libraries is enough),
    else the first of ``flavors``.  ``wheel_cuda_flavor`` is offered only to such variants: it carries no
    library a framework without those wheels could load.
    """

    repository: str
    flavors: tuple[str, ...]
    tag: str
    wheel_cuda_flavor: str | None = None
    # the GPU brands (NVML's, as the NVIDIA container runtime reads them) an image admits under forward compatibility
    forward_compat_brands: tuple[str, ...] = ()

    def default_flavor(self, variant: Variant) -> str:
        """The flavour a profile of ``variant`` has when its name has no flavour suffix."""
        if self.wheel_cuda_flavor and variant.wheel_cuda:
            return self.wheel_cuda_flavor
        return self.flavors[0]

    def flavors_for(self, variant: Variant) -> tuple[str, ...]:
        """The flavours ``variant``'s profiles can have, its default first, the rest in ``flavors`` order."""
        default = self.default_flavor(variant)
        usable = [f for f in self.flavors if f != self.wheel_cuda_flavor or variant.wheel_cuda]
        return (default, *(f for f in usable if f != default))


@dataclass(frozen=True)
class Variant:
    """One CUDA build of a framework release, with the exact pins of its wheels.

    ``archs`` is the GPU code the build's binaries carry (its ``TORCH_CUDA_ARCH_LIST``), as
    ``torch.cuda.get_arch_list()`` prints it: ``sm_XY`` a cubin, ``compute_XY`` PTX (``12.0+PTX`` is ``sm_120`` and
    ``compute_120``).  Empty: not recorded; the build is then judged by its toolkit's nvcc targets.
    """

    cuda: str
    pypi: bool
    cudnn: str | None
    nccl: str | None
    pins: tuple[tuple[str, str], ...]  # (pip name, exact version), sorted by name: on every Python but ...
    archs: tuple[str, ...] = ()  # the build's GPU code (see above)
    # ... those of pin_python: (pip name, PEP 440 specifier over the image's Python), as the wheel metadata's
    # ``python_version`` marker says (``triton==2.3.1; python_version < "3.12"`` -> ("triton", "<3.12"))
    pin_python: tuple[tuple[str, str], ...] = ()
    unverified: str | None = None  # why facts of this build could not be sourced; None: every fact has a source
    # the OCI platforms its index has CUDA wheels for (matrices/platforms.toml, generated from the wheels' tags and
    # metadata by tools/wheel_platforms.py); linux/amd64 where nothing else was read
    platforms: tuple[str, ...] = (AMD64,)
    platform_sources: tuple[tuple[str, str], ...] = ()  # (platform, the wheel and requirement that make it CUDA there)
    # (platform, its pins) where a platform's wheels pin other versions than ``pins`` (read from its wheels' metadata)
    platform_pins: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @property
    def verified(self) -> bool:
        """Whether every fact of this build cites a source (``unverified`` unset)."""
        return self.unverified is None

    @property
    def wheel_cuda(self) -> bool:
        """True when the pins carry ``nvidia-*`` wheels: the build brings its own CUDA libraries (every PyPI
        torch since 1.13, the JAX CUDA plugins) and loads them from site-packages, not from the base image."""
        return any(name.startswith(WHEEL_CUDA_PREFIX) for name, _ in self.pins)

    def pins_for(self, python: str, platform: str = AMD64) -> tuple[tuple[str, str], ...]:
        """The pins that apply on Python ``python`` (``3.12``) and ``platform``: every pin of the platform (its own
        where :attr:`platform_pins` has them) but those whose ``pin_python`` specifier excludes it.  Raises nothing
        (the loader validated the specifiers)."""
        only = dict(self.pin_python)
        pins = dict(self.platform_pins).get(platform, self.pins)
        return tuple((n, v) for n, v in pins if n not in only or _admits(only[n], python))


_SIMPLE_CLAUSE = re.compile(r"\s*(<=|>=|==|!=|<|>)\s*(\d+(?:\.\d+)*)\s*")
_COMPARE = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


@lru_cache(maxsize=1024)
def _admits(specifier: str, python: str) -> bool:
    """Whether PEP 440 ``specifier`` admits Python ``python`` (memoised: ``validate`` asks it thousands of times).
    The matrix's Python ranges are comparisons of release numbers (``<3.12``, ``>=3.9,<3.13``): those are
    compared here, as PEP 440 does for final releases (tests/unit/matrix checks the answers against packaging's);
    anything else goes to packaging.specifiers, imported only then: it brings packaging.tags, logging and
    subprocess, which cost ``show`` 0.2x-0.4x ``python -c "import click"`` (bench/startup.py, "packaging.specifiers
    loaded")."""
    clauses = [_SIMPLE_CLAUSE.fullmatch(part) for part in specifier.split(",")]
    if all(clauses) and re.fullmatch(r"\d+(\.\d+)*", python):
        def release(text: str, width: int) -> tuple[int, ...]:
            parts = tuple(int(x) for x in text.split("."))
            return parts + (0,) * (width - len(parts))

        width = max(len(python.split(".")), *(len(c[2].split(".")) for c in clauses if c))
        have = release(python, width)
        return all(_COMPARE[c[1]](have, release(c[2], width)) for c in clauses if c)
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(specifier).contains(python)


@dataclass(frozen=True)
class Release:
    """One framework release: supported Pythons, companion packages and its CUDA variants."""

    version: str
    python: tuple[str, ...]
    companions: tuple[tuple[str, str], ...]
    variants: tuple[Variant, ...]
    # (Python, why): Pythons of ``python`` (the framework's own wheels exist) whose image cannot be built, such as
    # a companion or a required dependency without a wheel for it
    unavailable: tuple[tuple[str, str], ...] = ()

    def unavailable_reason(self, python: str) -> str | None:
        """Why the release cannot be installed on Python ``python``, or None when it can (or has no wheels)."""
        return dict(self.unavailable).get(python)

    @property
    def minor(self) -> str:
        """``2.3`` for ``2.3.1``."""
        return major_minor(self.version) or self.version


@dataclass(frozen=True)
class LockFloor:
    """A security floor of every lock: ``package`` at ``version`` or later, whatever the lock's as-of date."""

    package: str  # canonical name
    version: str
    uploaded: str  # the day that version was uploaded (YYYY-MM-DD): a lock older than that may take it from then
    source: str  # the advisory that sets it: "CVE-2022-40897: ReDoS in package_index, fixed in 65.5.1"


@dataclass(frozen=True)
class Framework:
    """A framework as the matrix declares it; adding one is a TOML file, not code."""

    name: str
    label: str
    package: str
    companions: tuple[str, ...]
    cuda_tag: str  # pattern, e.g. "cu{major}{minor}"
    index_url: str  # pattern with {cuda_tag}
    pypi_index_url: str
    check: str  # name of the check partial under templates/check/
    releases: tuple[Release, ...]  # newest first
    source: Path
    jit_packages: tuple[str, ...] = ()  # OS packages its JIT compilers need; patterns with {python}
    # The install layers of a lock, in order: (name, package name patterns); a package goes to the first layer
    # with a matching pattern, else to the last.  One layer of everything when the matrix names none.
    layers: tuple[tuple[str, tuple[str, ...]], ...] = (("packages", ("*",)),)
    # Install layers whose big files are layers of their own in an assembled build: (layer name, MiB); a file
    # the wheel stores in at least that many bytes gets one (the same file in two releases is the same blob)
    own_layers: tuple[tuple[str, int], ...] = ()
    # Extras the lock asks for with a pin (jax-cuda12-plugin -> with-cuda): pin name -> extras
    pin_extras: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Requirements every lock of the framework adds to its pins, unpinned (torch: numpy, which torch leaves
    # optional): the resolver picks their versions as of the lock's date
    lock_requires: tuple[str, ...] = ()
    lock_floors: tuple[LockFloor, ...] = ()  # the matrix's [lock] floors, set by the loader on every framework
    # The most bytes an image of the framework may weigh, its layers compressed ([framework] size_budget); None: no
    # budget (a team's [build] size_budget may still set one: the smaller applies, imagectl.images.size)
    size_budget: int | None = None

    def own_layer_mib(self, layer: str) -> int:
        """The stored size in MiB from which a file of install layer ``layer`` is a layer of its own; 0 for never."""
        return dict(self.own_layers).get(layer, 0)

    def tag_of(self, cuda: str) -> str:
        """The framework's name for a CUDA version: ``cu121`` for torch and 12.1."""
        release = release_numbers(cuda)
        return self.cuda_tag.format(major=release[0], minor=release[1] if len(release) > 1 else 0)


@dataclass(frozen=True)
class Gpu:
    """A GPU model ``compat --gpu`` knows: its architecture and the driver branches that can drive it."""

    name: str  # "RTX 5090", or the sm_XY given
    arch: str  # "sm_120"
    min_driver: str | None = None  # the first driver release that knows it; None: not recorded
    last_branch: int | None = None  # the last driver branch that supports it (580 for Volta); None: ongoing
    segment: str | None = None  # "datacenter", "workstation" or "consumer"; None: not known (a GPU given as sm_XY)
    host: str | None = None  # the CPU architecture of the host it sits in, where that is fixed: "aarch64" (Grace)
    pci: tuple[str, ...] = ()  # its PCI IDs in NVIDIA's supported-GPU lists ("2335", "25B6 10DE 14A9")
    names: tuple[str, ...] = ()  # the boards' names in NVIDIA's list, as nvidia-smi prints them ("NVIDIA H800")
    # the driver releases whose supported-GPU list names it, and those whose list does not: "FIRST..LAST" ranges
    # within one branch (matrices/gpu-drivers.toml, generated); empty: no list recorded
    listed: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Matrix:
    """Everything the matrix files declare, merged."""

    base: BaseImages
    os: Mapping[str, OsInfo]
    cuda: Mapping[str, CudaToolkit]
    gpus: Mapping[str, Gpu]
    frameworks: Mapping[str, Framework]
    files: tuple[Path, ...] = field(default=())
    lock_floors: tuple[LockFloor, ...] = ()


@dataclass(frozen=True)
class Profile:
    """One resolved combination: the unit imagectl renders, builds, tags and checks."""

    name: str
    framework: Framework
    release: Release
    variant: Variant
    toolkit: CudaToolkit
    os: OsInfo
    flavor: str
    python: str
    base_image: Reference  # the public reference, before mirrors

    @property
    def packages(self) -> tuple[tuple[str, str], ...]:
        """Every pip package the image pins, sorted: framework, companions and the variant's pins."""
        return self.packages_for(AMD64)

    def packages_for(self, platform: str) -> tuple[tuple[str, str], ...]:
        """:attr:`packages` of the image for ``platform`` (its own pins where its wheels pin other versions)."""
        pins = {self.framework.package: self.release.version}
        pins.update(self.release.companions)
        pins.update(self.variant.pins_for(self.python, platform))
        return tuple(sorted(pins.items()))

    @property
    def platforms(self) -> tuple[str, ...]:
        """The OCI platforms the image can be built for (its build's, :attr:`Variant.platforms`)."""
        return self.variant.platforms

    @property
    def verified(self) -> bool:
        """Whether every fact of the profile's build cites a source (see :attr:`Variant.unverified`)."""
        return self.variant.verified
