"""OCI 1.1 artifacts that refer to an image (``subject``), and finding them again.

An artifact is an image manifest with ``artifactType``, the empty config (``application/vnd.oci.empty.v1+json``,
``{}``), one layer holding its payload (an in-toto statement, a DSSE envelope) and ``subject``: the descriptor of
the image it is about.  It is found through the referrers API (``GET /v2/<name>/referrers/<digest>``) where the
registry has one; where it has none (distribution 2.8 answers 404) through the tag schema of the OCI
distribution spec: the tag ``sha256-<hex>`` (the subject's digest) holds an OCI index whose entries are the
referrers (with their ``artifactType`` and annotations).

That index is read, changed and written back, and registries have no compare-and-swap on tags, so two writers
adding a referrer at once could each overwrite the other's entry.  Two things keep a referrer from being lost:

- every artifact manifest is put under its own tag, ``sha256-<subject hex>.<16 hex of its own digest>``, which no
  other writer ever writes: the artifact stays in the repository (never garbage) and findable by name;
- the index is updated with read, change, PUT, read back and verify, again (after a short, random wait) while
  the read-back lacks the change (:func:`_update_index`); and :func:`list_referrers` takes the index together
  with the artifacts' own tags, putting back into the index any entry a concurrent writer's PUT overwrote.

Requests (fallback): attaching is two blob uploads (the empty config, the payload; a blob the repository has is
uploaded again, two bytes), one manifest PUT, and per index update a GET, a PUT and a GET.  Listing is one tag
listing, one GET of the index, and a GET per artifact the index lacks (usually none).  With the API: one GET.

Both :func:`delete_referrers` (``prune``) and :func:`copy_referrers` (``import``, ``bases sync``) take only the
artifacts whose own ``subject`` is the image, whatever lists them; a copy reads at most its limit of them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import NotFoundError, RegistryError
from .copy import Endpoint, copy_manifest
from .manifest import OCI_INDEX, OCI_MANIFEST, Descriptor, Manifest, sha256_digest

log = logging.getLogger(__name__)

EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_BLOB = b"{}"
EMPTY_DIGEST = sha256_digest(EMPTY_BLOB)
INDEX_TRIES = 6
LIMIT_KEY = "[registry] max_referrers"  # the setting that gives copy_referrers its limit
_OWN_HEX = 16  # hex digits of an artifact's digest in its own tag
_FALLBACK_RE = re.compile(r"^sha256-(?P<subject>[0-9a-f]{64})(?:\.(?P<own>[0-9a-f]{16}))?$")


class ReferrerRegistry(Protocol):
    """What this module asks of a registry (:class:`.client.RegistryClient` is one); each method raises
    RegistryError (NotFoundError, AuthError) as the client documents."""

    host: str

    def get_referrers(self, repository: str, digest: str) -> Manifest | None: ...
    def list_tags(self, repository: str) -> list[str]: ...
    def get_manifest(self, repository: str, reference: str) -> Manifest: ...
    def put_manifest(self, repository: str, reference: str, manifest: Manifest) -> str: ...
    def delete_manifest(self, repository: str, digest: str) -> None: ...
    def upload_blob(self, repository: str, data: bytes, digest: str | None = None) -> str: ...
    def read_blob(self, repository: str, digest: str, max_bytes: int = ...) -> bytes: ...


@dataclass(frozen=True)
class Referrer:
    """One artifact that refers to a subject, as a referrers index lists it."""

    digest: str
    artifact_type: str
    size: int = 0
    media_type: str = OCI_MANIFEST
    annotations: Mapping[str, str] = field(default_factory=dict)

    def entry(self) -> dict[str, Any]:
        """Its descriptor as an index entry."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size,
                               "artifactType": self.artifact_type}
        if self.annotations:
            out["annotations"] = dict(sorted(self.annotations.items()))
        return out


# --------------------------------------------------------------------------------------------- pure


def fallback_tag(subject: str) -> str:
    """The tag of the referrers index of ``subject`` (``sha256:HEX``): ``sha256-HEX`` (pure).  Raises
    RegistryError for a digest that is not sha256."""
    algorithm, _, hex_part = subject.partition(":")
    if algorithm != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hex_part):
        raise RegistryError(f"referrers: {subject[:80]!r} is not a sha256 digest")
    return f"sha256-{hex_part}"


def own_tag(subject: str, artifact: str) -> str:
    """The tag an artifact ``artifact`` of ``subject`` is put under: ``sha256-HEX.`` and 16 hex digits of its own
    digest (pure)."""
    return f"{fallback_tag(subject)}.{artifact.partition(':')[2][:_OWN_HEX]}"


def is_referrer_tag(tag: str) -> bool:
    """Whether ``tag`` is a referrers index tag or an artifact's own tag of this schema (pure)."""
    return bool(_FALLBACK_RE.fullmatch(tag))


def artifact_manifest(subject: Descriptor, artifact_type: str, layer: Descriptor,
                      annotations: Mapping[str, str]) -> Manifest:
    """The manifest of an artifact about ``subject`` whose one layer is ``layer`` (pure)."""
    body = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": EMPTY_DIGEST, "size": len(EMPTY_BLOB)},
        "layers": [{"mediaType": layer.media_type, "digest": layer.digest, "size": layer.size}],
        "subject": {"mediaType": subject.media_type, "digest": subject.digest, "size": subject.size},
        "annotations": dict(sorted(annotations.items())),
    }
    return Manifest.from_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode(), OCI_MANIFEST)


def referrer_of(manifest: Manifest) -> Referrer:
    """The index entry of artifact ``manifest`` (pure); raises RegistryError if it is no artifact."""
    data = manifest.json()
    kind = data.get("artifactType") or (data.get("config") or {}).get("mediaType")
    if not isinstance(kind, str) or not kind:
        raise RegistryError(f"manifest {manifest.digest} has no artifactType")
    annotations = data.get("annotations") if isinstance(data.get("annotations"), dict) else {}
    return Referrer(manifest.digest, kind, len(manifest.raw), manifest.media_type,
                    {str(k): str(v) for k, v in annotations.items()})


def subject_of(manifest: Manifest) -> str | None:
    """The digest an artifact's ``subject`` names, or None (pure; raises RegistryError for bytes no manifest)."""
    subject = manifest.json().get("subject")
    digest = subject.get("digest") if isinstance(subject, dict) else None
    return digest if isinstance(digest, str) else None


def index_entries(index: Manifest | None) -> list[Referrer]:
    """The referrers an index lists (pure); entries that are no descriptor are left out."""
    if index is None:
        return []
    out = []
    for item in index.json().get("manifests") or []:
        if isinstance(item, dict) and isinstance(item.get("digest"), str):
            notes = item.get("annotations") if isinstance(item.get("annotations"), dict) else {}
            out.append(Referrer(item["digest"], str(item.get("artifactType") or ""), int(item.get("size") or 0),
                                str(item.get("mediaType") or OCI_MANIFEST), {str(k): str(v) for k, v in notes.items()}))
    return out


def index_manifest(entries: Sequence[Referrer]) -> Manifest:
    """An OCI index of ``entries``, sorted by digest (pure: the same set gives the same bytes)."""
    body = {"schemaVersion": 2, "mediaType": OCI_INDEX,
            "manifests": [r.entry() for r in sorted(entries, key=lambda r: r.digest)]}
    return Manifest.from_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode(), OCI_INDEX)


# --------------------------------------------------------------------------------------------- registry


def has_referrers_api(client: ReferrerRegistry, repository: str, subject: str) -> bool:
    """Whether the registry answers the referrers API (one GET); raises RegistryError."""
    return client.get_referrers(repository, subject) is not None


@dataclass(frozen=True)
class Artifact:
    """What to attach: its ``artifactType``, its one layer (media type and bytes) and its annotations."""

    artifact_type: str
    media_type: str
    data: bytes
    annotations: Mapping[str, str] = field(default_factory=dict)


def attach(client: ReferrerRegistry, repository: str, subject: Descriptor, artifact: Artifact) -> Referrer:
    """Attach ``artifact`` to ``subject``.

    The blobs go first, then the manifest under its own tag, then (without the referrers API) the entry into the
    subject's referrers index.  Returns the referrer.  Raises RegistryError (AuthError) when a write fails.
    """
    client.upload_blob(repository, EMPTY_BLOB, EMPTY_DIGEST)
    layer = Descriptor(artifact.media_type, client.upload_blob(repository, artifact.data), len(artifact.data))
    manifest = artifact_manifest(subject, artifact.artifact_type, layer, artifact.annotations)
    client.put_manifest(repository, own_tag(subject.digest, manifest.digest), manifest)
    referrer = referrer_of(manifest)
    if not has_referrers_api(client, repository, subject.digest):
        _update_index(client, repository, subject.digest, add=[referrer])
    return referrer


def list_referrers(client: ReferrerRegistry, repository: str, subject: str) -> list[Referrer]:
    """Every artifact that refers to ``subject``, sorted by digest: the referrers API's answer, else the fallback
    index together with the artifacts' own tags (an entry the index lost to a concurrent writer is put back).

    Raises RegistryError when the registry cannot be read.
    """
    return _listing(client, repository, subject)[0]


def _listing(client: ReferrerRegistry, repository: str, subject: str,
             limit: int | None = None) -> tuple[list[Referrer], int]:
    """:func:`list_referrers`, reading at most ``limit`` artifacts by their own tags; and how many such tags were
    left unread."""
    answer = client.get_referrers(repository, subject)
    if answer is not None:
        return sorted(index_entries(answer), key=lambda r: r.digest), 0
    listed = {r.digest: r for r in index_entries(_read_index(client, repository, subject))}
    lost, unread = _tagged(client, repository, subject, set(listed), limit)
    if lost:
        log.info("referrers of %s: %d entries missing from the index; putting them back", subject, len(lost))
        try:
            _update_index(client, repository, subject, add=lost)
        except RegistryError as exc:  # a reader without push rights still gets the whole list
            log.info("could not put them back: %s", exc)
    return sorted([*listed.values(), *lost], key=lambda r: r.digest), unread


def delete_referrers(client: ReferrerRegistry, repository: str, subject: str) -> list[str]:
    """Delete every artifact that refers to ``subject`` and its referrers index; the digests deleted.

    Only artifacts whose own ``subject`` is ``subject`` go (an index entry naming anything else is left alone).
    Raises RegistryError when the registry cannot be read or refuses a delete.
    """
    found = list_referrers(client, repository, subject)
    index = _read_index(client, repository, subject)
    if index is not None:  # first: an index never names an artifact that is gone
        _delete_quietly(client, repository, index.digest)
    deleted = []
    for referrer in found:
        try:
            manifest = client.get_manifest(repository, referrer.digest)
        except NotFoundError:
            continue
        if subject_of(manifest) == subject:
            _delete_quietly(client, repository, referrer.digest)
            deleted.append(referrer.digest)
    return deleted


@dataclass(frozen=True)
class CopiedReferrers:
    """What :func:`copy_referrers` did: the referrers it copied; those it left out, each with why (its own
    ``subject`` is not the image, it names none, its listing is no digest); and how many listed it left unread past
    its limit."""

    subject: str
    source: str  # REGISTRY/REPOSITORY the referrers were listed in
    copied: tuple[str, ...] = ()
    foreign: tuple[tuple[str, str], ...] = ()  # (digest as listed, why it was left out)
    left: int = 0

    def notes(self) -> list[str]:
        """One line per referrer left out, and one when the limit cut the list (pure)."""
        lines = [f"referrer {digest[:80]} in {self.source}: {why}; not copied" for digest, why in self.foreign]
        if self.left:
            seen = len(self.copied) + len(self.foreign)
            lines.append(f"{self.source}@{self.subject}: more referrers than {LIMIT_KEY} allows: copied "
                         f"{len(self.copied)} of the first {seen} listed, left {self.left} uncopied")
        return lines


def copy_referrers(source: Endpoint, subject: str, target: Endpoint, *, limit: int) -> CopiedReferrers:
    """Copy the artifacts that refer to ``subject`` in ``source`` to ``target`` (which holds ``subject`` already: a
    copied image keeps its digest), each under its own tag and in the target's referrers index.

    Only an artifact whose own manifest names ``subject`` as its ``subject`` is copied (a listing may name anything),
    and its index entry is made from that manifest; at most ``limit`` listed artifacts are read (the first by
    digest), the rest counted as left.  Raises RegistryError (NotFoundError, AuthError) when a read or write fails.
    """
    found, unread = _listing(source.client, source.repository, subject, limit)
    copied: list[Referrer] = []
    foreign: list[tuple[str, str]] = []
    for listed in found[:limit]:
        manifest = source.client.get_manifest(source.repository, listed.digest) if _is_digest(listed.digest) else None
        why = _not_about(manifest, subject)
        if manifest is None or why:
            foreign.append((listed.digest, why or "listed under something that is not a sha256 digest"))
            continue
        copy_manifest(source, manifest, target, own_tag(subject, manifest.digest))
        copied.append(referrer_of(manifest))
    if copied and not has_referrers_api(target.client, target.repository, subject):
        _update_index(target.client, target.repository, subject, add=copied)
    return CopiedReferrers(subject, f"{source.client.host}/{source.repository}", tuple(r.digest for r in copied),
                           tuple(foreign), max(len(found) - limit, 0) + unread)


def _is_digest(text: str) -> bool:
    return bool(re.fullmatch(r"sha256:[0-9a-f]{64}", text))


def _not_about(manifest: Manifest | None, subject: str) -> str:
    """Why artifact ``manifest`` is no referrer of ``subject`` ("" when it is one; pure)."""
    if manifest is None:
        return ""
    about = subject_of(manifest)
    if about is None:
        return f"it names no subject (the image copied is {subject})"
    if about != subject:
        return f"its subject is {about[:80]}, not the image copied ({subject})"
    try:
        referrer_of(manifest)
    except RegistryError:
        return "it is no artifact (no artifactType or config media type)"
    return ""


def _delete_quietly(client: ReferrerRegistry, repository: str, digest: str) -> None:
    with contextlib.suppress(NotFoundError):
        client.delete_manifest(repository, digest)


def _read_index(client: ReferrerRegistry, repository: str, subject: str) -> Manifest | None:
    try:
        return client.get_manifest(repository, fallback_tag(subject))
    except NotFoundError:
        return None


def _tagged(client: ReferrerRegistry, repository: str, subject: str, listed: set[str],
            limit: int | None = None) -> tuple[list[Referrer], int]:
    """The artifacts of ``subject`` found by their own tags that ``listed`` (the index's digests) lacks: one listing,
    a GET each, at most ``limit`` GETs; and how many such tags were left unread."""
    prefix = fallback_tag(subject) + "."
    known = {digest.partition(":")[2][:_OWN_HEX] for digest in listed}
    try:
        tags = [t for t in client.list_tags(repository) if t.startswith(prefix) and is_referrer_tag(t)
                and t[len(prefix):] not in known]
    except NotFoundError:
        return [], 0
    tags.sort()
    read = tags if limit is None else tags[:limit]
    out = []
    for tag in read:
        try:
            manifest = client.get_manifest(repository, tag)
        except NotFoundError:
            continue  # deleted meanwhile
        if subject_of(manifest) == subject:
            out.append(referrer_of(manifest))
    return out, len(tags) - len(read)


def _update_index(client: ReferrerRegistry, repository: str, subject: str, *, add: Sequence[Referrer],
                  sleep: Callable[[float], None] = time.sleep) -> None:
    """Add ``add`` to the referrers index of ``subject``: read, add, PUT, read back, and again (after a short random
    wait) while the read-back lacks an entry, at most INDEX_TRIES times.  Raises RegistryError when it never
    holds."""
    tag, wanted = fallback_tag(subject), {r.digest for r in add}
    for attempt in range(INDEX_TRIES):
        current = index_entries(_read_index(client, repository, subject))
        have = {r.digest for r in current}
        if wanted <= have:
            return
        merged = [*current, *(r for r in add if r.digest not in have)]
        client.put_manifest(repository, tag, index_manifest(merged))
        back = {r.digest for r in index_entries(_read_index(client, repository, subject))}
        if wanted <= back:
            return
        sleep(random.uniform(0.05, 0.2) * (attempt + 1))  # another writer's PUT landed after ours: again
    raise RegistryError(f"registry {client.host}: {repository}:{tag}: the referrers index kept losing the new entries"
                        f" to other writers ({INDEX_TRIES} tries)")
