"""A stand-in upstream registry that serves crafted content: manifests, blobs and referrers listings no honest
registry would hold (indexes nested 1,500 deep, referrers about other images, 20,000 referrers, a corrupt blob).

:class:`Upstream` is a table of what to serve, answered through a :class:`~.hostile.FakeRegistry` (``route``), which
counts the requests; every manifest answer carries the digest of its bytes, as a registry's does.  The builders
(:func:`image`, :func:`nested_index`, :func:`artifact`) make real OCI manifests whose digests are those of their
bytes, so imagectl's own checks pass and only the crafted part is hostile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from imagectl.registry.manifest import OCI_INDEX, OCI_MANIFEST, Manifest, sha256_digest

from .hostile import Behavior, Request, Wire, answer

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
EMPTY = b"{}"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
NOT_FOUND = {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "no such thing"}]}


def _manifest(body: dict, media_type: str) -> Manifest:
    return Manifest.from_bytes(json.dumps(body, sort_keys=True, separators=(",", ":")).encode(), media_type)


def _descriptor(manifest: Manifest, **extra: object) -> dict:
    return {"mediaType": manifest.media_type, "digest": manifest.digest, "size": len(manifest.raw), **extra}


@dataclass
class Upstream:
    """What the stand-in serves in ``repository``: manifests (by digest, and ``tags``), blobs (``corrupt``: bytes sent
    instead of a blob's own), and the referrers API's answers (``referrers``: subject digest -> index; a subject not
    there is answered 404, as a registry without the API does)."""

    repository: str
    manifests: dict[str, Manifest] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)
    corrupt: dict[str, bytes] = field(default_factory=dict)
    referrers: dict[str, Manifest] = field(default_factory=dict)
    tag_list: list[str] = field(default_factory=list)

    def add(self, manifest: Manifest, tag: str | None = None) -> Manifest:
        self.manifests[manifest.digest] = manifest
        if tag:
            self.tags[tag] = manifest.digest
        return manifest

    def blob(self, data: bytes) -> dict:
        """Serve ``data`` as a blob; its descriptor (as a layer)."""
        self.blobs[sha256_digest(data)] = data
        return {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": sha256_digest(data),
                "size": len(data)}

    def route(self, request: Request) -> Behavior:
        prefix = f"/v2/{self.repository}/"
        if not request.route.startswith(prefix):
            return answer(404, NOT_FOUND)
        kind, _, ref = request.route[len(prefix):].partition("/")
        if kind == "manifests":
            found = self.manifests.get(self.tags.get(ref, ref))
            if found is None:
                return answer(404, NOT_FOUND)
            headers = {"Content-Type": found.media_type, "Docker-Content-Digest": found.digest}
            return _headers_only(200, headers, len(found.raw)) if request.method == "HEAD" else \
                answer(200, found.raw, headers)
        if kind == "blobs" and ref in self.blobs:
            return answer(200, self.corrupt.get(ref, self.blobs[ref]), {"Content-Type": "application/octet-stream"})
        if kind == "referrers" and ref in self.referrers:
            return answer(200, self.referrers[ref].raw, {"Content-Type": OCI_INDEX})
        if kind == "tags" and self.tag_list:
            return answer(200, {"name": self.repository, "tags": self.tag_list})
        return answer(404, NOT_FOUND)

    def manifest_gets(self, server_requests: list[Request], digests: set[str]) -> int:
        """How many of ``server_requests`` read (GET) one of the manifests ``digests`` or their own tags."""
        hexes = {d.partition(":")[2][:16] for d in digests}
        prefix = f"/v2/{self.repository}/manifests/"
        return sum(1 for r in server_requests if r.method == "GET" and r.route.startswith(prefix)
                   and (r.route[len(prefix):] in digests or r.route.rpartition(".")[2] in hexes))


def _headers_only(status: int, headers: dict[str, str], length: int) -> Behavior:
    """The answer to a HEAD: the headers of the GET (its Content-Length too), no body."""

    def act(wire: Wire) -> bool:
        wire.head(status, {**headers, "Content-Length": str(length)})
        return True

    return act


def image(upstream: Upstream, text: str, tag: str | None = None, layers: int = 0) -> Manifest:
    """A small linux/amd64 image (a config blob, ``layers`` layers of ``text``) served by ``upstream``."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": {"made-by": text}},
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    upstream.blobs[sha256_digest(config)] = config
    body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config), "size": len(config)},
            "layers": [upstream.blob(f"{text} layer {i}\n".encode()) for i in range(layers)]}
    return upstream.add(_manifest(body, OCI_MANIFEST), tag)


def nested_index(upstream: Upstream, leaf: Manifest, depth: int, tag: str) -> Manifest:
    """``depth`` image indexes, each listing the next as its linux/amd64 entry, the last ``leaf``; the top one under
    ``tag``."""
    child = leaf
    for level in range(depth):
        body = {"schemaVersion": 2, "mediaType": OCI_INDEX,
                "manifests": [_descriptor(child, platform={"os": "linux", "architecture": "amd64"})]}
        child = upstream.add(_manifest(body, OCI_INDEX), tag if level == depth - 1 else None)
    return child


def artifact(upstream: Upstream, subject: str | None, note: str) -> Manifest:
    """An OCI artifact (the empty config, one layer) whose ``subject`` is the manifest ``subject`` (none: no subject
    field at all), told apart by the annotation ``note``; served by ``upstream``."""
    upstream.blobs[sha256_digest(EMPTY)] = EMPTY
    body: dict = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example.sbom+json",
                  "config": {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)},
                  "layers": [upstream.blob(b'{"sbom": "stand-in"}')], "annotations": {"note": note}}
    if subject is not None:
        body["subject"] = {"mediaType": OCI_MANIFEST, "digest": subject, "size": 1}
    return upstream.add(_manifest(body, OCI_MANIFEST))


def referrers_index(artifacts: list[Manifest]) -> Manifest:
    """The referrers API's answer listing ``artifacts``."""
    entries = [_descriptor(a, artifactType="application/vnd.example.sbom+json") for a in artifacts]
    return _manifest({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}, OCI_INDEX)
