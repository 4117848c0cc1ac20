"""``imagectl bases sync``: copy each base, by digest and with every platform of an index and its referrers, from
upstream (through ``[mirrors]``) into the team registry, registry to registry with imagectl's own client (nothing is
pulled through an engine).

Blob by blob: a blob the team copy has is skipped; one the team registry holds in the repository of a profile built
on the base (a pushed image carries its base's layers) is mounted from there; within one registry every blob is
mounted from the upstream repository; the rest is streamed from a GET into an upload.

Upstream is not trusted to be sane: indexes nested deeper than engines follow are refused in one line
(:mod:`~imagectl.registry.index_walk`), a blob whose bytes miss its digest is refused naming the upstream registry it
came from, and of the referrers only those whose own ``subject`` is the image (or an index's child) are copied, at
most ``[registry] max_referrers`` of them (default 1000) over the image and its children; each left out is a note.

Order, so a failure never leaves a tag naming something incomplete: blobs, then each child manifest by digest, then
the index by digest (:func:`~imagectl.registry.copy.copy_image`), then the referrers, then the digest tag
(``<tag>--<12 hex>``), and last the tag itself.  Every write is safe against another sync at the same moment: blobs
and manifests are put by digest (the same bytes, whoever writes them), referrers go under their own tags and into
the referrers index by read, add, write, read back (:func:`~imagectl.registry.referrers.copy_referrers`), and both
syncs write the same digest under the tag.  The registry itself may briefly not see a blob or manifest the other
sync is linking again at that moment: the client puts the manifest again then
(:meth:`~imagectl.registry.client.RegistryClient.put_manifest`).  When upstream moves between
two syncs the tag ends on one of the two digests and both stay reachable under their digest tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from ..config import Config
from ..errors import AuthError, ImagectlError, InputError, NotFoundError
from ..reference import Reference
from ..registry.copy import Endpoint, copy_image
from ..registry.manifest import Manifest, is_platform_entry, platform_name
from ..registry.index_walk import walk_index
from ..registry.referrers import CopiedReferrers, copy_referrers
from .clients import HostClients
from .naming import MatrixBase, digest_tag, team_copy, upstream

NO_REGISTRY = "bases sync: no team registry configured ([registry] url or IMAGECTL_REGISTRY_URL)"
SyncAction = Literal["copied", "unchanged", "gone", "failed"]
MOUNT_CANDIDATES = 3  # profile repositories asked per blob before streaming it across


@dataclass(frozen=True)
class SyncResult:
    """What ``bases sync`` did for one base: ``copied`` (the team tag now pins ``digest``; ``previous`` is what it
    pinned before, if anything), ``unchanged`` (it already did), ``gone`` (upstream has no such tag; the team copy
    keeps ``digest``) or ``failed`` (``error``).  ``blobs_copied`` counts blobs uploaded or mounted, ``mounted``
    those of them mounted from a team repository; ``notes`` says which referrers were left out, and why."""

    base: str
    team_copy: str
    action: SyncAction
    digest: str = ""
    previous: str = ""
    platforms: tuple[str, ...] = ()
    blobs_copied: int = 0
    mounted: int = 0
    referrers: int = 0
    error: str = ""
    notes: tuple[str, ...] = ()  # referrers left out: about another image, or past [registry] max_referrers

    def as_dict(self) -> dict[str, object]:
        """The JSON shape."""
        return {**asdict(self), "platforms": list(self.platforms), "notes": list(self.notes)}


def platforms_of(manifest: Manifest) -> tuple[str, ...]:
    """``os/arch[/variant]`` of each platform child of an index (attachments such as BuildKit's ``unknown/unknown``
    attestation manifests left out); empty for a single image (pure).  Raises RegistryError if malformed."""
    return tuple(name for child in manifest.children() if is_platform_entry(child)
                 and (name := platform_name(child.platform)))


def mount_candidates(base: MatrixBase, namespace: str) -> list[str]:
    """The team repositories that may hold ``base``'s layers: those of the first profiles built on it
    (``NAMESPACE/PROFILE``, beside the team copy) (pure)."""
    return [f"{namespace}/{name}" for name in base.profiles[:MOUNT_CANDIDATES]]


def sync_base(base: MatrixBase, config: Config, clients: HostClients) -> SyncResult:
    """Copy ``base`` into the team registry (see the module docstring).  Raises InputError without ``[registry]
    url``; any failure on the way is a ``failed`` result."""
    team = team_copy(base.public, config)
    if team is None:
        raise InputError(NO_REGISTRY)
    try:
        return _sync(base, team, config, clients)
    except ImagectlError as exc:
        return SyncResult(base.public.familiar, str(team), "failed", error=str(exc))


def _sync(base: MatrixBase, team: Reference, config: Config, clients: HostClients) -> SyncResult:
    name, where = base.public.familiar, str(team)
    source_ref = upstream(base.public, config)
    before = clients.ask(team.domain, lambda c: c.head_manifest(team.path, base.tag))
    try:
        manifest = clients.ask(source_ref.domain, lambda c: c.get_manifest(source_ref.path, base.tag))
    except NotFoundError:
        if before is None:
            return SyncResult(name, where, "failed", error=f"{source_ref} is gone upstream and the team registry "
                                                           "holds no copy")
        return SyncResult(name, where, "gone", before)
    src = Endpoint(clients.ask(source_ref.domain, lambda c: c), source_ref.path)
    dst = Endpoint(clients.ask(team.domain, lambda c: c), team.path)
    mounted = mount_from_team(src, dst, manifest, mount_candidates(base, config.namespace))
    copied, referrers = _copy(src, dst, manifest, base.tag, write_tag=before != manifest.digest,
                              max_referrers=config.max_referrers)
    action: SyncAction = "unchanged" if before == manifest.digest else "copied"
    previous = before if before and before != manifest.digest else ""
    notes = tuple(line for r in referrers for line in r.notes())
    return SyncResult(name, where, action, manifest.digest, previous, platforms_of(manifest),
                      copied + len(mounted), len(mounted), sum(len(r.copied) for r in referrers), notes=notes)


def _copy(src: Endpoint, dst: Endpoint, manifest: Manifest, tag: str, *,  # noqa: PLR0913 - keyword-only switches
          write_tag: bool, max_referrers: int) -> tuple[int, list[CopiedReferrers]]:
    """The writes of a sync, each idempotent, in the module docstring's order; the blobs copied (uploaded or
    mounted) and what became of the referrers (of the image and of an index's children: ``max_referrers`` read in
    all)."""
    report = copy_image(src, manifest.digest, dst)
    referrers: list[CopiedReferrers] = []
    budget = max_referrers
    for subject in (manifest.digest, *(child.digest for child in manifest.children())):
        done = copy_referrers(src, subject, dst, limit=budget)
        budget -= len(done.copied) + len(done.foreign)
        referrers.append(done)
    keep = digest_tag(tag, manifest.digest)
    if keep:
        dst.client.put_manifest(dst.repository, keep, manifest)
    if write_tag:
        dst.client.put_manifest(dst.repository, tag, manifest)
    return len(report.uploaded) + len(report.mounted), referrers


def mount_from_team(source: Endpoint, target: Endpoint, manifest: Manifest, candidates: Sequence[str]) -> list[str]:
    """Mount into ``target`` each blob of ``manifest`` (and of an index's children) it lacks from the first of the
    team registry's repositories ``candidates`` that holds it; returns the digests mounted.  Nothing is tried within
    one registry (the copy mounts from the source itself there).  Raises AuthError if refused, RegistryError
    otherwise."""
    if not candidates or source.client.host == target.client.host:
        return []
    where = f"registry {source.client.host}: {source.repository}@{manifest.digest}"
    manifests = list(walk_index(manifest, lambda c: source.client.get_manifest(source.repository, c.digest), where))
    mounted: list[str] = []
    for blob in {b.digest: b for m in manifests for b in m.blobs()}.values():
        if target.client.blob_exists(target.repository, blob.digest):
            continue
        if any(_mount(target, blob.digest, repo) for repo in candidates):
            mounted.append(blob.digest)
    return mounted


def _mount(target: Endpoint, digest: str, repository: str) -> bool:
    try:
        return target.client.mount_blob(target.repository, digest, repository)
    except (AuthError, NotFoundError):  # a profile repository not there, or not ours to read
        return False


def sync_bases(bases: list[MatrixBase], config: Config) -> list[SyncResult]:
    """:func:`sync_base` of each base, in order, one client per registry host.  Raises InputError without
    ``[registry] url``."""
    with HostClients(config) as clients:
        return [sync_base(base, config, clients) for base in bases]
