"""What changed between two images: a pure comparison of two :class:`~.image_facts.ImageFacts`.

:func:`compare_images` returns every fact of both images side by side (the same ones too, so a view can say what
stayed), the packages that were added, removed, or went up or down (the CUDA libraries' wheels first: ``nvidia-*``,
``cuda-*``, where cuDNN and NCCL live), the OS packages of their SBOMs, the compressed size of each layer group and
what B adds to a node that holds A, the labels that differ, the advisories B gained or fixed against A, and the
check reports side by side.  Two images are the same when their digests are; then nothing else can differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from packaging.version import InvalidVersion, Version

from ..advisories.match import Finding
from ..labels import (
    BUILD_KEY,
    CUDA,
    CUDNN,
    ENGINE,
    EXTRAS,
    FLAVOR,
    FRAMEWORK,
    FRAMEWORK_VERSION,
    IMAGECTL_VERSION,
    LOCK_PACKAGES,
    LOCK_SHA256,
    MIN_DRIVER,
    NCCL,
    OCI_BASE_DIGEST,
    OCI_BASE_NAME,
    OCI_DESCRIPTION,
    OCI_TITLE,
    OCI_VERSION,
    OS,
    PACKAGES,
    PROFILE,
    PYTHON,
)
from ..matrix.model import WHEEL_CUDA_PREFIX
from .image_facts import ImageFacts

ChangeKind = Literal["added", "removed", "up", "down", "changed"]
CUDA_PARTS = (WHEEL_CUDA_PREFIX, "cuda-")  # the CUDA libraries' wheels (cuDNN, NCCL, ...) and cuda-toolkit
# fact name -> the label it is read from, in the order they are shown
LABEL_FACTS: Mapping[str, str] = {
    "profile": PROFILE, "framework": FRAMEWORK, "version": FRAMEWORK_VERSION, "cuda": CUDA, "cudnn": CUDNN,
    "nccl": NCCL, "python": PYTHON, "min_driver": MIN_DRIVER, "os": OS, "flavor": FLAVOR, "base": OCI_BASE_NAME,
    "base_digest": OCI_BASE_DIGEST, "build_key": BUILD_KEY, "lock_sha256": LOCK_SHA256, "engine": ENGINE,
    "imagectl_version": IMAGECTL_VERSION,
}
# labels whose every difference is said elsewhere: a fact above, the package lists, or the title and description
# (the profile and versions again, in words)
SHOWN_LABELS = frozenset({*LABEL_FACTS.values(), PACKAGES, LOCK_PACKAGES, EXTRAS, OCI_TITLE, OCI_DESCRIPTION,
                          OCI_VERSION})


@dataclass(frozen=True)
class Change:
    """One fact of A and of B ("" where an image has none)."""

    name: str
    a: str
    b: str

    @property
    def same(self) -> bool:
        """Both say the same."""
        return self.a == self.b


@dataclass(frozen=True)
class PackageChange:
    """A package whose version differs: None where an image lacks it."""

    name: str
    a: str | None
    b: str | None
    kind: ChangeKind
    cuda_part: bool = False


@dataclass(frozen=True)
class SizeChange:
    """The compressed bytes and layers of one layer group (or ``total``) in A and B (None: not in that image)."""

    group: str
    a: int | None
    b: int | None
    a_layers: int = 0
    b_layers: int = 0


@dataclass(frozen=True)
class ImageDiff:
    """What :func:`compare_images` found (see the module docstring).  ``os_packages`` is None when either image
    has no readable SBOM; ``new_bytes`` and ``new_layers`` are what B's layers add to a node that holds A's."""

    a: ImageFacts
    b: ImageFacts
    facts: tuple[Change, ...]
    packages: tuple[PackageChange, ...]
    packages_same: int
    os_packages: tuple[PackageChange, ...] | None
    os_packages_same: int
    sizes: tuple[SizeChange, ...]
    new_layers: int
    new_bytes: int
    labels: tuple[Change, ...]
    advisories_gained: tuple[Finding, ...]
    advisories_fixed: tuple[Finding, ...]
    check: tuple[Change, ...]

    @property
    def same(self) -> bool:
        """A and B are one image (the same digest)."""
        return self.a.digest == self.b.digest


def is_cuda_part(name: str) -> bool:
    """Whether package ``name`` (canonical) is one of the CUDA libraries' wheels."""
    return name.startswith(CUDA_PARTS)


def version_change(a: str, b: str) -> ChangeKind:
    """``up``, ``down`` or (for versions PEP 440 cannot order, or equal ones spelled differently) ``changed``."""
    try:
        older, newer = Version(a), Version(b)
    except InvalidVersion:
        return "changed"
    return "up" if newer > older else "down" if newer < older else "changed"


def package_changes(a: Mapping[str, str], b: Mapping[str, str], *,
                    cuda_first: bool = True) -> tuple[tuple[PackageChange, ...], int]:
    """(the packages added, removed, up or down from ``a`` to ``b``, by name with the CUDA parts first when
    ``cuda_first``, how many are the same in both)."""
    changes = []
    for name in sorted(set(a) | set(b)):
        old, new = a.get(name), b.get(name)
        if old == new:
            continue
        kind: ChangeKind = "added" if old is None else "removed" if new is None else version_change(old, new)
        changes.append(PackageChange(name, old, new, kind, cuda_first and is_cuda_part(name)))
    changes.sort(key=lambda c: not c.cuda_part)
    return tuple(changes), len(set(a) | set(b)) - len(changes)


def size_changes(a: ImageFacts, b: ImageFacts) -> tuple[SizeChange, ...]:
    """Each layer group of A or B (A's order, then B's new ones), then ``total``; only ``total`` when either
    image's groups are unknown."""
    out = []
    if a.groups and b.groups:
        theirs, mine = {g.group: g for g in b.groups}, {g.group: g for g in a.groups}
        for name in dict.fromkeys([*mine, *theirs]):
            old, new = mine.get(name), theirs.get(name)
            out.append(SizeChange(name, old.size if old else None, new.size if new else None,
                                  old.layers if old else 0, new.layers if new else 0))
    out.append(SizeChange("total", a.size, b.size, len(a.layers), len(b.layers)))
    return tuple(out)


def _facts(a: ImageFacts, b: ImageFacts) -> tuple[Change, ...]:
    rows = [Change("digest", a.digest, b.digest), Change("platforms", ", ".join(a.platforms), ", ".join(b.platforms))]
    rows += [Change(name, a.labels.get(label, ""), b.labels.get(label, "")) for name, label in LABEL_FACTS.items()]
    rows += [Change("created", a.created, b.created), Change("attestations", a.attestations, b.attestations)]
    return tuple(rows)


def _labels(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[Change, ...]:
    return tuple(Change(key, a.get(key, ""), b.get(key, "")) for key in sorted(set(a) | set(b))
                 if a.get(key) != b.get(key))


def _check(a: ImageFacts, b: ImageFacts) -> tuple[Change, ...]:
    if a.check is None and b.check is None:
        return ()
    rows = [Change("result", a.check.result if a.check else "", b.check.result if b.check else "")]
    found_a, found_b = (a.check.found if a.check else {}), (b.check.found if b.check else {})
    keys = dict.fromkeys([*found_a, *found_b])
    return tuple(rows + [Change(key, found_a.get(key, ""), found_b.get(key, "")) for key in keys])


def _advisories(a: ImageFacts, b: ImageFacts) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """(the findings of B that A has not, the findings of A that B has not), by id and package."""
    mine, theirs = {(f.id, f.package) for f in a.advisories}, {(f.id, f.package) for f in b.advisories}
    return (tuple(f for f in b.advisories if (f.id, f.package) not in mine),
            tuple(f for f in a.advisories if (f.id, f.package) not in theirs))


def compare_images(a: ImageFacts, b: ImageFacts) -> ImageDiff:
    """Everything that differs from A to B (pure; see the module docstring)."""
    packages, packages_same = package_changes(a.packages, b.packages)
    os_packages: tuple[PackageChange, ...] | None = None
    os_same = 0
    if a.os_packages is not None and b.os_packages is not None:
        os_packages, os_same = package_changes(a.os_packages, b.os_packages, cuda_first=False)
    held = {layer.digest for layer in a.layers}
    new = {layer.digest: layer.size for layer in b.layers if layer.digest not in held}
    gained, fixed = _advisories(a, b)
    return ImageDiff(a, b, _facts(a, b), packages, packages_same, os_packages, os_same, size_changes(a, b),
                     len(new), sum(new.values()), _labels(a.labels, b.labels), gained, fixed, _check(a, b))
