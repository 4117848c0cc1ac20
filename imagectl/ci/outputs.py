"""The profile list in the shapes CI systems consume; pure functions from profiles to text.

- ``json``: the rows of ``imagectl list --json`` (with ``verified`` and ``unverified``, the reason);
- ``github``: one line of JSON for ``strategy.matrix: ${{ fromJSON(...) }}``, a matrix of *chunks*:
  ``{"include": [{"chunk": 1, "chunks": N, "profiles": {"include": [{"profile", "framework", "cuda",
  "python", "verified", "unverified", "platform", "platforms"}, ...]}, "indexes": {"include": [{"profile",
  "platforms"}, ...]}}, ...]}`` (strings, but ``verified`` a boolean and ``chunk``, ``chunks`` numbers;
  ``unverified`` the reason or ``""``): one build job per profile and platform, and one index job per profile
  that assembles its image index once every platform's image is pushed.  GitHub runs at most 256 jobs per matrix,
  so each chunk holds at most that many build jobs (a profile's platforms in one chunk) and is itself a matrix,
  for a reusable workflow called once per chunk (``.github/workflows/imagectl-build.yml``); the chunks are at
  most as many, so up to 256 x 256 build jobs fit.  An empty list prints ``{"include":[]}`` exactly (GitHub
  rejects a matrix without entries, so a workflow compares the output with that string and skips the job);
- ``gitlab``: a child pipeline (YAML, written by hand) whose build jobs fan out per profile and platform with
  ``parallel: matrix: - PLATFORM: ... PROFILE: [...]``, its index jobs per profile (``PLATFORMS``) and its promote
  jobs per profile (200 at most per job, as GitLab allows, the rest in ``imagectl-build-2``, ...), extending the
  hidden jobs ``.imagectl-build``, ``.imagectl-index`` and ``.imagectl-promote`` of an included file; with no
  profile, one job that says so (a child pipeline needs a job).  A comment line
  names each unverified profile and why;
- ``tekton``: Tekton ``tekton.dev/v1`` Tasks and a Pipeline whose build, index and promote tasks fan out with a
  ``matrix`` (at most 256 combinations per PipelineTask, Tekton's default, the rest in ``build-2``, ...); the build
  and index tasks emit ``IMAGE_URL`` and ``IMAGE_DIGEST`` for Tekton Chains (:mod:`imagectl.ci.tekton`);
- ``argo``: an Argo Workflows ``argoproj.io/v1alpha1`` Workflow whose steps fan out with ``withParam`` over the
  build rows, then the profiles (:mod:`imagectl.ci.argo`);
- ``markdown``: a compatibility table, one row per framework release x CUDA build, with a Verified column.

The job limits are :data:`MAX_JOBS`, overridable (``--max-jobs``) for an installation with other limits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal, get_args

from packaging.version import Version

from ..matrix.facts import list_row
from ..errors import InputError
from ..matrix.model import Profile
from .argo import argo_workflow
from .rows import chunked, github_include, packed
from .tekton import TEKTON_MAX_COMBINATIONS, tekton_pipeline
from .yaml_text import yaml_comment, yaml_string

OutputFormat = Literal["json", "github", "gitlab", "tekton", "argo", "markdown"]
FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)
GITHUB_KEYS = ("profile", "framework", "cuda", "python", "verified", "unverified", "platform", "platforms")
GITHUB_INDEX_KEYS = ("profile", "platforms")
GITHUB_EMPTY = '{"include":[]}'
GITLAB_JOBS = (("build", "imagectl-build", ".imagectl-build"), ("index", "imagectl-index", ".imagectl-index"),
               ("promote", "imagectl-promote", ".imagectl-promote"))
GITLAB_VARIABLE = "PROFILE"
GITLAB_PLATFORM = "PLATFORM"  # the build jobs' platform (linux/amd64, linux/arm64)
GITLAB_PLATFORMS = "PLATFORMS"  # the index jobs' platforms, comma-separated

# The most jobs one matrix may fan out to, as each CI system documents it (the defaults of --max-jobs):
# GitHub Actions, "A matrix will generate a maximum of 256 jobs per workflow run" (counted per matrix: the
# example workflow calls a reusable workflow from a matrix of chunks, each call with a matrix of its own):
# https://docs.github.com/en/actions/writing-workflows/choosing-what-your-workflow-does/running-variations-of-jobs-in-a-workflow
# GitLab CI, parallel:matrix, "The number of permutations cannot exceed 200":
# https://docs.gitlab.com/ci/yaml/#parallelmatrix
# Tekton, matrix: "The default maximum count of TaskRuns or Runs from a given Matrix is 256" (per PipelineTask;
# an installation sets default-max-matrix-combinations-count): https://tekton.dev/docs/pipelines/matrix/
GITHUB_MAX_JOBS = 256
GITLAB_MAX_JOBS = 200
MAX_JOBS: dict[OutputFormat, int] = {"github": GITHUB_MAX_JOBS, "gitlab": GITLAB_MAX_JOBS,
                                     "tekton": TEKTON_MAX_COMBINATIONS}

def json_rows(profiles: Sequence[Profile]) -> str:
    """The ``list --json`` rows of ``profiles`` as indented JSON."""
    return json.dumps([list_row(p) for p in profiles], indent=2, sort_keys=True)


def github_chunks(profiles: Sequence[Profile], max_jobs: int = GITHUB_MAX_JOBS) -> dict[str, list[dict[str, object]]]:
    """The GitHub Actions matrix of chunks: ``{"include": [{"chunk": n, "chunks": N, "profiles": {"include":
    [...]}, "indexes": {"include": [...]}}, ...]}``, in list order: each chunk's ``profiles`` a matrix of at most
    ``max_jobs`` build jobs, one per profile and platform (:attr:`Profile.platforms`), and its ``indexes`` one entry
    per profile of the chunk (``profile``, ``platforms``) for the job that assembles its image index once every
    platform's image is pushed.

    Raises:
        InputError: ``max_jobs`` below 1 or below a profile's platform count, or more chunks than ``max_jobs`` (the
            matrix over the chunks is limited too).
    """
    chunks = packed([[github_include(p, platform) for platform in p.platforms] for p in profiles], max_jobs)
    if len(chunks) > max_jobs:
        jobs = sum(len(p.platforms) for p in profiles)
        raise InputError(f"{len(profiles)} profiles need {len(chunks)} chunks of at most {max_jobs} build jobs ({jobs} "
                         f"jobs, one per platform), and one matrix runs at most {max_jobs} of them: select fewer "
                         "profiles (--framework, --changed-since)")
    return {"include": [_github_chunk(chunk, number, len(chunks)) for number, chunk in enumerate(chunks, start=1)]}


def _github_chunk(groups: list[list[dict[str, str | bool]]], number: int, count: int) -> dict[str, object]:
    indexes = [{key: group[0][key] for key in GITHUB_INDEX_KEYS} for group in groups]
    return {"chunk": number, "chunks": count, "profiles": {"include": [e for group in groups for e in group]},
            "indexes": {"include": indexes}}


def github_matrix(profiles: Sequence[Profile], max_jobs: int = GITHUB_MAX_JOBS) -> str:
    """:func:`github_chunks` on one line of JSON (``{"include":[]}`` when there is no profile).

    Raises:
        InputError: as :func:`github_chunks`.
    """
    return json.dumps(github_chunks(profiles, max_jobs), separators=(",", ":"))


def gitlab_pipeline(profiles: Sequence[Profile], include: str | None = ".gitlab-ci.yml",
                    max_jobs: int = GITLAB_MAX_JOBS) -> str:
    """A GitLab child pipeline that builds each profile once per platform (:attr:`Profile.platforms`), each build in
    its own job, then assembles each profile's image index, then promotes each profile.

    The jobs extend ``.imagectl-build`` (variables ``PROFILE``, ``PLATFORM``), ``.imagectl-index`` (``PROFILE``,
    ``PLATFORMS``: comma-separated) and ``.imagectl-promote`` (``PROFILE``); ``include`` names the repository file
    that defines them (and the ``build``, ``index`` and ``promote`` stages); with no ``include`` the pipeline
    declares the stages itself and the templates must be prepended to it.  GitLab runs at most 200
    ``parallel:matrix`` jobs per job (``max_jobs``), so a longer list is split over ``imagectl-build``,
    ``imagectl-build-2``, ...; the index stage starts when every build succeeded, the promote stage when every
    index is written.

    Raises:
        InputError: ``max_jobs`` below 1.
    """
    names = [p.name for p in profiles]
    lines = [f"# Generated by `imagectl matrix --format gitlab`: {len(names)} profile(s), "
             f"{sum(len(p.platforms) for p in profiles)} platform build(s).",
             *(yaml_comment(f"unverified: {p.name}: {p.variant.unverified}") for p in profiles if p.variant.unverified),
             ""]
    if not names:
        return "\n".join(lines + _gitlab_empty()) + "\n"
    if include:
        lines += ["include:", f"  - local: {yaml_string(include)}", ""]
    else:
        lines += ["stages:", *(f"  - {stage}" for stage, _, _ in GITLAB_JOBS), ""]
    builds = [(p.name, platform) for p in profiles for platform in p.platforms]
    indexes = [(p.name, ",".join(p.platforms)) for p in profiles]
    promotes = [(p.name, "") for p in profiles]
    for (stage, job, template), pairs, key in zip(GITLAB_JOBS, (builds, indexes, promotes),
                                                 (GITLAB_PLATFORM, GITLAB_PLATFORMS, ""), strict=True):
        for number, chunk in enumerate(chunked(pairs, max_jobs), start=1):
            name = job if number == 1 else f"{job}-{number}"
            lines += [f"{name}:", f"  stage: {stage}", f"  extends: {template}", "  parallel:", "    matrix:",
                      *_gitlab_entries(chunk, key), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def _gitlab_entries(pairs: list[tuple[str, str]], key: str) -> list[str]:
    """``parallel:matrix`` entries: one per value of ``key`` (a platform, or the platforms), each with its profiles
    (one job per profile); without ``key`` one entry of every profile."""
    by_value: dict[str, list[str]] = {}
    for name, value in pairs:
        by_value.setdefault(value, []).append(name)
    lines = []
    for value, names in by_value.items():
        head = f"      - {key}: {yaml_string(value)}" if key else f"      - {GITLAB_VARIABLE}:"
        lines += [head, *([f"        {GITLAB_VARIABLE}:"] if key else []),
                  *(f"          - {yaml_string(n)}" for n in names)]
    return lines


def _gitlab_empty() -> list[str]:
    return ["stages:", "  - build", "", "imagectl-nothing-to-build:", "  stage: build",
            "  script:", f"    - {yaml_string('echo imagectl: no profile changed, nothing to build')}"]


MARKDOWN_COLUMNS = ("Framework", "Version", "CUDA", "cuDNN", "NCCL", "Python", "Min driver", "OS", "Profile",
                    "Verified")


def markdown_table(profiles: Sequence[Profile]) -> str:
    """A Markdown compatibility table: one row per framework release x CUDA build (OSes and flavours
    folded into the row; the default Python of the first OS in bold)."""
    rows: dict[tuple[str, str, str], list[Profile]] = {}
    for profile in profiles:
        rows.setdefault((profile.framework.name, profile.release.version, profile.variant.cuda), []).append(profile)
    lines = ["| " + " | ".join(MARKDOWN_COLUMNS) + " |", "|" + "---|" * len(MARKDOWN_COLUMNS)]
    for group in rows.values():
        lines.append("| " + " | ".join(_markdown_cells(group)) + " |")
    if not rows:
        lines.append("| " + " | ".join(["-"] * len(MARKDOWN_COLUMNS)) + " |")
    return "\n".join(lines) + "\n"


def _markdown_cells(group: list[Profile]) -> list[str]:
    first = group[0]
    pythons = " ".join(f"**{p}**" if p == first.python else p for p in sorted(first.release.python, key=Version))
    oses = ", ".join(dict.fromkeys(p.os.name for p in group))
    verified = "yes" if first.verified else f"no: {_markdown_text(first.variant.unverified or '')}"
    return [first.framework.label, first.release.version, first.variant.cuda, first.variant.cudnn or "-",
            first.variant.nccl or "-", pythons, first.toolkit.min_driver, oses, f"`{first.name}`", verified]


def _markdown_text(text: str) -> str:
    """``text`` safe in one table cell: no pipe, no line break."""
    return " ".join(text.split()).replace("|", "\\|")


def render(profiles: Sequence[Profile], fmt: OutputFormat, gitlab_include: str | None = ".gitlab-ci.yml",
           max_jobs: int | None = None) -> str:
    """The profile list in format ``fmt`` (one of FORMATS), ending in a newline; ``max_jobs`` (github, gitlab and
    tekton only) defaults to the CI system's own limit, :data:`MAX_JOBS`.

    Raises:
        InputError: an unknown format; ``max_jobs`` below 1 or given for a format that has no jobs; more
            profiles than a GitHub matrix of matrices holds; a profile name, platform or unverified reason that a
            Tekton or Argo document would not keep as written (tekton, argo).
    """
    if max_jobs is not None and fmt not in MAX_JOBS:
        raise InputError(f"--max-jobs applies to --format {', '.join(MAX_JOBS)}, not {fmt}")
    if fmt == "json":
        return json_rows(profiles) + "\n"
    if fmt == "github":
        return github_matrix(profiles, GITHUB_MAX_JOBS if max_jobs is None else max_jobs) + "\n"
    if fmt == "gitlab":
        return gitlab_pipeline(profiles, gitlab_include, GITLAB_MAX_JOBS if max_jobs is None else max_jobs)
    if fmt == "tekton":
        return tekton_pipeline(profiles, TEKTON_MAX_COMBINATIONS if max_jobs is None else max_jobs)
    if fmt == "argo":
        return argo_workflow(profiles)
    if fmt == "markdown":
        return markdown_table(profiles)
    raise InputError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
