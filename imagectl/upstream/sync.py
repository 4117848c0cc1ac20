"""``imagectl matrix sync``: proposed matrix entries for upstream releases the matrix lacks.

The releases of each framework on its index (its ``pypi_index_url``, or ``--index``) are compared with the
matrix's: a newer patch of a minor line the matrix has, and the newest patch of each minor line newer than
the matrix's newest, are proposed (pre-releases, local-version builds and fully yanked releases are left
out; a line older than the matrix's newest that the matrix skips is taken as deliberate).  For each, the
core metadata of the default wheel is read (never the wheel) and becomes a ``[[release]]`` block in the
schema of ``matrices/*.toml``: the Pythons of its Linux x86_64 wheels, companions whose metadata pins or
admits that release (:mod:`.companions`), and one ``pypi = true`` variant whose ``cuda`` is MAJOR.MINOR of
the CUDA runtime pin, with cuDNN, NCCL and every ``==`` pin.  Each block says where it came from; what could
not be derived is a ``TODO`` comment.

A release the matrix already has is not done with: companions often come out after the framework (or state
only a floor), so each matrix release that lacks one of the framework's companions is looked up again, and a
companion found since is proposed as a ``companions = {...}`` line for that release.  Packages released in
lockstep with the framework (:mod:`.lockstep`: jax's jaxlib, plugins and pjrt) are checked both ways: a
proposed release that pins one at a version the index lacks is not proposed, and a lockstep release without
its framework release (``jax-cuda13-plugin 0.12.1`` without ``jax 0.12.1``) is a notice, one line each.
The blocks are text for review: nothing edits the shipped matrix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import requests
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..grammar import major_minor
from ..errors import InputError, PackageIndexError
from ..matrix.model import Framework, Matrix, Release
from ..pypi import DEFAULT_SETTINGS, DistFile, IndexSettings, new_session
from .companions import CompanionMatch, find_companion, published_versions
from .index_builds import (
    ReleaseKey,
    IndexBuild,
    IndexReader,
    applicable,
    exact_version,
    find_build,
    requirements_on,
)
from .lockstep import lockstep_packages, orphans, unpublished_pins
from .verify import field_requirement

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
    notes: tuple[str, ...] = ()  # comments: how a companion that is not an == pin was matched


@dataclass(frozen=True)
class CompanionUpdate:
    """Companions found for a release the matrix already has, which lacks them."""

    framework: str
    version: str
    known: tuple[tuple[str, str], ...]  # the release's companions in the matrix
    found: tuple[CompanionMatch, ...]
    source: str  # the index read


@dataclass(frozen=True)
class SyncReport:
    """What ``matrix sync`` found: new releases, companions for releases the matrix has, one-line notices
    (lockstep releases without their framework release, releases not proposed because they are broken), and
    the index each framework was read from."""

    proposals: tuple[Proposal, ...] = ()
    updates: tuple[CompanionUpdate, ...] = ()
    notices: tuple[str, ...] = ()
    indexes: dict[str, str] = field(default_factory=dict)

    @property
    def pending(self) -> bool:
        """Whether there is anything to propose (``--check`` exits 1)."""
        return bool(self.proposals or self.updates)


@dataclass(frozen=True)
class ProposalInputs:
    """What a proposal for one build rests on besides the build's metadata: the matrix's newest older release
    (its variants guide the proposal), the matrix's newest patch of the build's minor line (None for a new line),
    the companions found for the build and a TODO line for each one not found."""

    previous: Release | None
    newer_than: str | None = None
    companions: tuple[tuple[str, str], ...] = ()
    todo: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


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
        notes=inputs.notes,
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
    companions_note = "   # each pins or admits this release in its metadata" if proposal.companions else ""
    lines = [f"# --- {proposal.framework} {proposal.version} ({why}) ---", "[[release]]",
             f"version = {_toml_string(proposal.version)}",
             f"python = [{pythons}]   # CPython ABIs of its Linux x86_64 wheels (free-threaded left out)",
             f"companions = {_inline(proposal.companions)}" + companions_note]
    if not proposal.python:
        lines.append("# TODO python: its wheels are not CPython-specific; list the Pythons it supports")
    lines += [f"# TODO {line}" for line in proposal.todo]
    lines += [f"# note: {line}" for line in proposal.notes]
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


def render_update(update: CompanionUpdate) -> str:
    """Companions for a release the matrix has, as comments (the document stays TOML): the line to set in
    that release's ``[[release]]`` and how each companion was matched."""
    merged = dict(update.known)
    merged.update({m.name: m.version for m in update.found})
    lines = [f"# --- {update.framework} {update.version} (in the matrix; companions released for it since) ---",
             f"# in its [[release]], set: companions = {_inline(tuple(merged.items()))}"]
    for match in update.found:
        how = "pins it exactly" if match.relation == "pins" else "admits it (not an == pin)"
        lines.append(f"#   {match.name} {match.version}: requires {match.requirement}, {how};"
                     f" source: {update.source} {match.name} {match.version} metadata")
    return "\n".join(lines) + "\n"


def render_proposals(proposals: Sequence[Proposal], index_of: dict[str, str],
                     updates: Sequence[CompanionUpdate] = ()) -> str:
    """The whole proposal document: a header per framework, then its new releases, newest first, then the
    companions found for releases it has."""
    if not proposals and not updates:
        return ""
    parts = ["# Proposed by `imagectl matrix sync`: review each block,"
             " then move it into the framework's matrix file.\n"]
    for name in dict.fromkeys([*(p.framework for p in proposals), *(u.framework for u in updates)]):
        parts.append(f"\n# ===== {name}: releases on {index_of.get(name, '?')} that the matrix lacks =====\n")
        parts += ["\n" + render_proposal(p) for p in proposals if p.framework == name]
        parts += ["\n" + render_update(u) for u in updates if u.framework == name]
    return "".join(parts)


# --- reading the index --------------------------------------------------------------------------


def published(builds: Mapping[ReleaseKey, Sequence[DistFile]]) -> list[Version]:
    """The unlabelled releases with a usable wheel that are not entirely yanked."""
    return published_versions(dict(builds))


def sync_framework(matrix: Matrix, fw: Framework, reader: IndexReader) -> SyncReport:
    """Proposals for ``fw`` from the reader's index (newest first), companions for the releases it has, and
    notices.  A release whose lockstep pins the index does not publish is a notice, not a proposal.

    Raises:
        PackageIndexError: the framework's project page, or a proposed release's metadata, cannot be read.
    """
    builds = reader.project(fw.package)
    lockstep = lockstep_packages(fw)
    lockstep_published = _published_of(lockstep, reader)
    proposals, notices = [], []
    for version, newer_than in missing_releases((r.version for r in fw.releases), published(builds)):
        files = find_build(builds, str(version), "", plain_ok=True)
        build = reader.read(fw.package, (version, ""), files)
        previous = _previous(fw, version)
        companions, todo, notes = _companions(fw, build, previous, reader)
        inputs = ProposalInputs(previous, newer_than, tuple(companions), tuple(todo), tuple(notes))
        proposal = propose(matrix, fw, build, inputs)
        missing = unpublished_pins(proposal.version, [*proposal.pins, *proposal.companions], lockstep,
                                   {**lockstep_published, **_published_of(_own_pins(proposal), reader)})
        if missing:
            notices.append(f"{fw.name} {proposal.version} not proposed: it pins {', '.join(missing)},"
                           " which the index does not publish")
            continue
        proposals.append(proposal)
    notices += orphans(fw, published(builds), lockstep_published)
    updates = companion_updates(fw, reader)
    return SyncReport(tuple(proposals), tuple(updates), tuple(notices))


def _own_pins(proposal: Proposal) -> list[str]:
    """The packages a proposal pins at its own version (``jaxlib==0.12.1`` for jax 0.12.1)."""
    own = Version(proposal.version)
    return [name for name, pin in [*proposal.pins, *proposal.companions] if _is_version(pin, own)]


def _is_version(text: str, version: Version) -> bool:
    try:
        return Version(text) == version
    except ValueError:
        return False


def _published_of(names: Sequence[str], reader: IndexReader) -> dict[str, list[Version]]:
    """The published releases of each of ``names`` on the reader's index; a project the index cannot list is
    left out (nothing is claimed about it)."""
    found: dict[str, list[Version]] = {}
    for name in names:
        try:
            found[name] = published(reader.project(name))
        except PackageIndexError:
            continue
    return found


def companion_updates(fw: Framework, reader: IndexReader) -> list[CompanionUpdate]:
    """For each release in the matrix that lacks one of the framework's companions, the companions the index
    has for it now (newest release first); releases for which none is found are left out."""
    updates = []
    for release in sorted(fw.releases, key=lambda r: Version(r.version), reverse=True):
        have = dict(release.companions)
        since = _companion_floor(fw, release)
        found = []
        for name in (n for n in fw.companions if n not in have):
            match, _ = find_companion(fw.package, name, release.version, since.get(name), reader)
            if match is not None:
                found.append(match)
        if found:
            updates.append(CompanionUpdate(fw.name, release.version, release.companions, tuple(found), reader.index))
    return updates


def _companion_floor(fw: Framework, release: Release) -> dict[str, str]:
    """Each companion's version in the matrix's newest release older than ``release`` that lists it: a
    companion released for ``release`` since is newer than that."""
    floors: dict[str, str] = {}
    for older in sorted(fw.releases, key=lambda r: Version(r.version)):
        if Version(older.version) < Version(release.version):
            floors.update(dict(older.companions))
    return {name: str(Version(v)) for name, v in floors.items()}


def _previous(fw: Framework, version: Version) -> Release | None:
    """The matrix's newest release older than ``version`` (its companions and variants guide the proposal)."""
    older = [r for r in fw.releases if Version(r.version) < version]
    return max(older, key=lambda r: Version(r.version)) if older else None


def _companions(fw: Framework, build: IndexBuild, previous: Release | None,
                reader: IndexReader) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The companions that go with ``build`` (the framework's own == pin, else a companion release that pins or
    admits this one, :func:`.companions.find_companion`), a TODO line for each one not found and a note for
    each one that only admits it."""
    found: list[tuple[str, str]] = []
    todo: list[str] = []
    notes: list[str] = []
    own = applicable(build.requirements, build.python, _extras(fw, previous))
    since = dict(previous.companions) if previous else {}
    for name in fw.companions:
        pinned = [v for r in requirements_on(own, name) if (v := exact_version(r)) is not None]
        if pinned:
            found.append((name, pinned[0]))
            continue
        match, why = find_companion(fw.package, name, build.version, since.get(name), reader)
        if match is None:
            todo.append(f"{name}: {why}")
            continue
        found.append((name, match.version))
        if match.note:
            notes.append(match.note)
    return found, todo, notes


def sync_matrix(matrix: Matrix, framework: str | None = None, index: str | None = None,
                session: requests.Session | None = None,
                settings: IndexSettings = DEFAULT_SETTINGS) -> SyncReport:
    """What sync finds for every framework (or ``framework``), with the index each was read from.

    Raises:
        InputError: ``framework`` is not in the matrix, or ``index`` is not an http(s) URL.
        PackageIndexError: an index page or a proposed release's metadata cannot be read.
    """
    if framework is not None and framework not in matrix.frameworks:
        raise InputError(f"--framework {framework!r}: not in the matrix ({', '.join(sorted(matrix.frameworks))})")
    names = [framework] if framework else sorted(matrix.frameworks)
    live = session or new_session(settings)
    reports: list[SyncReport] = []
    indexes: dict[str, str] = {}
    try:
        for name in names:
            fw = matrix.frameworks[name]
            indexes[name] = index or fw.pypi_index_url
            reports.append(sync_framework(matrix, fw, IndexReader(indexes[name], live, settings)))
    finally:
        if session is None:
            live.close()
    return SyncReport(tuple(p for r in reports for p in r.proposals), tuple(u for r in reports for u in r.updates),
                      tuple(n for r in reports for n in r.notices), indexes)


__all__ = ["CompanionUpdate", "Proposal", "SyncReport", "missing_releases", "propose", "render_proposal",
           "render_proposals", "render_update", "sync_matrix"]
