"""``imagectl matrix sync``: proposed matrix entries for upstream releases the matrix lacks.

The releases of each framework on its index (its ``pypi_index_url``, or ``--index``) are compared with the
matrix's: a newer patch of a minor line the matrix has, and the newest patch of each minor line newer than
the matrix's newest, are proposed (pre-releases, local-version builds and fully yanked releases are left
out; a line older than the matrix's newest that the matrix skips is taken as deliberate).  For each, the
core metadata of the default wheel is read (never the wheel) and becomes a ``[[release]]`` block in the
schema of ``matrices/*.toml``: the Pythons of its Linux x86_64 wheels, companions whose metadata requires
exactly that release, and one ``pypi = true`` variant whose ``cuda`` is MAJOR.MINOR of the CUDA runtime
pin, with cuDNN, NCCL and every ``==`` pin.  Each block says where it came from; what could not be
derived is a ``TODO`` comment.  The blocks are text for review: nothing edits the shipped matrix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import requests
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..grammar import major_minor
from ..errors import InputError, PackageIndexError
from ..matrix.model import Framework, Matrix, Release
from ..pypi import DEFAULT_SETTINGS, DistFile, IndexSettings, new_session
from .index_builds import (
    ReleaseKey,
    IndexBuild,
    IndexReader,
    applicable,
    exact_version,
    find_build,
    requirements_on,
    wheel_candidates,
    yanked_reason,
)
from .verify import field_requirement

MAX_COMPANION_READS = 40  # companion releases whose metadata is read while looking for one release's match
GPU_STACK = re.compile(r"^(nvidia-|cuda-|triton$)")  # loose requirements worth a comment in a proposal


@dataclass(frozen=True)
class Proposal:
    """A proposed ``[[release]]`` entry and where each of its facts came from."""

    framework: str
    version: str
    python: tuple[str, ...]
    companions: tuple[tuple[str, str], ...]
    todo: tuple[str, ...]  # comments: what could not be derived
    cuda: str | None
    cuda_from: str  # the requirement cuda was read from
    cuda_declared: bool
    cudnn: str | None
    nccl: str | None
    pins: tuple[tuple[str, str], ...]
    loose: tuple[str, ...]  # GPU-stack requirements without ==, verbatim
    source: str  # "<index URL> <wheel filename> metadata"
    newer_than: str | None  # the matrix's newest patch of this minor line, None for a new line
    other_cuda: tuple[str, ...] = ()  # for a newer patch: CUDA versions of the line's non-PyPI variants


@dataclass(frozen=True)
class ProposalInputs:
    """What a proposal for one build rests on besides the build's metadata: the matrix's newest older release
    (its variants guide the proposal), the matrix's newest patch of the build's minor line (None for a new line),
    the companions found for the build and a TODO line for each one not found."""

    previous: Release | None
    newer_than: str | None = None
    companions: tuple[tuple[str, str], ...] = ()
    todo: tuple[str, ...] = ()


# --- pure ---------------------------------------------------------------------------------------


def _release_line(version: Version) -> tuple[int, int]:
    return (version.major, version.minor)


def missing_releases(known: Iterable[str], published: Iterable[Version]) -> list[tuple[Version, str | None]]:
    """The releases to propose, newest first, each with the matrix's newest patch of its line (or None).

    A newer patch of a line the matrix has, and the newest patch of each line newer than its newest;
    pre-releases and dev releases are never proposed.  With an empty matrix, the newest release alone.
    """
    have: dict[tuple[int, int], Version] = {}
    for text in known:
        version = Version(text)
        have[_release_line(version)] = max(have.get(_release_line(version), version), version)
    lines: dict[tuple[int, int], Version] = {}
    for version in published:
        if not version.is_prerelease and not version.is_devrelease and not version.local:
            lines[_release_line(version)] = max(lines.get(_release_line(version), version), version)
    if not have:
        return [(max(lines.values()), None)] if lines else []
    top = max(have)
    out = [(v, str(have[line]) if line in have else None) for line, v in lines.items()
           if (line in have and v > have[line]) or line > top]
    return sorted(out, key=lambda item: item[0], reverse=True)


def cuda_of(build: IndexBuild, extras: Sequence[str] = ()) -> tuple[str | None, str]:
    """MAJOR.MINOR of the CUDA runtime the build pins exactly, and the requirement it came from."""
    requirement = field_requirement(applicable(build.requirements, build.python, extras), "cuda")
    pinned = exact_version(requirement) if requirement is not None else None
    if requirement is None or pinned is None:
        return None, f"{requirement.name}{requirement.specifier}" if requirement is not None else ""
    return major_minor(pinned), f"{requirement.name}=={pinned}"


def propose(matrix: Matrix, fw: Framework, build: IndexBuild, inputs: ProposalInputs) -> Proposal:
    """The proposal for one build of ``fw`` (pure): every fact read from ``build``'s metadata."""
    previous, newer_than = inputs.previous, inputs.newer_than
    extras = _extras(fw, previous)
    requirements = applicable(build.requirements, build.python, extras)
    skip = {canonicalize_name(n) for n in (fw.package, *fw.companions)}
    pins = tuple(sorted((canonicalize_name(r.name), v) for r in requirements
                        if (v := exact_version(r)) is not None and canonicalize_name(r.name) not in skip))
    loose = tuple(f"{r.name}{r.specifier}" for r in requirements
                  if exact_version(r) is None and str(r.specifier) and GPU_STACK.match(canonicalize_name(r.name)))
    cuda, cuda_from = cuda_of(build, extras)
    fields = {
        name: exact_version(r) if (r := field_requirement(requirements, name)) is not None else None
        for name in ("cudnn", "nccl")
    }
    return Proposal(
        framework=fw.name, version=build.version, python=build.pythons, companions=inputs.companions, todo=inputs.todo,
        cuda=cuda, cuda_from=cuda_from, cuda_declared=cuda in matrix.cuda, cudnn=fields["cudnn"], nccl=fields["nccl"],
        pins=pins, loose=loose, source=f"{build.source} {build.filename} metadata", newer_than=newer_than,
        other_cuda=tuple(v.cuda for v in previous.variants if not v.pypi) if previous and newer_than else (),
    )


def _extras(fw: Framework, previous: Release | None) -> tuple[str, ...]:
    """The CUDA tag of the previous release's PyPI variant, evaluated as an extra (``jax[cuda12]``)."""
    pypi = [v for v in previous.variants if v.pypi] if previous else []
    return (fw.tag_of(pypi[0].cuda),) if pypi else ()


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _inline(pairs: Sequence[tuple[str, str]]) -> str:
    return "{ " + ", ".join(f"{_key(k)} = {_toml_string(v)}" for k, v in pairs) + " }" if pairs else "{}"


def _key(name: str) -> str:
    return name if re.match(r"^[A-Za-z0-9_-]+$", name) else _toml_string(name)


def render_proposal(proposal: Proposal) -> str:
    """One proposal as a ``[[release]]`` block of matrix TOML, with its sources and TODOs as comments."""
    if proposal.newer_than:
        why = f"newer patch of {proposal.version.rsplit('.', 1)[0]}; the matrix has {proposal.newer_than}"
    else:
        why = "a minor line the matrix lacks"
    pythons = ", ".join(_toml_string(p) for p in proposal.python)
    companions_note = "   # each matched by an exact pin in the metadata" if proposal.companions else ""
    lines = [f"# --- {proposal.framework} {proposal.version} ({why}) ---", "[[release]]",
             f"version = {_toml_string(proposal.version)}",
             f"python = [{pythons}]   # CPython ABIs of its Linux x86_64 wheels (free-threaded left out)",
             f"companions = {_inline(proposal.companions)}" + companions_note]
    if not proposal.python:
        lines.append("# TODO python: its wheels are not CPython-specific; list the Pythons it supports")
    lines += [f"# TODO {line}" for line in proposal.todo]
    lines += ["", "  [[release.variant]]", f"  # source: {proposal.source}"]
    if proposal.cuda is None:
        cuda_from = f" ({proposal.cuda_from})" if proposal.cuda_from else ""
        lines.append(f"  # TODO cuda: the wheel pins no CUDA runtime{cuda_from}; set cuda = \"MAJOR.MINOR\"")
    else:
        lines.append(f"  cuda = {_toml_string(proposal.cuda)}   # from {proposal.cuda_from}")
        if not proposal.cuda_declared:
            lines.append(f"  # TODO: CUDA {proposal.cuda} is not declared in any [cuda] table;"
                         f" add [cuda.\"{proposal.cuda}\"] (matrices/cuda.toml) first")
    lines.append("  pypi = true")
    versions = (("cudnn", proposal.cudnn), ("nccl", proposal.nccl))
    lines += [f"  {name} = {_toml_string(value)}" for name, value in versions if value]
    lines += ["  [release.variant.pins]   # every == pin of the wheel metadata"]
    lines += [f"  {_toml_string(name)} = {_toml_string(version)}" for name, version in proposal.pins]
    if proposal.loose:
        lines.append(f"  # not pinned (no ==): {'; '.join(proposal.loose)}")
    if proposal.other_cuda:
        lines.append(f"  # TODO: {proposal.framework} {proposal.newer_than} in the matrix also lists"
                     f" CUDA {', '.join(proposal.other_cuda)} builds; add their [[release.variant]] from their indexes")
    return "\n".join(lines) + "\n"


def render_proposals(proposals: Sequence[Proposal], index_of: dict[str, str]) -> str:
    """The whole proposal document: a header per framework, then its blocks, newest first."""
    if not proposals:
        return ""
    parts = ["# Proposed by `imagectl matrix sync`: review each block,"
             " then move it into the framework's matrix file.\n"]
    for name in dict.fromkeys(p.framework for p in proposals):
        parts.append(f"\n# ===== {name}: releases on {index_of.get(name, '?')} that the matrix lacks =====\n")
        parts += ["\n" + render_proposal(p) for p in proposals if p.framework == name]
    return "".join(parts)


# --- reading the index --------------------------------------------------------------------------


def published(builds: Mapping[ReleaseKey, Sequence[DistFile]]) -> list[Version]:
    """The unlabelled releases with a usable wheel that are not entirely yanked."""
    return [version for (version, label), files in builds.items()
            if not label and wheel_candidates(files) and yanked_reason(files) is None]


def sync_framework(matrix: Matrix, fw: Framework, reader: IndexReader) -> list[Proposal]:
    """Proposals for ``fw`` from the reader's index, newest first.

    Raises:
        PackageIndexError: the framework's project page, or a proposed release's metadata, cannot be read.
    """
    builds = reader.project(fw.package)
    proposals = []
    for version, newer_than in missing_releases((r.version for r in fw.releases), published(builds)):
        files = find_build(builds, str(version), "", plain_ok=True)
        build = reader.read(fw.package, (version, ""), files)
        previous = _previous(fw, version)
        companions, todo = _companions(fw, build, previous, reader)
        inputs = ProposalInputs(previous, newer_than, tuple(companions), tuple(todo))
        proposals.append(propose(matrix, fw, build, inputs))
    return proposals


def _previous(fw: Framework, version: Version) -> Release | None:
    """The matrix's newest release older than ``version`` (its companions and variants guide the proposal)."""
    older = [r for r in fw.releases if Version(r.version) < version]
    return max(older, key=lambda r: Version(r.version)) if older else None


def _companions(fw: Framework, build: IndexBuild, previous: Release | None,
                reader: IndexReader) -> tuple[list[tuple[str, str]], list[str]]:
    """The companions that go with ``build`` (the framework's own == pin, else a companion release that
    requires exactly this one) and a TODO line for each one not found."""
    found: list[tuple[str, str]] = []
    todo: list[str] = []
    own = applicable(build.requirements, build.python, _extras(fw, previous))
    since = dict(previous.companions) if previous else {}
    for name in fw.companions:
        pinned = [v for r in requirements_on(own, name) if (v := exact_version(r)) is not None]
        match, why = (pinned[0], "") if pinned else _companion_for(fw, name, build.version, since.get(name), reader)
        if match is not None:
            found.append((name, match))
        else:
            todo.append(f"{name}: {why}")
    return found, todo


def _companion_for(fw: Framework, name: str, version: str, since: str | None,
                   reader: IndexReader) -> tuple[str | None, str]:
    """The companion release newer than ``since`` that requires ``fw.package==version`` exactly, or
    ``None`` and why not.  Oldest first from ``since`` (each read is cached for the next proposal), newest
    first without it; stops at one that requires a release beyond ``version``."""
    try:
        builds = reader.project(name)
    except PackageIndexError as exc:
        return None, str(exc)
    floor = Version(since) if since else None
    candidates = sorted((v for v in published(builds) if floor is None or v > floor), reverse=floor is None)
    target = Version(version)
    for candidate in candidates[:MAX_COMPANION_READS]:
        try:
            companion = reader.read(name, (candidate, ""), find_build(builds, str(candidate), "", plain_ok=True))
        except PackageIndexError:
            continue
        companion_requirements = applicable(companion.requirements, companion.python)
        pins = [exact_version(r) for r in requirements_on(companion_requirements, fw.package)]
        pinned = [Version(Version(p).public) for p in pins if p]
        if target in pinned:
            return str(candidate), ""
        if pinned and (min(pinned) > target if floor else max(pinned) < target):
            break
    return None, f"no {name} release on the index requires {fw.package}=={version}"


def sync_matrix(matrix: Matrix, framework: str | None = None, index: str | None = None,
                session: requests.Session | None = None,
                settings: IndexSettings = DEFAULT_SETTINGS) -> tuple[list[Proposal], dict[str, str]]:
    """Proposals for every framework (or ``framework``) and the index each was read from.

    Raises:
        InputError: ``framework`` is not in the matrix, or ``index`` is not an http(s) URL.
        PackageIndexError: an index page or a proposed release's metadata cannot be read.
    """
    if framework is not None and framework not in matrix.frameworks:
        raise InputError(f"--framework {framework!r}: not in the matrix ({', '.join(sorted(matrix.frameworks))})")
    names = [framework] if framework else sorted(matrix.frameworks)
    live = session or new_session(settings)
    proposals: list[Proposal] = []
    indexes: dict[str, str] = {}
    try:
        for name in names:
            fw = matrix.frameworks[name]
            indexes[name] = index or fw.pypi_index_url
            proposals += sync_framework(matrix, fw, IndexReader(indexes[name], live, settings))
    finally:
        if session is None:
            live.close()
    return proposals, indexes


__all__ = ["Proposal", "missing_releases", "propose", "render_proposal", "render_proposals", "sync_matrix"]
