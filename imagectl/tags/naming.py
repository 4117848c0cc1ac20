"""The naming scheme: where a profile's images live and what their tags are called.

Each profile has its own repository, ``[REGISTRY/]NAMESPACE/PROFILE``.  In it:

- immutable tags ``VERSION-CUDATAG-pyX.Y-YYYYMMDDTHHMMSS-KEY`` (full framework version, CUDA tag, Python,
  build time in UTC and the first 10 hex digits of the build key): one per build, never moved;
- the moving tag ``latest``: the image ``imagectl show`` reports, moved by build and rollback;
- channels (``stable``, ``canary``, ...): moving tags moved only by ``promote``.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from collections.abc import Iterable

from ..config import Config
from ..errors import ValidationError
from ..matrix.model import Profile
from ..reference import Reference, parse_reference

MOVING_TAG = "latest"
_IMMUTABLE_RE = re.compile(
    r"^(?P<version>[0-9][0-9A-Za-z.+_]*)"
    r"-(?P<cuda>[a-z]+[0-9]+)"
    r"-py(?P<python>3\.[0-9]+)"
    r"-(?P<stamp>[0-9]{8}T[0-9]{6})"
    r"-(?P<key>[0-9a-f]{10})$"
)
_CHANNEL_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def repository(profile_name: str, config: Config) -> Reference:
    """The repository of a profile's images (no tag); raises ValidationError for an unusable name."""
    prefix = f"{config.registry_url}/" if config.registry_url else ""
    ref = parse_reference(f"{prefix}{config.namespace}/{profile_name}")
    if not config.registry_url and ref.domain != "docker.io":
        raise ValidationError(f"namespace {config.namespace!r} looks like a registry host; set [registry] url instead")
    return ref


def moving_reference(profile_name: str, config: Config) -> Reference:
    """The moving tag of a profile: what ``show`` reports as ``image``."""
    return repository(profile_name, config).with_tag(MOVING_TAG)


def immutable_tag(profile: Profile, build_key: str, when: datetime | None = None) -> str:
    """The immutable tag for a build of ``profile`` with ``build_key`` at ``when`` (UTC now)."""
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    cuda_tag = profile.framework.tag_of(profile.variant.cuda)
    tag = f"{profile.release.version}-{cuda_tag}-py{profile.python}-{stamp}-{build_key[:10]}"
    return tag.replace("+", "_")


def is_immutable(tag: str) -> bool:
    """Whether ``tag`` follows the immutable scheme (so it may be pruned, never moved)."""
    return bool(_IMMUTABLE_RE.match(tag))


def tag_time(tag: str) -> datetime | None:
    """The build time written into an immutable tag, or None for other tags."""
    match = _IMMUTABLE_RE.match(tag)
    return datetime.strptime(match["stamp"], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc) if match else None


def immutable_parts(tag: str) -> dict[str, str] | None:
    """The parts of an immutable tag (``version``, ``cuda``, ``python``, ``stamp``, ``key``), or None."""
    match = _IMMUTABLE_RE.match(tag)
    return match.groupdict() if match else None


def tags_with_key(tags: Iterable[str], key: str) -> list[str]:
    """The immutable tags among ``tags`` whose key part is the first 10 hex digits of ``key``, newest first
    (the one rule for "an image with this build key, or this imported source, exists")."""
    found = [t for t in tags if (parts := immutable_parts(t)) is not None and parts["key"] == key[:10]]
    return sorted(found, key=lambda t: (tag_time(t), t), reverse=True)


def short_digest(digest: str | None) -> str:
    """``sha256:`` and the first 12 hex digits ("-" for None)."""
    return digest[:19] if digest else "-"


def is_pointer(tag: str) -> bool:
    """Whether ``tag`` is a moving tag or channel (anything not immutable): prune never deletes its image."""
    return not is_immutable(tag)


def check_channel(name: str) -> str:
    """A channel name (``stable``, ``canary``): lower-case, not ``latest``, not an immutable tag."""
    if not _CHANNEL_RE.match(name or "") or name == MOVING_TAG or is_immutable(name):
        raise ValidationError(f"channel {name!r}: use a lower-case name like stable or canary (not {MOVING_TAG!r})")
    return name
