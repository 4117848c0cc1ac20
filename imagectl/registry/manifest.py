"""Manifests, descriptors and image configs as the OCI distribution API hands them out.

A :class:`Manifest` keeps the registry's raw bytes and media type untouched, so putting it back (under
another tag, or into another repository) yields the very same digest.  Its JSON is parsed only when a
caller asks which blobs or child manifests it refers to.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from ..errors import RegistryError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"  # [registry] compression = "zstd"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
# layer media type -> how its tar is compressed ("" none); a layer of any other type is not a tar imagectl reads
LAYER_COMPRESSION = {OCI_LAYER: "", OCI_LAYER_GZIP: "gzip", OCI_LAYER_ZSTD: "zstd", DOCKER_LAYER: "gzip",
                     "application/vnd.docker.image.rootfs.diff.tar": ""}

MANIFEST_TYPES = (OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST)
INDEX_TYPES = (OCI_INDEX, DOCKER_MANIFEST_LIST)
MANIFEST_ACCEPT = ", ".join(MANIFEST_TYPES)

_FOREIGN_LAYERS = (
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
    "application/vnd.oci.image.layer.nondistributable.v1.tar",
)


_ALGORITHMS = {"sha256": hashlib.sha256, "sha512": hashlib.sha512}


class DigestMismatchError(RegistryError):
    """A registry (or something between it and us) answered bytes whose digest is not the one it claimed or was
    asked for (exit 1)."""


def sha256_digest(data: bytes) -> str:
    """The ``sha256:<hex>`` digest of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verified_digest(raw: bytes, answered: str | None, registry: str, what: str) -> str:
    """The digest of manifest bytes ``raw``: ``answered`` (the ``Docker-Content-Digest`` header) when the bytes
    have it (sha256 or sha512), their sha256 digest when nothing was answered.

    Raises DigestMismatchError, naming both digests, when the header names another digest than the bytes have.
    """
    computed = sha256_digest(raw)
    if not answered:
        return computed
    algorithm = answered.partition(":")[0]
    hasher = _ALGORITHMS.get(algorithm)
    own = f"{algorithm}:{hasher(raw).hexdigest()}" if hasher else computed
    if own != answered:
        raise DigestMismatchError(
            f"registry {registry}: {what}: the answer says Docker-Content-Digest {answered[:140]}, but its bytes have "
            f"digest {own}; refusing what the registry (or a proxy in between) misreports"
        )
    return answered


@dataclass(frozen=True)
class Descriptor:
    """A pointer to a blob or manifest: its media type, digest and size (and platform, for index entries)."""

    media_type: str
    digest: str
    size: int
    platform: Mapping[str, str] | None = None
    urls: tuple[str, ...] = ()

    @property
    def is_foreign(self) -> bool:
        """True for a layer that lives outside registries (Windows base layers); it is never copied."""
        return self.media_type in _FOREIGN_LAYERS or bool(self.urls)


@dataclass(frozen=True)
class Manifest:
    """A manifest exactly as the registry stored it: media type, digest and raw bytes."""

    media_type: str
    digest: str
    raw: bytes = field(repr=False)

    @classmethod
    def from_bytes(cls, raw: bytes, media_type: str | None = None) -> "Manifest":
        """A manifest of ``raw`` with its computed digest; the media type defaults to the JSON's ``mediaType``.

        Raises RegistryError if no media type is given and the bytes carry none.
        """
        kind = media_type or str(parse_manifest_json(raw).get("mediaType") or "")
        if not kind:
            raise RegistryError("manifest has no mediaType and none was given")
        return cls(kind, sha256_digest(raw), raw)

    @property
    def is_index(self) -> bool:
        """True for an OCI image index or a Docker manifest list."""
        return self.media_type in INDEX_TYPES

    def artifact_kind(self) -> str | None:
        """None for an image (an image manifest whose config is an image config, or an index); for anything else
        (an artifact such as imagectl's move records, a signature, a chart) what it is: its ``artifactType``, else
        its config's media type.  Raises RegistryError if the bytes are not a manifest."""
        data = self.json()
        artifact = data.get("artifactType")
        if isinstance(artifact, str) and artifact:
            return artifact
        if self.is_index:
            return None
        config = self.config()
        kind = config.media_type if config else ""
        return None if kind in (OCI_CONFIG, DOCKER_CONFIG) else (kind or "a manifest without a config type")

    def json(self) -> dict[str, Any]:
        """The parsed manifest; raises RegistryError if the bytes are not a JSON object."""
        return parse_manifest_json(self.raw)

    def config(self) -> Descriptor | None:
        """The config descriptor of an image manifest (None for an index); raises RegistryError if malformed."""
        if self.is_index:
            return None
        return _descriptor(self.json().get("config"), self.digest)

    def layers(self) -> list[Descriptor]:
        """The layer descriptors of an image manifest (empty for an index); raises RegistryError if malformed."""
        if self.is_index:
            return []
        return [_descriptor(item, self.digest) for item in self.json().get("layers") or []]

    def blobs(self) -> list[Descriptor]:
        """Config and layers a registry must hold for this manifest, foreign layers left out."""
        config = self.config()
        found = ([config] if config else []) + self.layers()
        return [blob for blob in found if not blob.is_foreign]

    def children(self) -> list[Descriptor]:
        """The manifests an index points to (empty for an image manifest); raises RegistryError if malformed."""
        if not self.is_index:
            return []
        return [_descriptor(item, self.digest) for item in self.json().get("manifests") or []]


@dataclass(frozen=True)
class ImageConfig:
    """The facts imagectl reads from an image's config blob."""

    digest: str
    labels: Mapping[str, str]
    created: datetime | None
    architecture: str = ""
    os: str = ""


def parse_manifest_json(raw: bytes) -> dict[str, Any]:
    """Parse manifest bytes into a dict; raises RegistryError if they are not a JSON object."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(f"manifest is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RegistryError("manifest is not a JSON object")
    return data


def parse_image_config(raw: bytes, digest: str) -> ImageConfig:
    """Read labels, creation time and platform from config blob bytes; raises RegistryError if malformed."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(f"image config {digest} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RegistryError(f"image config {digest} is not a JSON object")
    labels = (data.get("config") or {}).get("Labels") or {}
    return ImageConfig(
        digest=digest,
        labels={str(k): str(v) for k, v in labels.items()},
        created=parse_timestamp(data.get("created")),
        architecture=str(data.get("architecture") or ""),
        os=str(data.get("os") or ""),
    )


def parse_timestamp(text: object) -> datetime | None:
    """An RFC 3339 timestamp (``2024-05-01T12:00:00.123456789Z``) as an aware datetime; None if absent or bad."""
    if not isinstance(text, str) or "T" not in text:
        return None
    value = text.strip().replace("z", "Z").replace("Z", "+00:00")
    date, _, rest = value.partition("T")
    clock, zone = rest, ""
    for sign in "+-":
        if sign in rest:
            clock, _, offset = rest.rpartition(sign)
            zone = sign + offset
            break
    whole, _, fraction = clock.partition(".")
    clock = f"{whole}.{fraction[:6].ljust(6, '0')}" if fraction else whole
    try:
        parsed = datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def pick_platform(children: list[Descriptor], os: str = "linux", architecture: str = "amd64") -> Descriptor:
    """The index entry for ``os/architecture``, else the first entry; raises RegistryError for an empty index."""
    if not children:
        raise RegistryError("image index lists no manifests")
    for child in children:
        platform = child.platform or {}
        if platform.get("os") == os and platform.get("architecture") == architecture:
            return child
    return children[0]


def platform_name(platform: Mapping[str, str] | None) -> str:
    """``os/architecture[/variant]`` of an index entry's platform (``linux/arm64``, ``linux/arm/v7``); "" when it
    names none (pure)."""
    platform = platform or {}
    parts = [platform.get("os", ""), platform.get("architecture", ""), platform.get("variant", "")]
    return "/".join(p for p in parts if p) if parts[0] and parts[1] else ""


def is_platform_entry(child: Descriptor) -> bool:
    """Whether an index entry is an image for a platform, not an attachment such as the attestation manifests
    BuildKit lists under the platform ``unknown/unknown`` (pure)."""
    platform = child.platform or {}
    return platform.get("os") != "unknown" and platform.get("architecture") != "unknown"


def _descriptor(item: object, owner: str) -> Descriptor:
    if not isinstance(item, dict) or not isinstance(item.get("digest"), str):
        raise RegistryError(f"manifest {owner} has a malformed descriptor: {str(item)[:120]}")
    platform = item.get("platform")
    return Descriptor(
        media_type=str(item.get("mediaType") or ""),
        digest=item["digest"],
        size=int(item.get("size") or 0),
        platform={str(k): str(v) for k, v in platform.items()} if isinstance(platform, dict) else None,
        urls=tuple(item.get("urls") or ()),
    )
