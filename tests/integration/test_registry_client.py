"""The registry client against real CNCF distribution registries (``docker-registry``) on loopback.

Images are pushed without docker (blobs, config and manifest uploaded through the client).  Auth is tested
against an htpasswd registry and a bearer-token registry with a local token server; retries against a
fault-injecting proxy in front of a registry.  ``skopeo`` checks the result as an independent client.
Self-contained: module-level fixtures, no conftest.  A missing docker-registry skips the module on a
workstation and fails it when ``CI=true``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagectl.errors import AuthError, NotFoundError, RegistryError
from imagectl.registry import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
    Credentials,
    Endpoint,
    Manifest,
    RegistryClient,
    RetryPolicy,
    Timeouts,
    connect,
    copy_image,
    sha256_digest,
)
from tests.integration.support.registry import (
    FaultInjectingProxy,
    RegistryServer,
    free_port,
    make_sample_image,
    push_sample_image,
    start_registry,
)
from tests.integration.support.skips import require_binary
from tests.integration.support.sleeps import Sleeps

pytestmark = pytest.mark.integration


def _client(
    server: RegistryServer | FaultInjectingProxy, sleeps: Sleeps | None = None, **kwargs: object
) -> RegistryClient:
    retry = RetryPolicy(sleep=sleeps if sleeps is not None else Sleeps())
    return RegistryClient(server.host, insecure=True, retry=retry, **kwargs)  # type: ignore[arg-type]


def _start(root: Path, auth: str | None = None) -> Iterator[RegistryServer]:
    require_binary("docker-registry")
    server = start_registry(root, auth)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    yield from _start(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def other_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    yield from _start(tmp_path_factory.mktemp("other-registry"))


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    require_binary("htpasswd")
    yield from _start(tmp_path_factory.mktemp("basic-registry"), "htpasswd")


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    require_binary("openssl")
    yield from _start(tmp_path_factory.mktemp("token-registry"), "token")


@pytest.fixture()
def proxy(registry: RegistryServer) -> Iterator[FaultInjectingProxy]:
    server = FaultInjectingProxy(registry.url)
    yield server
    server.stop()


# ------------------------------------------------------------------------------------------------ manifests


def test_pushed_image_reads_back_by_tag_and_digest(registry: RegistryServer) -> None:
    client = _client(registry)
    image = make_sample_image({"a.txt": b"a", "b.txt": b"b"}, labels={"org.imagectl.profile": "torch-2.3-cu121"})
    digest = push_sample_image(client, "team/torch", "2.3", image)

    by_tag = client.get_manifest("team/torch", "2.3")
    assert (by_tag.media_type, by_tag.digest, by_tag.raw) == (OCI_MANIFEST, digest, image.manifest)
    assert digest == sha256_digest(image.manifest)
    assert client.get_manifest("team/torch", digest).raw == image.manifest
    assert client.head_manifest("team/torch", "2.3") == digest
    assert [blob.digest for blob in by_tag.blobs()] == [sha256_digest(b) for b in image.blobs]
    assert all(client.blob_exists("team/torch", sha256_digest(b)) for b in image.blobs)


def test_image_config_gives_labels_and_created(registry: RegistryServer) -> None:
    client = _client(registry)
    image = make_sample_image(labels={"a": "1", "b": "two"}, created="2024-05-01T12:30:00.5Z")
    push_sample_image(client, "team/config", "v1", image)

    config = client.get_image_config("team/config", client.get_manifest("team/config", "v1"))
    assert config.labels == {"a": "1", "b": "two"}
    assert config.created is not None and config.created.isoformat() == "2024-05-01T12:30:00.500000+00:00"
    assert (config.os, config.architecture) == ("linux", "amd64")


def test_missing_manifest_is_none_for_head_and_not_found_for_get(registry: RegistryServer) -> None:
    client = _client(registry)
    push_sample_image(client, "team/missing", "v1")
    assert client.head_manifest("team/missing", "nope") is None
    with pytest.raises(NotFoundError) as caught:
        client.get_manifest("team/missing", "nope")
    message = str(caught.value)
    assert registry.host in message and "team/missing:nope" in message
    assert "404" in message and "MANIFEST_UNKNOWN" in message and "\n" not in message


def test_docker_manifest_and_both_index_kinds_keep_their_media_type(registry: RegistryServer) -> None:
    client = _client(registry)
    image = make_sample_image({"d.txt": b"docker"}, docker_media_types=True)
    digest = push_sample_image(client, "team/kinds", "docker", image)
    assert client.get_manifest("team/kinds", "docker").media_type == DOCKER_MANIFEST

    for kind, tag in ((OCI_INDEX, "oci-index"), (DOCKER_MANIFEST_LIST, "docker-list")):
        child = {"mediaType": DOCKER_MANIFEST, "digest": digest, "size": len(image.manifest),
                 "platform": {"os": "linux", "architecture": "amd64"}}
        raw = json.dumps({"schemaVersion": 2, "mediaType": kind, "manifests": [child]}).encode()
        put = client.put_manifest("team/kinds", tag, Manifest.from_bytes(raw))
        fetched = client.get_manifest("team/kinds", tag)
        assert (fetched.media_type, fetched.digest, fetched.raw) == (kind, put, raw)
        assert fetched.is_index and [c.digest for c in fetched.children()] == [digest]
        assert client.get_image_config("team/kinds", fetched).os == "linux"


def test_tags_are_listed_across_pages(registry: RegistryServer, proxy: FaultInjectingProxy) -> None:
    client = _client(proxy)
    tags = ["a1", "a2", "b1", "b2", "c1"]
    push_sample_image(client, "team/paged", tags[0])
    manifest = client.get_manifest("team/paged", tags[0])
    for tag in tags[1:]:
        client.put_manifest("team/paged", tag, manifest)

    assert sorted(client.list_tags("team/paged", page_size=2)) == tags
    assert proxy.hits("/v2/team/paged/tags/list", "GET") == 3
    assert sorted(client.list_tags("team/paged")) == tags
    with pytest.raises(NotFoundError, match="NAME_UNKNOWN"):
        client.list_tags("team/no-such-repo", page_size=2)


def test_repointing_a_tag_is_one_get_and_one_put(registry: RegistryServer, proxy: FaultInjectingProxy) -> None:
    require_binary("skopeo")
    client = _client(proxy)
    old = push_sample_image(client, "team/rollback", "stable", make_sample_image({"v": b"1"}))
    new = push_sample_image(client, "team/rollback", "candidate", make_sample_image({"v": b"2"}))
    before, blobs_before = proxy.hits(), proxy.hits("/v2/team/rollback/blobs/")

    client.put_manifest("team/rollback", "stable", client.get_manifest("team/rollback", "candidate"))
    assert proxy.hits() - before == 2  # one GET, one PUT
    assert proxy.hits("/v2/team/rollback/blobs/") == blobs_before  # no blob upload
    assert client.head_manifest("team/rollback", "stable") == new != old

    seen = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry.host}/team/rollback:stable"],
        check=True, capture_output=True, text=True, timeout=60,
    )
    assert json.loads(seen.stdout)["Digest"] == new


def test_delete_manifest_removes_its_tags(registry: RegistryServer) -> None:
    client = _client(registry)
    digest = push_sample_image(client, "team/delete", "gone")
    push_sample_image(client, "team/delete", "kept", make_sample_image({"k": b"kept"}))

    client.delete_manifest("team/delete", digest)
    assert client.head_manifest("team/delete", "gone") is None
    assert client.list_tags("team/delete") == ["kept"]
    with pytest.raises(NotFoundError):
        client.delete_manifest("team/delete", digest)


def test_delete_tag_says_when_the_registry_cannot(registry: RegistryServer) -> None:
    client = _client(registry)
    digest = push_sample_image(client, "team/untag", "v1")
    # distribution 2.8 cannot delete a tag alone: the client reports False and leaves the tag in place
    assert client.delete_tag("team/untag", "v1") is False
    assert client.head_manifest("team/untag", "v1") == digest


# ------------------------------------------------------------------------------------------------ blobs


def test_big_blob_streams_up_from_a_file_and_down_again(registry: RegistryServer, tmp_path: Path) -> None:
    client = _client(registry)
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    with path.open("rb") as handle:
        digest = client.upload_blob("team/blobs", handle)
    assert digest == sha256_digest(data)

    hasher = hashlib.sha256()
    with client.open_blob("team/blobs", digest) as reader:
        assert len(reader) == len(data)
        for chunk in reader.iter_chunks(256 * 1024):
            hasher.update(chunk)
    assert "sha256:" + hasher.hexdigest() == digest
    with pytest.raises(NotFoundError, match="BLOB_UNKNOWN"):
        client.open_blob("team/blobs", sha256_digest(b"never uploaded"))


def test_upload_with_a_wrong_digest_is_refused(registry: RegistryServer) -> None:
    client = _client(registry)
    with pytest.raises(RegistryError, match="DIGEST_INVALID"):
        client.upload_blob("team/blobs", b"some bytes", sha256_digest(b"other bytes"))


def test_mount_across_repositories(registry: RegistryServer) -> None:
    client = _client(registry)
    image = make_sample_image({"m.txt": b"mount me"})
    push_sample_image(client, "team/source", "v1", image)
    layer = sha256_digest(image.layers[0])

    assert client.mount_blob("team/mounted", layer, "team/source") is True
    assert client.blob_exists("team/mounted", layer)
    assert client.mount_blob("team/mounted", sha256_digest(b"nowhere"), "team/source") is False


def test_copy_within_one_registry_mounts(registry: RegistryServer) -> None:
    client = _client(registry)
    image = make_sample_image({"c.txt": b"copy"})
    digest = push_sample_image(client, "team/copy-src", "v1", image)

    report = copy_image(Endpoint(client, "team/copy-src"), "v1", Endpoint(client, "team/copy-dst"), "v1")
    assert report.digest == digest
    assert sorted(report.mounted) == sorted(sha256_digest(b) for b in image.blobs) and not report.uploaded
    again = copy_image(Endpoint(client, "team/copy-src"), "v1", Endpoint(client, "team/copy-dst"), "v2")
    assert len(again.skipped) == len(image.blobs) and not again.mounted and not again.uploaded


def test_copy_between_registries_streams_blobs_and_index_children(
    registry: RegistryServer, other_registry: RegistryServer
) -> None:
    source, target = _client(registry), _client(other_registry)
    amd = make_sample_image({"arch": b"amd64"})
    arm = make_sample_image({"arch": b"arm64"}, docker_media_types=True)
    children = []
    for tag, image, arch in (("amd", amd, "amd64"), ("arm", arm, "arm64")):
        digest = push_sample_image(source, "team/multi", tag, image)
        children.append({"mediaType": image.media_type, "digest": digest, "size": len(image.manifest),
                         "platform": {"os": "linux", "architecture": arch}})
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}).encode()
    index_digest = source.put_manifest("team/multi", "latest", Manifest.from_bytes(index))

    report = copy_image(Endpoint(source, "team/multi"), "latest", Endpoint(target, "mirror/multi"), "latest")
    assert report.digest == index_digest and not report.mounted
    assert sorted(report.uploaded) == sorted(sha256_digest(b) for b in amd.blobs + arm.blobs)
    assert target.get_manifest("mirror/multi", "latest").raw == index
    for child in children:
        assert target.head_manifest("mirror/multi", str(child["digest"])) == child["digest"]
    again = copy_image(Endpoint(source, "team/multi"), "latest", Endpoint(target, "mirror/multi"), "again")
    assert not again.uploaded and len(again.skipped) == 2  # both children already there


# ------------------------------------------------------------------------------------------------ auth


def test_basic_auth_with_right_credentials(basic_registry: RegistryServer) -> None:
    client = _client(basic_registry, credentials=Credentials(basic_registry.username, basic_registry.password))
    digest = push_sample_image(client, "team/basic", "v1")
    assert client.head_manifest("team/basic", "v1") == digest


def test_basic_auth_with_wrong_or_no_credentials(
    basic_registry: RegistryServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = _client(basic_registry, credentials=Credentials(basic_registry.username, "not-the-password"))
    with pytest.raises(AuthError) as caught:
        wrong.get_manifest("team/basic", "v1")
    assert basic_registry.host in str(caught.value) and "401" in str(caught.value)
    assert "not-the-password" not in str(caught.value) + repr(caught.value) + caplog.text
    with pytest.raises(AuthError, match=f"no credentials for {basic_registry.host}"):
        _client(basic_registry).list_tags("team/basic")


def test_credentials_come_from_the_docker_config(
    basic_registry: RegistryServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    pair = base64.b64encode(f"{basic_registry.username}:{basic_registry.password}".encode()).decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {f"http://{basic_registry.host}": {"auth": pair}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    client = connect(basic_registry.host, insecure=True, retry=RetryPolicy(sleep=Sleeps()))
    push_sample_image(client, "team/from-config", "v1")
    assert client.list_tags("team/from-config") == ["v1"]


def test_bearer_token_flow_caches_one_token_per_scope(
    token_registry: RegistryServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tokens = token_registry.token_server
    assert tokens is not None
    client = _client(token_registry, credentials=Credentials(token_registry.username, token_registry.password))
    start = tokens.hits()

    digest = push_sample_image(client, "team/token", "v1")  # every call: scope pull,push
    assert tokens.hits() - start == 1
    for _ in range(3):
        assert client.get_manifest("team/token", "v1").digest == digest  # scope pull: one more token
    assert client.head_manifest("team/token", "v1") == digest
    assert tokens.hits() - start == 2
    with pytest.raises(NotFoundError):
        client.get_manifest("team/token-other", "v1")  # another repository: another scope
    assert tokens.hits() - start == 3
    assert [r.scopes for r in tokens.requests[start:]] == [
        ("repository:team/token:pull,push",), ("repository:team/token:pull",), ("repository:team/token-other:pull",)
    ]
    assert token_registry.password not in caplog.text and "Bearer " not in caplog.text


def test_bearer_token_with_wrong_or_no_credentials(token_registry: RegistryServer) -> None:
    wrong = _client(token_registry, credentials=Credentials(token_registry.username, "wrong-secret-123"))
    with pytest.raises(AuthError) as caught:
        wrong.get_manifest("team/token", "v1")
    message = str(caught.value)
    assert "refused user 'imagectl'" in message and "wrong-secret-123" not in message
    with pytest.raises(AuthError, match="401"):  # anonymous: a token with no access, refused by the registry
        _client(token_registry).get_manifest("team/token", "v1")


def test_a_short_deadline_still_serves_a_real_registry_with_tokens(token_registry: RegistryServer) -> None:
    """Every request (401, token request, body) within 5 s; a 3 MiB blob both ways within its size-based time."""
    client = _client(token_registry, credentials=Credentials(token_registry.username, token_registry.password),
                     timeouts=Timeouts(request_s=5))
    digest = push_sample_image(client, "team/deadline", "v1")
    assert client.list_tags("team/deadline") == ["v1"] and client.head_manifest("team/deadline", "v1") == digest
    data = os.urandom(3 * 1024 * 1024)
    blob = client.upload_blob("team/deadline", data)
    with client.open_blob("team/deadline", blob) as reader:
        assert reader.read() == data


# ------------------------------------------------------------------------------------------------ retries


def test_503_twice_then_success(registry: RegistryServer, proxy: FaultInjectingProxy) -> None:
    sleeps = Sleeps()
    client = _client(proxy, sleeps)
    digest = push_sample_image(client, "team/flaky", "v1")
    proxy.script("/v2/team/flaky/manifests/", [503, 503])
    before = proxy.hits("/v2/team/flaky/manifests/")

    assert client.get_manifest("team/flaky", "v1").digest == digest
    assert proxy.hits("/v2/team/flaky/manifests/") - before == 3
    assert sleeps == [0.5, 1.0]


def test_429_honours_retry_after_up_to_the_cap(registry: RegistryServer, proxy: FaultInjectingProxy) -> None:
    sleeps = Sleeps()
    client = _client(proxy, sleeps)
    push_sample_image(client, "team/limited", "v1")
    proxy.script("/v2/team/limited/tags/list", [429], retry_after="3")
    proxy.script("/v2/team/limited/tags/list", [429], retry_after="86400")
    assert client.list_tags("team/limited") == ["v1"]
    assert sleeps == [3.0, 30.0]


def test_404_and_403_are_asked_exactly_once(registry: RegistryServer, proxy: FaultInjectingProxy) -> None:
    sleeps = Sleeps()
    client = _client(proxy, sleeps)
    with pytest.raises(NotFoundError):
        client.get_manifest("team/absent", "v1")
    assert proxy.hits("/v2/team/absent/manifests/v1") == 1
    proxy.script("/v2/team/forbidden/", [403])
    with pytest.raises(AuthError, match="403"):
        client.list_tags("team/forbidden")
    assert proxy.hits("/v2/team/forbidden/") == 1 and sleeps == []


def test_persistent_5xx_gives_up_after_the_bounded_attempts(
    registry: RegistryServer, proxy: FaultInjectingProxy
) -> None:
    sleeps = Sleeps()
    client = _client(proxy, sleeps)
    proxy.script("/v2/team/down/", [502] * 10)
    with pytest.raises(RegistryError, match="502"):
        client.list_tags("team/down")
    assert proxy.hits("/v2/team/down/") == 4 and sleeps == [0.5, 1.0, 2.0]


def test_unreachable_registry_is_one_clear_error(registry: RegistryServer) -> None:
    sleeps = Sleeps()
    host = f"127.0.0.1:{free_port()}"
    with pytest.raises(RegistryError) as caught:
        RegistryClient(host, insecure=True, retry=RetryPolicy(sleep=sleeps)).get_manifest("team/x", "v1")
    assert str(caught.value).startswith(f"registry {host} unreachable: ") and len(sleeps) == 3
    with pytest.raises(RegistryError, match=f"registry {registry.host} unreachable: .*SSL.*insecure"):
        RegistryClient(registry.host, retry=RetryPolicy(sleep=Sleeps())).get_manifest("team/x", "v1")


def test_tls_is_verified_unless_insecure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_binary("docker-registry")
    require_binary("openssl")
    with start_registry(tmp_path, tls=True) as server:
        insecure = _client(server)  # https with the certificate unchecked (this registry speaks no http)
        digest = push_sample_image(insecure, "team/tls", "v1")
        secure = RegistryClient(server.host, retry=RetryPolicy(sleep=Sleeps()))
        with pytest.raises(RegistryError, match="unreachable: SSL.*certificate verify failed"):
            secure.head_manifest("team/tls", "v1")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.ca_cert))  # a private CA, trusted the usual way
        assert RegistryClient(server.host).head_manifest("team/tls", "v1") == digest
