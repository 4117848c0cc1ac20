"""What the Kubernetes CI outputs (``--format tekton``, ``--format argo``) share: the three kinds of step (build per
profile and platform, index per profile, promote per profile), the shell each runs (``steps/*.sh``, package data),
the parameters a run takes and the environment variables they reach the shell through, and the rule for values
written into the documents.

Values reach a step's shell only as environment variables: a script is imagectl's own text, never one with a value
substituted into it.  Tekton substitutes ``$(...)`` and Argo ``{{...}}`` in every string of a document, so a value
that imagectl writes there (a profile name, a platform) must hold neither (:func:`literal`); the parameters a run
is given (registry, repository) are substituted into environment values only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from ..errors import InputError
from ..matrix.model import Profile
from .rows import github_include, packed

StepKind = Literal["build", "index", "promote"]
STEP_KINDS: tuple[StepKind, ...] = ("build", "index", "promote")

# The inputs of each kind of step: (parameter name, environment variable, what it is).
INPUTS: dict[StepKind, tuple[tuple[str, str, str], ...]] = {
    "build": (("profile", "PROFILE", "the profile to build"),
              ("platform", "PLATFORM", "the platform to build it for (linux/amd64, linux/arm64)")),
    "index": (("profile", "PROFILE", "the profile whose image index to assemble"),
              ("platforms", "PLATFORMS", "its platforms, comma-separated (each pushed by a build)")),
    "promote": (("profile", "PROFILE", "the profile to promote to the stable channel"),),
}
# The parameters of a whole run, each with its default ("" or None: required) and environment variable.
SETTINGS: tuple[tuple[str, str | None, str, str], ...] = (
    ("image", None, "", "the steps' image: imagectl (installed for python3), buildah and git"),
    ("git-url", "", "GIT_URL", "the repository to build from (imagectl.toml, matrices/); empty: imagectl's own matrix"),
    ("git-revision", "HEAD", "GIT_REVISION", "the commit or branch of git-url to check out"),
    ("registry-url", "", "REGISTRY_URL", "[registry] url (empty: imagectl.toml's)"),
    ("registry-namespace", "", "REGISTRY_NAMESPACE", "[registry] namespace (empty: imagectl.toml's)"),
)
BUILDAH_STEPS: tuple[StepKind, ...] = ("build", "index")  # run buildah's engine: privileged, container storage
PUBLISHING_STEPS: tuple[StepKind, ...] = ("build", "index")  # write the pushed image's IMAGE_URL and IMAGE_DIGEST
CONTAINER_STORAGE = "/var/lib/containers"  # buildah's storage: an emptyDir volume in the pod
CHANNEL = "stable"  # what steps/promote.sh promotes to


def step_script(kind: StepKind) -> str:
    """The shell of a ``kind`` step: ``steps/prelude.sh`` then ``steps/<kind>.sh``."""
    folder = resources.files("imagectl.ci").joinpath("steps")
    return folder.joinpath("prelude.sh").read_text(encoding="utf-8") + folder.joinpath(
        f"{kind}.sh").read_text(encoding="utf-8")


def literal(value: str, what: str) -> str:
    """``value`` when Tekton and Argo would keep it as written: no ``$(`` or ``{{`` (their substitutions), no
    control character.

    Raises:
        InputError: ``value`` holds one of them, naming ``what`` it is.
    """
    if "$(" in value or "{{" in value or not value.isprintable():
        raise InputError(f"{what} {value!r}: a Tekton or Argo document would not keep it as written "
                         "(no '$(', '{{' or control characters)")
    return value


@dataclass(frozen=True)
class Chunk:
    """The steps of one chunk of profiles: a build per profile and platform (``profile``, ``platform`` and the
    other keys of a GitHub matrix entry), an index and a promote per profile (``profile``, ``platforms``)."""

    builds: list[dict[str, str | bool]]
    indexes: list[dict[str, str]]


def fan_out(profiles: Sequence[Profile], max_jobs: int | None = None) -> list[Chunk]:
    """``profiles`` as chunks of at most ``max_jobs`` build steps each (a profile's platforms in one chunk; one
    chunk of all when ``max_jobs`` is None), every value checked by :func:`literal`.

    Raises:
        InputError: ``max_jobs`` below 1 or below a profile's platform count; a value that :func:`literal`
            refuses.
    """
    groups = [[_row(p, platform) for platform in p.platforms] for p in profiles]
    size = max_jobs if max_jobs is not None else max(1, sum(map(len, groups)))
    return [Chunk([e for group in chunk for e in group],
                  [{"profile": str(group[0]["profile"]), "platforms": str(group[0]["platforms"])} for group in chunk])
            for chunk in packed(groups, size)]


def _row(profile: Profile, platform: str) -> dict[str, str | bool]:
    """The GitHub matrix entry of ``profile`` on ``platform`` (:func:`github_include`), its ``unverified`` reason on
    one line, each string checked by :func:`literal`."""
    row = github_include(profile, platform)
    row["unverified"] = " ".join(str(row["unverified"]).split())
    for key, value in row.items():
        if isinstance(value, str):
            literal(value, f"{profile.name!r}: {key}" if key != "profile" else "profile name")
    return row
