"""``imagectl bases sync``: copy each base, by digest and with every platform of an index and its referrers, from
upstream (through ``[mirrors]``) into the team registry, registry to registry with imagectl's own client.

Order, so a failure never leaves a tag naming something incomplete: blobs, then each child manifest by digest, then
the index by digest (:func:`~imagectl.registry.copy.copy_image`), then the referrers, then the digest tag
(``<tag>--<12 hex>``), and last the tag itself.  Two syncs at once write the same bytes; when upstream moves between
them, the tag ends on one of the two digests and both stay reachable under their digest tags.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from ..config import Config
from ..errors import ImagectlError, InputError, NotFoundError
from ..reference import Reference
from ..registry.copy import Endpoint, copy_image
from ..registry.manifest import Manifest
from .clients import HostClients
from .naming import MatrixBase, digest_tag, team_copy, upstream
from .referrers import copy_referrers

NO_REGISTRY = "bases sync: no team registry configured ([registry] url or IMAGECTL_REGISTRY_URL)"
SyncAction = Literal["copied", "unchanged", "gone", "failed"]


@dataclass(frozen=True)
class SyncResult:
    """What ``bases sync`` did for one base: ``copied`` (the team tag now pins ``digest``; ``previous`` is what it
    pinned before, if anything), ``unchanged`` (it already did), ``gone`` (upstream has no such tag; the team copy
    keeps ``digest``) or ``failed`` (``error``)."""

    base: str
    team_copy: str
    action: SyncAction
    digest: str = ""
    previous: str = ""
    platforms: tuple[str, ...] = ()
    blobs_copied: int = 0
    referrers: int = 0
    error: str = ""

    def as_dict(self) -> dict[str, object]:
        """The JSON shape."""
        return {**asdict(self), "platforms": list(self.platforms)}


def platforms_of(manifest: Manifest) -> tuple[str, ...]:
    """``os/arch[/variant]`` of each child of an index (entries without a platform, or ``unknown/unknown``
    attestation manifests, left out); empty for a single image (pure).  Raises RegistryError if malformed."""
    out = []
    for child in manifest.children():
        platform = child.platform or {}
        words = [platform.get("os", ""), platform.get("architecture", ""), platform.get("variant", "")]
        if words[0] and words[0] != "unknown":
            out.append("/".join(w for w in words if w))
    return tuple(out)


def sync_base(base: MatrixBase, config: Config, clients: HostClients) -> SyncResult:
    """Copy ``base`` into the team registry (see the module docstring).  Raises InputError without ``[registry]
    url``; any failure on the way is a ``failed`` result."""
    team = team_copy(base.public, config)
    if team is None:
        raise InputError(NO_REGISTRY)
    result = SyncResult(base.public.familiar, str(team), "failed")
    try:
        return _sync(base, team, config, clients, result)
    except ImagectlError as exc:
        return SyncResult(result.base, result.team_copy, "failed", error=str(exc))


def _sync(base: MatrixBase, team: Reference, config: Config, clients: HostClients,  # noqa: PLR0913
          result: SyncResult) -> SyncResult:
    source_ref = upstream(base.public, config)
    before = clients.ask(team.domain, lambda c: c.head_manifest(team.path, base.tag))
    try:
        manifest = clients.ask(source_ref.domain, lambda c: c.get_manifest(source_ref.path, base.tag))
    except NotFoundError:
        if before is None:
            return SyncResult(result.base, result.team_copy, "failed",
                              error=f"{source_ref} is gone upstream and the team registry holds no copy")
        return SyncResult(result.base, result.team_copy, "gone", before)
    source = clients.ask(source_ref.domain, lambda c: c)
    target = clients.ask(team.domain, lambda c: c)
    src, dst = Endpoint(source, source_ref.path), Endpoint(target, team.path)
    report = copy_image(src, manifest.digest, dst)
    referrers = copy_referrers(src, dst, [manifest.digest, *(c.digest for c in manifest.children())])
    keep = digest_tag(base.tag, manifest.digest)
    if keep:
        target.put_manifest(team.path, keep, manifest)
    if before != manifest.digest:
        target.put_manifest(team.path, base.tag, manifest)
    action: SyncAction = "unchanged" if before == manifest.digest else "copied"
    previous = before if before and before != manifest.digest else ""
    return SyncResult(result.base, result.team_copy, action, manifest.digest, previous, platforms_of(manifest),
                      len(report.uploaded) + len(report.mounted), len(referrers))


def sync_bases(bases: list[MatrixBase], config: Config) -> list[SyncResult]:
    """:func:`sync_base` of each base, in order, one client per registry host.  Raises InputError without
    ``[registry] url``."""
    with HostClients(config) as clients:
        return [sync_base(base, config, clients) for base in bases]
