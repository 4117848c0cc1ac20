"""Manifests, descriptors and image configs: pure parsing, no registry."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone

import pytest

from imagectl.errors import RegistryError
from imagectl.registry.manifest import (
    DOCKER_CONFIG,
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    MANIFEST_ACCEPT,
    MANIFEST_TYPES,
    OCI_CONFIG,
    OCI_INDEX,
    OCI_LAYER_GZIP,
    OCI_MANIFEST,
    Descriptor,
    DigestMismatchError,
    Manifest,
    parse_image_config,
    parse_timestamp,
    pick_platform,
    sha256_digest,
    verified_digest,
)

CONFIG = "sha256:" + "c" * 64
LAYER = "sha256:" + "a" * 64
FOREIGN = "sha256:" + "f" * 64


def _image(**extra: object) -> bytes:
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": CONFIG, "size": 10},
        "layers": [
            {"mediaType": OCI_LAYER_GZIP, "digest": LAYER, "size": 20},
            {"mediaType": "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "digest": FOREIGN,
             "size": 30, "urls": ["https://example.invalid/layer"]},
        ],
        **extra,
    }).encode()


def test_accept_header_names_all_four_manifest_kinds() -> None:
    assert len(MANIFEST_TYPES) == 4
    assert all(kind in MANIFEST_ACCEPT for kind in MANIFEST_TYPES)


def test_digest_is_sha256_of_the_exact_bytes() -> None:
    raw = _image()
    manifest = Manifest.from_bytes(raw)
    assert manifest.digest == sha256_digest(raw) and manifest.media_type == OCI_MANIFEST
    assert Manifest.from_bytes(raw + b" ").digest != manifest.digest


def test_image_manifest_lists_config_and_layers_but_not_foreign_ones() -> None:
    manifest = Manifest.from_bytes(_image())
    assert manifest.config() == Descriptor(OCI_CONFIG, CONFIG, 10)
    assert [blob.digest for blob in manifest.blobs()] == [CONFIG, LAYER]
    assert len(manifest.layers()) == 2 and manifest.layers()[1].is_foreign
    assert manifest.children() == [] and not manifest.is_index


def test_index_lists_children_with_platforms() -> None:
    raw = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": LAYER, "size": 5, "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": OCI_MANIFEST, "digest": CONFIG, "size": 6, "platform": {"os": "linux", "architecture": "amd64"}},
    ]}).encode()
    index = Manifest.from_bytes(raw, DOCKER_MANIFEST_LIST)
    assert index.is_index and index.config() is None and index.blobs() == []
    assert pick_platform(index.children()).digest == CONFIG
    assert pick_platform(index.children(), architecture="s390x").digest == LAYER


def test_media_type_must_come_from_somewhere() -> None:
    with pytest.raises(RegistryError, match="mediaType"):
        Manifest.from_bytes(b'{"schemaVersion": 2}')
    assert Manifest.from_bytes(b'{"schemaVersion": 2}', OCI_INDEX).media_type == OCI_INDEX


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'{"mediaType": "x", "layers": [{"size": 1}]}'])
def test_malformed_manifests_are_registry_errors(raw: bytes) -> None:
    with pytest.raises(RegistryError):
        Manifest(OCI_MANIFEST, sha256_digest(raw), raw).layers()


def test_empty_index_has_no_platform_to_pick() -> None:
    with pytest.raises(RegistryError, match="no manifests"):
        pick_platform([])


def test_repr_does_not_dump_the_raw_bytes() -> None:
    assert "schemaVersion" not in repr(Manifest.from_bytes(_image()))


def test_image_config_labels_and_created() -> None:
    raw = json.dumps({"architecture": "amd64", "os": "linux", "created": "2024-05-01T12:00:00.123456789Z",
                      "config": {"Labels": {"org.imagectl.profile": "torch-2.3-cu121"}}}).encode()
    config = parse_image_config(raw, CONFIG)
    assert config.labels == {"org.imagectl.profile": "torch-2.3-cu121"}
    assert config.created == datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
    assert (config.os, config.architecture, config.digest) == ("linux", "amd64", CONFIG)


def test_image_config_without_labels_or_created() -> None:
    config = parse_image_config(b'{"config": {"Labels": null}}', CONFIG)
    assert config.labels == {} and config.created is None
    with pytest.raises(RegistryError, match=CONFIG):
        parse_image_config(b"{", CONFIG)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, tzinfo=timezone.utc)),
        ("2024-05-01T12:00:00.5Z", datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=timezone.utc)),
        ("2024-05-01T12:00:00.123456789+02:00",
         datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))),
        ("2024-05-01T12:00:00-05:00", datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=-5)))),
        ("2024-05-01T12:00:00", datetime(2024, 5, 1, 12, tzinfo=timezone.utc)),
        ("yesterday", None),
        ("2024-13-01T00:00:00Z", None),
        (None, None),
    ],
)
def test_rfc3339_timestamps(text: str | None, expected: datetime | None) -> None:
    assert parse_timestamp(text) == expected


# ---- issue 24, item 4: what a registry says about a manifest is checked against its bytes

def test_the_digest_of_manifest_bytes_is_checked_against_what_the_registry_answered() -> None:
    raw = _image()
    assert verified_digest(raw, None, "reg", "GET manifest a:v1") == sha256_digest(raw)
    assert verified_digest(raw, sha256_digest(raw), "reg", "GET manifest a:v1") == sha256_digest(raw)
    sha512 = "sha512:" + hashlib.sha512(raw).hexdigest()
    assert verified_digest(raw, sha512, "reg", "GET manifest a:v1") == sha512
    lie = sha256_digest(b"another image")
    for answered in (lie, "sha512:" + "0" * 128, "md5:abc"):
        with pytest.raises(DigestMismatchError) as caught:
            verified_digest(raw, answered, "reg", "GET manifest a:v1")
        assert str(caught.value).startswith(f"registry reg: GET manifest a:v1: the answer says Docker-Content-Digest "
                                            f"{answered}, but its bytes have digest ")
        assert isinstance(caught.value, RegistryError)


def test_images_and_indexes_are_images_and_artifacts_say_what_they_are() -> None:
    docker = json.dumps({"schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
                         "config": {"mediaType": DOCKER_CONFIG, "digest": CONFIG, "size": 1}, "layers": []}).encode()
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}).encode()
    assert Manifest.from_bytes(_image()).artifact_kind() is None
    assert Manifest.from_bytes(docker).artifact_kind() is None and Manifest.from_bytes(index).artifact_kind() is None
    record = _image(artifactType="application/vnd.imagectl.move.v1+json")
    assert Manifest.from_bytes(record).artifact_kind() == "application/vnd.imagectl.move.v1+json"
    chart = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [], "config": {
        "mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": CONFIG, "size": 1}}).encode()
    assert Manifest.from_bytes(chart).artifact_kind() == "application/vnd.cncf.helm.config.v1+json"
    signed = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "artifactType": "application/x.sig",
                         "manifests": []}).encode()
    assert Manifest.from_bytes(signed).artifact_kind() == "application/x.sig"
