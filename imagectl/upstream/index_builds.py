"""The builds a package index publishes for a release, and the facts ``verify`` and ``sync`` read from them.

A *build* is every wheel of one release that carries one local version label: ``torch 2.3.1`` on PyPI
(no label), ``torch 2.3.1+cu118`` on https://download.pytorch.org/whl/cu118.  Of a build, the core metadata
of one wheel is read (PEP 658 ``.metadata``, else HTTP Range reads; a wheel is never downloaded): a glibc
Linux x86_64 wheel (else a pure ``-any`` wheel), not yanked, CPython 3.11 preferred, then the lowest
CPython, then the highest build tag (the one pip installs).  Its requirements are evaluated for CPython of
that wheel on Linux x86_64, as :func:`imagectl.pypi.exact_pins` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import PackageIndexError
from ..pypi import (
    DEFAULT_SETTINGS,
    DistFile,
    IndexSettings,
    cpython_abis,
    is_wheel,
    linux_x86_64_wheels,
    marker_environment,
    parse_wheel,
    project_files,
    tag_runs_on_cpython,
    wheel_metadata,
)
from ..pypi.wheels import cpython_sort_key, is_glibc_linux_x86_64

PREFERRED_PYTHON = "3.11"
MAX_TRIES = 3  # wheels of one build tried before its metadata counts as unreadable

ReleaseKey = tuple[Version, str]  # (public version, local label or "")


@dataclass(frozen=True)
class IndexBuild:
    """What an index publishes for one build: the wheel read, its requirements and the CPython ABIs.

    ``requirements`` are every ``Requires-Dist`` entry, unevaluated; ``abis`` the CPython ABI tags of
    the build's glibc Linux x86_64 wheels (``cp311``, ``cp313t``); ``yanked`` is ``None`` unless every
    file of the build is yanked (then the reason, ``""`` when none was given).
    """

    project: str
    version: str
    local: str
    filename: str
    python: str
    requirements: tuple[Requirement, ...]
    abis: tuple[str, ...]
    yanked: str | None = None
    source: str = ""
    # the ``interpreter-abi`` tags of those wheels (``cp312-abi3``, ``py3-none``): which Pythons can install it
    tags: tuple[str, ...] = ()

    @property
    def pythons(self) -> tuple[str, ...]:
        """The standard CPython versions of :attr:`abis` (``3.11``); free-threaded ``t`` ABIs are left out."""
        return tuple(python_of_abi(abi) for abi in self.abis if abi.startswith("cp3") and not abi.endswith("t"))


def wheel_tags(files: Iterable[DistFile]) -> tuple[str, ...]:
    """The ``interpreter-abi`` tags of the glibc Linux x86_64 wheels among ``files``, sorted; raises
    PackageIndexError for a ``*.whl`` name that is not a wheel filename."""
    return tuple(sorted({f"{tag.interpreter}-{tag.abi}" for file in linux_x86_64_wheels(files)
                         for tag in parse_wheel(file.filename).tags if is_glibc_linux_x86_64(tag)}))


def installs_on(tags: Iterable[str], python: str) -> bool:
    """Whether a wheel of one of ``tags`` (``cp312-abi3``) installs on CPython ``python`` on Linux x86_64."""
    return any(tag_runs_on_cpython(Tag(*tag.split("-", 1), "manylinux_2_28_x86_64"), python) for tag in tags)


def python_of_abi(abi: str) -> str:
    """``cp311`` -> ``3.11`` (``cp313t`` -> ``3.13t``); never raises for a ``cp3..`` tag."""
    return f"3.{abi[3:]}"


def release_key(file: DistFile) -> ReleaseKey | None:
    """The (public version, local label) of a wheel, or ``None`` for a file that is not a valid wheel."""
    if not is_wheel(file):
        return None
    try:
        version = parse_wheel(file.filename).version
    except PackageIndexError:
        return None
    return Version(version.public), version.local or ""


def builds_of(files: Iterable[DistFile]) -> dict[ReleaseKey, list[DistFile]]:
    """Group the wheels of ``files`` by build, in index order; invalid wheel names are ignored."""
    grouped: dict[ReleaseKey, list[DistFile]] = {}
    for file in files:
        key = release_key(file)
        if key is not None:
            grouped.setdefault(key, []).append(file)
    return grouped


def find_build(builds: Mapping[ReleaseKey, list[DistFile]], version: str, label: str, *,
               plain_ok: bool) -> list[DistFile]:
    """The wheels of ``version`` labelled ``label``, else (when ``plain_ok``) its unlabelled wheels, else []."""
    try:
        wanted = Version(Version(version).public)
    except InvalidVersion:
        return []
    return builds.get((wanted, label)) or (builds.get((wanted, ""), []) if plain_ok else [])


def _wheel_abi(file: DistFile) -> str:
    abis = cpython_abis([file])
    return abis[0] if abis else ""


def _build_rank(file: DistFile) -> int:
    build = parse_wheel(file.filename).build
    return -build[0] if build else 1


def pure_wheels(files: Iterable[DistFile]) -> tuple[DistFile, ...]:
    """The wheels among ``files`` that install anywhere (platform tag ``any``)."""
    return tuple(f for f in files if is_wheel(f) and any(t.platform == "any" for t in parse_wheel(f.filename).tags))


def wheel_candidates(files: Sequence[DistFile]) -> list[DistFile]:
    """The wheels whose metadata to try, best first (see the module docstring); [] when none fits."""
    chosen = linux_x86_64_wheels(files) or pure_wheels(files)
    return sorted(chosen, key=lambda f: (
        f.yanked, _wheel_abi(f) != "cp311", cpython_sort_key(_wheel_abi(f)), _build_rank(f), f.filename
    ))


def marker_python(file: DistFile, hint: Sequence[str] = ()) -> str:
    """The CPython a wheel's markers are evaluated for: its own (``cp312`` -> 3.12); for a pure wheel
    3.11, or the lowest of ``hint`` when ``hint`` lacks 3.11."""
    abi = _wheel_abi(file).rstrip("t")
    if abi.startswith("cp3"):
        return python_of_abi(abi)
    if hint and PREFERRED_PYTHON not in hint:
        return min(hint, key=Version)
    return PREFERRED_PYTHON


def yanked_reason(files: Sequence[DistFile]) -> str | None:
    """``None`` unless every file is yanked; then the first reason given, or ``""``."""
    if not files or not all(f.yanked for f in files):
        return None
    return next((f.yanked_reason for f in files if f.yanked_reason), "")


def _label(key: ReleaseKey) -> str:
    return f"{key[0]}+{key[1]}" if key[1] else str(key[0])


def applicable(requirements: Iterable[Requirement], python: str, extras: Iterable[str] = ()) -> tuple[Requirement, ...]:
    """The requirements whose marker holds for CPython ``python`` on Linux x86_64 with no extra, or with
    one of ``extras`` (an extra named like a variant's CUDA tag, e.g. jax's ``cuda12``)."""
    environment = marker_environment(python)
    wanted = ("", *extras)
    return tuple(
        r for r in requirements
        if r.marker is None or any(r.marker.evaluate({**environment, "extra": e}) for e in wanted)
    )


def requirements_on(requirements: Iterable[Requirement], name: str) -> tuple[Requirement, ...]:
    """The requirements naming project ``name`` (compared as normalised names)."""
    wanted = canonicalize_name(name)
    return tuple(r for r in requirements if canonicalize_name(r.name) == wanted)


def exact_version(requirement: Requirement) -> str | None:
    """The one version ``requirement`` admits: its ``==`` (no wildcard) or ``===`` version, or ``X`` for
    ``>=X,<=X`` (how JAX pins jaxlib and its plugins); else ``None``."""
    floors: set[str] = set()
    ceilings: set[str] = set()
    for spec in requirement.specifier:
        if spec.operator == "===" or (spec.operator == "==" and not spec.version.endswith(".*")):
            return spec.version
        if spec.operator in (">=", "<="):
            (floors if spec.operator == ">=" else ceilings).add(spec.version)
    both = floors & ceilings
    return both.pop() if len(floors) == len(ceilings) == len(both) == 1 else None


def satisfies(requirement: Requirement, version: str) -> bool:
    """Whether ``version`` (pre-releases included) meets ``requirement``'s specifier; False if invalid."""
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


class IndexReader:
    """One index read through one session: each project listing and each build's metadata read once."""

    def __init__(self, index: str, session: requests.Session, settings: IndexSettings = DEFAULT_SETTINGS) -> None:
        self.index, self.session, self.settings = index, session, settings
        self._projects: dict[str, dict[ReleaseKey, list[DistFile]] | PackageIndexError] = {}
        self._builds: dict[tuple[str, ReleaseKey], IndexBuild | PackageIndexError] = {}

    def project(self, name: str) -> dict[ReleaseKey, list[DistFile]]:
        """The builds of project ``name`` on the index.

        Raises:
            InputError: a bad index URL or project name.
            PackageIndexError: the project page cannot be read (the same error again on a second call).
        """
        if name not in self._projects:
            try:
                self._projects[name] = builds_of(project_files(self.index, name, self.session, self.settings))
            except PackageIndexError as exc:
                self._projects[name] = exc
        return _value(self._projects[name])

    def read(self, name: str, key: ReleaseKey, files: Sequence[DistFile], hint: Sequence[str] = ()) -> IndexBuild:
        """The build ``key`` of ``name`` (its ``files``), read once (:meth:`read_build`); raises as it does, the
        same error again on a second call."""
        if (name, key) not in self._builds:
            try:
                self._builds[(name, key)] = self.read_build(name, key, files, hint)
            except PackageIndexError as exc:
                self._builds[(name, key)] = exc
        return _value(self._builds[(name, key)])

    def read_build(self, project: str, key: ReleaseKey, files: Sequence[DistFile],
                   hint: Sequence[str] = ()) -> IndexBuild:
        """Read the metadata of the build's best wheel (trying up to MAX_TRIES wheels) into an IndexBuild; the
        markers of a pure wheel are evaluated for a Python of ``hint`` (see :func:`marker_python`).

        Raises:
            PackageIndexError: the build has no Linux x86_64 or pure wheel, or no tried wheel's metadata
                could be read (the last error is given).
        """
        candidates = wheel_candidates(files)
        if not candidates:
            raise PackageIndexError(f"{self.index}: {project} {_label(key)} has no Linux x86_64 or pure Python wheel")
        error: PackageIndexError | None = None
        for file in candidates[:MAX_TRIES]:
            try:
                metadata = wheel_metadata(file, self.session, self.settings)
            except PackageIndexError as exc:
                error = exc
                continue
            return IndexBuild(project=canonicalize_name(project), version=str(key[0]), local=key[1],
                              filename=file.filename, python=marker_python(file, hint),
                              requirements=metadata.requires_dist, abis=cpython_abis(linux_x86_64_wheels(files)),
                              yanked=yanked_reason(files), source=self.index, tags=wheel_tags(files))
        assert error is not None
        raise error


def _value(found: Any) -> Any:
    if isinstance(found, PackageIndexError):
        raise found
    return found
