"""Copying an image (its manifest, an index's child manifests, and every blob) between repositories.

Within one registry a blob the target lacks is mounted from the source repository (no bytes move); across
registries, or when the registry declines the mount, it is streamed from a GET straight into an upload.
Blobs and child manifests the target already has are skipped, so copying again is cheap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .client import RegistryClient
from .index_walk import walk_index
from .manifest import Descriptor, Manifest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """One side of a copy: a registry client and a repository in it."""

    client: RegistryClient
    repository: str


@dataclass
class CopyReport:
    """What a copy did: the digest it put, and which blob digests it mounted, uploaded or skipped."""

    digest: str = ""
    mounted: list[str] = field(default_factory=list)
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def copy_image(source: Endpoint, reference: str, target: Endpoint, target_reference: str | None = None) -> CopyReport:
    """Copy the image at ``reference`` in ``source`` to ``target`` under ``target_reference`` (a tag).

    Without ``target_reference`` the manifest is put by its digest.  The manifest bytes are copied
    unchanged, so the digest stays the same.  Raises NotFoundError if the source image or one of its blobs
    is missing, AuthError if either registry refuses, IndexDepthError for indexes nested too deep,
    DigestMismatchError (naming the source) for a blob whose bytes are not its digest, RegistryError otherwise;
    the target tag is written last, so a failed copy never moves it.
    """
    return copy_manifest(source, source.client.get_manifest(source.repository, reference), target, target_reference)


def copy_manifest(source: Endpoint, manifest: Manifest, target: Endpoint,
                  target_reference: str | None = None) -> CopyReport:
    """:func:`copy_image` of ``manifest``, already read from ``source``; raises what it raises."""
    report = CopyReport()
    _copy_contents(source, target, manifest, report)
    report.digest = target.client.put_manifest(target.repository, target_reference or manifest.digest, manifest)
    return report


def _copy_contents(source: Endpoint, target: Endpoint, root: Manifest, report: CopyReport) -> None:
    """Copy what ``root`` refers to: its blobs, and an index's child manifests (and theirs), each child put after
    what it refers to; a child the target has already is not gone into (:func:`.index_walk.walk_index`)."""

    def fetch(child: Descriptor) -> Manifest | None:
        if target.client.head_manifest(target.repository, child.digest) is not None:
            report.skipped.append(child.digest)
            return None
        return source.client.get_manifest(source.repository, child.digest)

    where = f"registry {source.client.host}: {source.repository}@{root.digest}"
    for manifest in walk_index(root, fetch, where):
        for blob in manifest.blobs():
            copy_blob(source, target, blob, report)
        if manifest is not root:
            target.client.put_manifest(target.repository, manifest.digest, manifest)


def copy_blob(source: Endpoint, target: Endpoint, blob: Descriptor, report: CopyReport | None = None) -> None:
    """Make ``target`` hold ``blob``: skip if present, mount within one registry, else stream it across.

    Raises NotFoundError if the source lacks it, AuthError if refused, RegistryError otherwise.
    """
    report = report if report is not None else CopyReport()
    if target.client.blob_exists(target.repository, blob.digest):
        report.skipped.append(blob.digest)
        return
    if _same_registry(source, target) and target.client.mount_blob(target.repository, blob.digest, source.repository):
        report.mounted.append(blob.digest)
        return
    log.debug("streaming blob %s (%d bytes) to %s", blob.digest, blob.size, target.client.host)
    with source.client.open_blob(source.repository, blob.digest) as reader:
        target.client.upload_blob(target.repository, reader, blob.digest)
    report.uploaded.append(blob.digest)


def _same_registry(source: Endpoint, target: Endpoint) -> bool:
    return source.client.host == target.client.host
