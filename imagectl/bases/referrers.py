"""The artifacts that refer to an image (signatures, SBOMs, attestations), copied with it.

They are found through the OCI 1.1 referrers tag schema: an index tagged ``<alg>-<hex>`` of the subject's digest
lists them (what a registry without the referrers API, such as distribution 2.8, holds).  The referrers API itself
is not asked here: the registry client has no call for it (the attestations work adds one in
``imagectl/registry/referrers.py``; this module is the stand-in until then).  The target's own index under the same
tag is merged with the source's, never replaced, and read back after the write (see :func:`merge_index`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..errors import NotFoundError, RegistryError
from ..registry.copy import Endpoint, copy_image
from ..registry.manifest import OCI_INDEX, Manifest

MAX_DEPTH = 3  # referrers of referrers (a signature of an attestation), and no deeper
WRITE_TRIES = 3


def fallback_tag(digest: str) -> str:
    """The referrers tag of ``digest``: ``sha256:abc...`` -> ``sha256-abc...`` (pure)."""
    algorithm, _, hex_part = digest.partition(":")
    return f"{algorithm}-{hex_part}"


def referrers_index(endpoint: Endpoint, digest: str) -> Manifest | None:
    """The index of ``digest``'s referrers in ``endpoint`` (its fallback tag), or None when it has none.  Raises
    AuthError if refused, RegistryError otherwise."""
    return _index_at(endpoint, fallback_tag(digest))


def _index_at(endpoint: Endpoint, tag: str) -> Manifest | None:
    try:
        found = endpoint.client.get_manifest(endpoint.repository, tag)
    except NotFoundError:
        return None
    return found if found.is_index else None


def copy_referrers(source: Endpoint, target: Endpoint, subjects: Iterable[str], depth: int = 0) -> list[str]:
    """Copy the referrers of each digest of ``subjects`` (each by its digest, with its blobs) and merge their
    fallback indexes into ``target``'s; returns the digests of the referrers copied.  Raises AuthError if refused,
    NotFoundError when a listed referrer is missing in ``source``, RegistryError otherwise."""
    copied: list[str] = []
    for subject in subjects:
        index = referrers_index(source, subject)
        if index is None:
            continue
        children = [child.digest for child in index.children()]
        for child in children:
            copy_image(source, child, target)
        merge_index(target, fallback_tag(subject), index)
        copied += children
        if depth + 1 < MAX_DEPTH:
            copied += copy_referrers(source, target, children, depth + 1)
    return copied


def merged(mine: Manifest, theirs: Manifest | None) -> Manifest:
    """An index listing every entry of ``theirs`` and, after them, those of ``mine`` it lacks (pure)."""
    if theirs is None:
        return mine
    have = theirs.json().get("manifests") or []
    known = {entry.get("digest") for entry in have if isinstance(entry, dict)}
    extra = [entry for entry in mine.json().get("manifests") or [] if entry.get("digest") not in known]
    if not extra:
        return theirs
    body = {**theirs.json(), "manifests": [*have, *extra]}
    body.setdefault("mediaType", OCI_INDEX)
    return Manifest.from_bytes(json.dumps(body, indent=2).encode(), theirs.media_type)


def merge_index(target: Endpoint, tag: str, mine: Manifest) -> None:
    """Make ``target``'s index under ``tag`` list every entry of ``mine`` besides its own: read, merge, write, read
    back; another writer's entries that arrive in between are merged on the next try.  Raises RegistryError when
    the entries are still missing after :data:`WRITE_TRIES` tries."""
    wanted = {child.digest for child in mine.children()}
    for _ in range(WRITE_TRIES):
        theirs = _index_at(target, tag)
        index = merged(mine, theirs)
        if theirs is None or index.digest != theirs.digest:
            target.client.put_manifest(target.repository, tag, index)
        now = _index_at(target, tag)
        if now is not None and wanted <= {child.digest for child in now.children()}:
            return
    raise RegistryError(f"registry {target.client.host}: the referrers index {target.repository}:{tag} keeps losing "
                        "entries to another writer")
