"""``imagectl matrix verify``: the pins the matrix states, compared with what a package index publishes.

For each release and CUDA variant of a framework, the build the index publishes for it is found (see
:func:`locate_build`), the core metadata of one of its wheels is read (PEP 658; never the wheel) and
:func:`compare_build` compares, as pure data:

- ``cuda`` / ``cudnn`` / ``nccl`` with the versions the wheel requires of the CUDA runtime
  (``nvidia-cuda-runtime-cuNN`` or ``cuda-toolkit``, compared as MAJOR.MINOR), ``nvidia-cudnn-cuNN`` and
  ``nvidia-nccl-cuNN``;
- every entry of ``pins`` with the wheel's requirement on that package (``==``: equal; a range: contains), and
  on each other Python of the release the pins that apply there (``pin_python``) with the requirements whose
  ``python_version`` markers hold there (:func:`compare_python_pins`);
- the release's ``python`` list with the CPython ABIs of the build's Linux x86_64 wheels (free-threaded
  ``cp3XXt`` ABIs are left out: the matrix lists standard CPython builds, the ones imagectl installs);
- each companion: a requirement of the framework on it, else the companion's own requirement on the
  framework (``==`` the release, or a range that admits it: a range is reported as *unverifiable*); and a
  Python of the release that the companion publishes no wheel for must be in the release's ``unavailable``.

Requirements are evaluated for the wheel's CPython on Linux x86_64 with no extra or with the extra named
like the variant's CUDA tag (JAX's ``jax[cuda12]``).  Each finding has a kind: ``differs`` and ``missing``
fail the check; ``unstated`` (the index pins a package the matrix does not list) and ``unverifiable``
(the index does not say) are notes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import requests
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..grammar import major_minor
from ..errors import InputError, PackageIndexError
from ..matrix.model import Framework, Matrix, Release, Variant
from ..pypi import DEFAULT_SETTINGS, DistFile, IndexSettings, new_session
from .index_builds import (
    ReleaseKey,
    IndexBuild,
    IndexReader,
    applicable,
    release_key,
    exact_version,
    find_build,
    installs_on,
    requirements_on,
    satisfies,
)

PinKind = Literal["differs", "missing", "unstated", "unverifiable"]  # what a finding is (module docstring)
DIFFERS: PinKind = "differs"
MISSING: PinKind = "missing"
UNSTATED: PinKind = "unstated"
UNVERIFIABLE: PinKind = "unverifiable"
FAILING: frozenset[PinKind] = frozenset({DIFFERS, MISSING})

# variant field -> the packages whose requirement states it, most specific first
FIELD_PACKAGES: dict[str, tuple[re.Pattern[str], ...]] = {
    "cuda": (re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$"), re.compile(r"^cuda-toolkit$")),
    "cudnn": (re.compile(r"^nvidia-cudnn-cu\d+$"),),
    "nccl": (re.compile(r"^nvidia-nccl-cu\d+$"),),
}


@dataclass(frozen=True)
class PinFinding:
    """One thing the matrix and the index disagree on (or that the index cannot confirm)."""

    framework: str
    release: str
    variant: str  # the build's CUDA tag (cu121)
    what: str
    matrix: str
    index: str
    kind: PinKind = DIFFERS

    @property
    def failing(self) -> bool:
        """Whether this finding fails ``verify`` (``differs`` or ``missing``)."""
        return self.kind in FAILING

    def __str__(self) -> str:
        return (f"{self.framework} {self.release} {self.variant}: {self.what}:"
                f" matrix says {self.matrix}, index says {self.index} ({self.kind})")


@dataclass(frozen=True)
class Companion:
    """A companion release a framework release names (``torchvision`` ``0.18.1``) and its build on the index:
    None when there is none, with ``why_missing`` (not on the index, unreadable)."""

    name: str
    version: str
    build: IndexBuild | None
    why_missing: str = "not on the index"


@dataclass(frozen=True)
class VerifyReport:
    """Every build checked (framework, release, CUDA tag), every finding, and the index of each framework."""

    checked: tuple[tuple[str, str, str], ...]
    findings: tuple[PinFinding, ...]
    indexes: Mapping[str, str] = field(default_factory=dict)

    @property
    def failures(self) -> tuple[PinFinding, ...]:
        """The findings that fail the check."""
        return tuple(f for f in self.findings if f.failing)


# --- pure comparisons ---------------------------------------------------------------------------

Row = tuple[str, str, str, PinKind]  # what, matrix, index, kind


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _public(version: str) -> str:
    """``2.3.1`` for ``2.3.1+cu118`` (normalised); the text itself when it is not a version."""
    try:
        return str(Version(Version(version).public))
    except InvalidVersion:
        return version


def _spec_text(requirements: Sequence[Requirement]) -> str:
    return ", ".join(f"{r.name}{r.specifier}" if str(r.specifier) else f"{r.name} (any version)" for r in requirements)


def field_requirement(requirements: Sequence[Requirement], name: str) -> Requirement | None:
    """The requirement that states variant field ``name`` (cuda, cudnn, nccl), or ``None``."""
    for pattern in FIELD_PACKAGES[name]:
        for requirement in requirements:
            if pattern.match(canonicalize_name(requirement.name)):
                return requirement
    return None


def compare_field(name: str, stated: str | None, requirement: Requirement | None) -> list[Row]:
    """Compare a variant's cuda/cudnn/nccl with the requirement that states it (pure)."""
    if requirement is None:
        return [(name, stated, "no requirement states it", UNVERIFIABLE)] if stated else []
    pinned = exact_version(requirement)
    if name == "cuda":
        if pinned is None:
            return [(name, stated or "-", f"{requirement.name}{requirement.specifier}", UNVERIFIABLE)]
        found = major_minor(pinned)
        ok = stated is not None and _same(major_minor(stated), found)
        return [] if ok else [(name, stated or "-", f"{found} ({requirement.name}=={pinned})", DIFFERS)]
    if stated is None:
        return [(name, "-", f"{requirement.name}{requirement.specifier}", DIFFERS)]
    ok = _same(stated, pinned) if pinned is not None else satisfies(requirement, stated)
    return [] if ok else [(name, stated, f"{requirement.name}{requirement.specifier}", DIFFERS)]


def compare_pins(pins: Iterable[tuple[str, str]], requirements: Sequence[Requirement],
                 unlisted: Iterable[str] = ()) -> list[Row]:
    """Compare each stated pin with the requirements; then note exact pins the matrix does not state.

    ``unlisted`` names packages not expected among the pins (the framework itself, its companions).
    """
    rows: list[Row] = []
    stated = {canonicalize_name(name) for name, _ in pins}
    for name, version in pins:
        found = requirements_on(requirements, name)
        if not found:
            rows.append((f"pin {name}", version, "not a direct requirement", UNVERIFIABLE))
            continue
        exact = [v for r in found if (v := exact_version(r)) is not None]
        ok = _same(version, exact[0]) if exact else all(satisfies(r, version) for r in found)
        if not ok:
            rows.append((f"pin {name}", version, _spec_text(found), DIFFERS))
    skip = stated | {canonicalize_name(n) for n in unlisted}
    for requirement in requirements:
        pinned = exact_version(requirement)
        if pinned is not None and canonicalize_name(requirement.name) not in skip:
            rows.append((f"pin {canonicalize_name(requirement.name)}", "-", f"=={pinned}", UNSTATED))
    return rows


def compare_python(listed: Sequence[str], build: IndexBuild) -> list[Row]:
    """Compare a release's Python list with the standard CPython ABIs the build publishes (pure)."""
    if not build.abis:
        return [("python", " ".join(listed), "no CPython-specific Linux x86_64 wheels", UNVERIFIABLE)]
    published = sorted(set(build.pythons), key=Version)
    if set(listed) == set(published):
        return []
    return [("python", " ".join(sorted(listed, key=Version)), " ".join(published) or "-", DIFFERS)]


def compare_build(fw: Framework, release: Release, variant: Variant, build: IndexBuild) -> list[PinFinding]:
    """Every finding for one variant of a release against the build the index publishes for it (pure)."""
    tag = fw.tag_of(variant.cuda)
    requirements = applicable(build.requirements, build.python, (tag,))
    rows: list[Row] = []
    if build.yanked is not None:
        rows.append(("yanked", "listed", f"every file yanked{': ' + build.yanked if build.yanked else ''}", DIFFERS))
    for name in FIELD_PACKAGES:
        rows += compare_field(name, getattr(variant, name), field_requirement(requirements, name))
    rows += compare_pins(variant.pins_for(build.python), requirements, (fw.package, *fw.companions))
    rows += compare_python_pins(fw, release, variant, build)
    rows += compare_python(release.python, build)
    return [PinFinding(fw.name, release.version, tag, *row) for row in rows]


def compare_python_pins(fw: Framework, release: Release, variant: Variant, build: IndexBuild) -> list[Row]:
    """On each Python of the release other than the wheel's own, the variant's pins there
    (:meth:`Variant.pins_for`) against the wheel's requirements whose markers hold there (pure): a pin required
    on the wheel's Python that the markers drop there, an exact pin they keep there that the matrix drops, or
    a requirement that differs there and the pin does not meet, *differs*.  Every CPython wheel of a torch
    release carries the same requirements and markers, so one wheel's metadata speaks for all of them."""
    tag = fw.tag_of(variant.cuda)
    base = applicable(build.requirements, build.python, (tag,))
    everywhere = {canonicalize_name(n) for n, _ in variant.pins} - {canonicalize_name(fw.package)}
    rows: list[Row] = []
    for python in (p for p in release.python if p != build.python):
        here = applicable(build.requirements, python, (tag,))
        stated = {canonicalize_name(n): v for n, v in variant.pins_for(python)}
        for name, version in stated.items():
            found, there = requirements_on(here, name), requirements_on(base, name)
            if there and not found:
                rows.append((f"pin {name} on Python {python}", version, "not required there (marker)", DIFFERS))
            elif {str(r) for r in found} != {str(r) for r in there} and not all(satisfies(r, version) for r in found):
                rows.append((f"pin {name} on Python {python}", version, _spec_text(found), DIFFERS))
        for requirement in here:
            name, pinned = canonicalize_name(requirement.name), exact_version(requirement)
            if pinned is not None and name in everywhere and name not in stated:
                rows.append((f"pin {name} on Python {python}", "-", f"=={pinned} (its marker holds there)", DIFFERS))
    return rows


def compare_companion_pythons(fw: Framework, release: Release, tag: str, companion: Companion) -> list[PinFinding]:
    """A Python of the release that no Linux x86_64 wheel of the companion installs on (``cp312-abi3``
    installs on 3.12 and later, ``py3-none`` on all) must be in the release's ``unavailable``, and a Python in
    ``unavailable`` is not checked (pure; a companion read without its wheel tags is not checked)."""
    build = companion.build
    if build is None or not build.tags:
        return []
    missing = [p for p in release.python if not installs_on(build.tags, p) and not release.unavailable_reason(p)]
    return [PinFinding(fw.name, release.version, tag, f"companion {companion.name} on Python {p}", "available",
                       f"no wheel of {companion.name} {companion.version} installs on CPython {p}", DIFFERS)
            for p in missing]


def compare_companion(fw: Framework, release: Release, tag: str, companion: Companion,
                      framework_requirements: Sequence[Requirement]) -> list[PinFinding]:
    """Whether the companion goes with the release (pure).

    The framework's own requirement on the companion decides when there is one; else the companion's
    requirement on the framework: ``==`` the release is right, a range that admits it is *unverifiable*,
    anything else *differs*.
    """
    row = _companion_row(fw, release, companion, framework_requirements)
    if companion.build is None and row is None:
        row = (companion.version, companion.why_missing, MISSING)
    return [] if row is None else [PinFinding(fw.name, release.version, tag, f"companion {companion.name}", *row)]


def _companion_row(fw: Framework, release: Release, companion: Companion,
                   framework_requirements: Sequence[Requirement]) -> tuple[str, str, PinKind] | None:
    name, version, build = companion.name, companion.version, companion.build
    own = requirements_on(framework_requirements, name)
    if own:
        if all(satisfies(r, version) for r in own):
            return None
        return (version, f"{fw.package} requires {_spec_text(own)}", DIFFERS)
    if build is None:
        return None
    back = requirements_on(applicable(build.requirements, build.python), fw.package)
    if not back:
        return (version, f"{name} {version} does not require {fw.package}", UNVERIFIABLE)
    exact = [v for r in back if (v := exact_version(r)) is not None]
    if exact:
        ok = _public(exact[0]) == _public(release.version)
        return None if ok else (version, f"{name} {version} requires {fw.package}=={exact[0]}", DIFFERS)
    local = f"{release.version}+{build.local}" if build.local else release.version
    admits = all(satisfies(r, release.version) or satisfies(r, local) for r in back)
    return (version, f"{name} {version} requires {_spec_text(back)}", UNVERIFIABLE if admits else DIFFERS)


# --- reading the index --------------------------------------------------------------------------


def same_index(a: str, b: str) -> bool:
    """Whether two index URLs name the same index (a trailing slash and the host's case do not count)."""
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def variant_index(fw: Framework, variant: Variant) -> str:
    """The index a non-PyPI variant installs from by default (the framework's index_url for its tag)."""
    return fw.index_url.replace("{cuda_tag}", fw.tag_of(variant.cuda))


def locate_build(fw: Framework, release: Release, variant: Variant, builds: Mapping[ReleaseKey, list[DistFile]],
                 index: str) -> list[DistFile] | None:
    """The files of the build ``index`` publishes for a variant: [] when it should be there and is not,
    ``None`` when this index is not expected to carry it (a cu118 build on PyPI).

    The build labelled with the variant's CUDA tag (``2.3.1+cu118``) is taken first; the unlabelled one
    stands for the PyPI variant, and for any variant whose own index is this one.  A variant is expected
    when this is its index, or when the index carries other builds with its label (or, for the PyPI
    variant, unlabelled builds): so a mirror of PyPI or of a PyTorch index is checked like the original.
    """
    tag = fw.tag_of(variant.cuda)
    own = same_index(index, variant_index(fw, variant))
    files = find_build(builds, release.version, tag, plain_ok=variant.pypi or own)
    if files:
        return files
    labels = {label for _, label in builds}
    expected = own or tag in labels or (variant.pypi and (same_index(index, fw.pypi_index_url) or "" in labels))
    return [] if expected else None


def verify_framework(fw: Framework, reader: IndexReader) -> tuple[list[tuple[str, str, str]], list[PinFinding]]:
    """Check every release and variant of ``fw`` against the reader's index.

    Raises:
        PackageIndexError: the framework's own project page cannot be read.
    """
    builds = reader.project(fw.package)
    checked: list[tuple[str, str, str]] = []
    findings: list[PinFinding] = []
    for release in fw.releases:
        for variant in release.variants:
            files = locate_build(fw, release, variant, builds, reader.index)
            if files is None:
                continue
            tag = fw.tag_of(variant.cuda)
            checked.append((fw.name, release.version, tag))
            findings += _verify_variant(fw, release, variant, files, reader)
    return checked, findings


def _verify_variant(fw: Framework, release: Release, variant: Variant, files: list[DistFile],
                    reader: IndexReader) -> list[PinFinding]:
    tag = fw.tag_of(variant.cuda)
    if not files:
        what = f"{fw.package} {release.version} ({tag})"
        return [PinFinding(fw.name, release.version, tag, "build", what, "not on the index", MISSING)]
    key = (Version(Version(release.version).public), _label_of(files[0]))
    try:
        build = reader.read(fw.package, key, files, release.python)
    except PackageIndexError as exc:
        return [PinFinding(fw.name, release.version, tag, "metadata", "-", f"unreadable: {exc}", DIFFERS)]
    findings = compare_build(fw, release, variant, build)
    requirements = applicable(build.requirements, build.python, (tag,))
    for name, version in release.companions:
        companion = _companion(reader, name, version, build.local, release.python)
        findings += compare_companion(fw, release, tag, companion, requirements)
        findings += compare_companion_pythons(fw, release, tag, companion)
    return findings


def _label_of(file: DistFile) -> str:
    key = release_key(file)
    return key[1] if key else ""


def _companion(reader: IndexReader, name: str, version: str, label: str, hint: Sequence[str]) -> Companion:
    """Companion ``name`` ``version`` with its build of the same label (else unlabelled), or without one and why
    it is missing."""
    try:
        builds = reader.project(name)
    except PackageIndexError as exc:
        return Companion(name, version, None, str(exc))
    files = find_build(builds, version, label, plain_ok=True)
    if not files:
        return Companion(name, version, None, "not on the index")
    try:
        return Companion(name, version, reader.read(name, (Version(Version(version).public), _label_of(files[0])),
                                                    files, hint), "")
    except PackageIndexError as exc:
        return Companion(name, version, None, f"unreadable: {exc}")


def verify_matrix(matrix: Matrix, framework: str | None = None, index: str | None = None,
                  session: requests.Session | None = None, settings: IndexSettings = DEFAULT_SETTINGS) -> VerifyReport:
    """Verify every framework (or only ``framework``) against ``index`` (default: each framework's
    ``pypi_index_url``).

    Raises:
        InputError: ``framework`` is not in the matrix, or ``index`` is not an http(s) URL.
        PackageIndexError: a framework's project page cannot be read (unreachable, 404, malformed).
    """
    names = _framework_names(matrix, framework)
    checked: list[tuple[str, str, str]] = []
    findings: list[PinFinding] = []
    indexes: dict[str, str] = {}
    live = session or new_session(settings)
    try:
        for name in names:
            fw = matrix.frameworks[name]
            indexes[name] = index or fw.pypi_index_url
            found = verify_framework(fw, IndexReader(indexes[name], live, settings))
            checked += found[0]
            findings += found[1]
    finally:
        if session is None:
            live.close()
    return VerifyReport(tuple(checked), tuple(findings), indexes)


def _framework_names(matrix: Matrix, framework: str | None) -> list[str]:
    if framework is None:
        return sorted(matrix.frameworks)
    if framework not in matrix.frameworks:
        raise InputError(f"--framework {framework!r}: not in the matrix ({', '.join(sorted(matrix.frameworks))})")
    return [framework]
