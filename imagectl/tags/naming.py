"""The naming scheme: where a profile's images live and what their tags are called.

Each profile has its own repository, ``[REGISTRY/]NAMESPACE/PROFILE``.  In it:

- immutable tags ``VERSION-CUDATAG-pyX.Y-YYYYMMDDTHHMMSS-KEY-IMAGE`` (full framework version, CUDA tag,
  Python, build time in UTC, the first 10 hex digits of the build key and the first 12 of the image id, as
  ``docker images`` shows it): one per image, never moved.  The image part makes the name unique per image:
  two ``build --force`` of one profile in the same second (same key, same stamp) still get two names.  Tags
  without it (made before it was added, and by ``import``, whose key part already comes from the source
  image's digest) are read alike;
- the moving tag ``latest``: the image ``imagectl show`` reports, moved by build and rollback;
- channels (``stable``, ``canary``, ...): moving tags moved only by ``promote``.
- reserved tags ``imagectl-*``: imagectl's own records (the move log), never images.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import datetime, timezone

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
    r"-(?P<key>[0-9a-f]{10})"
    r"(?:-(?P<image>[0-9a-f]{12}))?$"  # absent in tags made before it was added, and in imports
)
IMAGE_HEX = 12  # hex digits of the image id in an immutable tag (what ``docker images`` prints)
_CHANNEL_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
RESERVED_PREFIX = "imagectl-"  # every tag imagectl writes for itself starts so (see is_reserved)
_REFERRERS_RE = re.compile(r"^sha256-[0-9a-f]{64}(?:\.[0-9a-f]{16})?$")  # registry/referrers.py's tag schema


# The registry part of local-only names (no [registry] url): one that cannot be a public registry, as podman
# names local images, so nothing ever tries to pull them from Docker Hub.
LOCAL_DOMAIN = "localhost"


def repository(profile_name: str, config: Config) -> Reference:
    """The repository of a profile's images (no tag): ``REGISTRY/NAMESPACE/PROFILE``, or
    ``localhost/NAMESPACE/PROFILE`` without a registry; raises ValidationError for an unusable name."""
    if config.registry_url:
        return parse_reference(f"{config.registry_url}/{config.namespace}/{profile_name}")
    if parse_reference(f"{config.namespace}/{profile_name}").domain != "docker.io":
        raise ValidationError(f"namespace {config.namespace!r} looks like a registry host; set [registry] url instead")
    return parse_reference(f"{LOCAL_DOMAIN}/{config.namespace}/{profile_name}")


def moving_reference(profile_name: str, config: Config) -> Reference:
    """The moving tag of a profile: what ``show`` reports as ``image``."""
    return repository(profile_name, config).with_tag(MOVING_TAG)


def immutable_tag(profile: Profile, build_key: str, when: datetime | None = None, image: str = "") -> str:
    """The immutable tag for a build of ``profile`` with ``build_key`` at ``when`` (UTC now).

    ``image`` (the image id, ``sha256:HEX``; "" for none) ends the tag with its first 12 hex digits (of the
    id's own sha256 when it is not hex), so two images with one build key made in the same second get
    different names.  Raises nothing.
    """
    stamp = (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    cuda_tag = profile.framework.tag_of(profile.variant.cuda)
    tag = f"{profile.release.version}-{cuda_tag}-py{profile.python}-{stamp}-{build_key[:10]}"
    if image:
        tag += f"-{image_part(image)}"
    return tag.replace("+", "_")


def image_part(image: str) -> str:
    """The image part of an immutable tag: the first 12 hex digits of the image id ``image`` (``ALGO:HEX`` or
    ``HEX``), or of its sha256 when the id is not hex (pure)."""
    hex_part = image.rpartition(":")[2][:IMAGE_HEX]
    if re.fullmatch(f"[0-9a-f]{{{IMAGE_HEX}}}", hex_part):
        return hex_part
    return hashlib.sha256(image.encode()).hexdigest()[:IMAGE_HEX]


def is_immutable(tag: str) -> bool:
    """Whether ``tag`` follows the immutable scheme (so it may be pruned, never moved)."""
    return bool(_IMMUTABLE_RE.fullmatch(tag))


def tag_time(tag: str) -> datetime | None:
    """The build time written into an immutable tag, or None for other tags."""
    match = _IMMUTABLE_RE.fullmatch(tag)
    return datetime.strptime(match["stamp"], "%Y%m%dT%H%M%S").replace(tzinfo=timezone.utc) if match else None


def immutable_parts(tag: str) -> dict[str, str] | None:
    """The parts of an immutable tag (``version``, ``cuda``, ``python``, ``stamp``, ``key``, and ``image``
    when the tag has one), or None for other tags."""
    match = _IMMUTABLE_RE.fullmatch(tag)
    return {k: v for k, v in match.groupdict().items() if v is not None} if match else None


def tags_with_key(tags: Iterable[str], key: str) -> list[str]:
    """The immutable tags among ``tags`` whose key part is the first 10 hex digits of ``key``, newest first
    (the one rule for "an image with this build key, or this imported source, exists")."""
    found = [t for t in tags if (parts := immutable_parts(t)) is not None and parts["key"] == key[:10]]
    return sorted(found, key=lambda t: (tag_time(t), t), reverse=True)


def short_digest(digest: str | None) -> str:
    """``sha256:`` and the first 12 hex digits ("-" for None)."""
    return digest[:19] if digest else "-"


def is_reserved(tag: str) -> bool:
    """Whether ``tag`` is one imagectl keeps for its own records (``imagectl-*``: the move log, old and new) or a tag
    of the OCI referrers tag schema (``sha256-HEX``, ``sha256-HEX.HEX16``: attestations, see
    :mod:`imagectl.registry.referrers`).

    A reserved tag is never a channel, never a ``--from``/``--to`` source and never listed among a repository's
    tags (see :mod:`.store`).
    """
    return tag.startswith(RESERVED_PREFIX) or bool(_REFERRERS_RE.fullmatch(tag))


def check_channel(name: str) -> str:
    """A channel name (``stable``, ``canary``): lower-case, not ``latest``, not reserved, not immutable-shaped.

    Raises ValidationError (exit 2) naming what is wrong.
    """
    if is_reserved(name or ""):
        raise ValidationError(f"channel {name!r}: tags starting with {RESERVED_PREFIX!r} are reserved for"
                              " imagectl's move log; use a name like stable or canary")
    if is_immutable(name or ""):
        raise ValidationError(f"channel {name!r}: that is the shape of an immutable tag, which never moves;"
                              " use a name like stable or canary")
    if not _CHANNEL_RE.fullmatch(name or "") or name == MOVING_TAG:
        raise ValidationError(f"channel {name!r}: use a lower-case name like stable or canary (not {MOVING_TAG!r})")
    return name


def check_source(name: str, option: str = "--from") -> str:
    """``name`` as the image a move starts from (``--from``) or goes to (``--to``): anything but a reserved tag.

    Raises ValidationError (exit 2) for a reserved name; whether ``name`` exists is the caller's question.
    """
    if is_reserved(name or ""):
        raise ValidationError(f"{option} {name!r}: tags starting with {RESERVED_PREFIX!r} are imagectl's own"
                              " records, not images; name an immutable tag, a digest, latest or a channel")
    return name
