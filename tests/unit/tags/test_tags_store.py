"""The tag stores' additions: the registry store puts back a manifest it deleted, records the log without
needless blob checks, and the engine store's log loses no append under concurrency."""

from __future__ import annotations

import threading

import pytest

from imagectl.errors import NotFoundError
from imagectl.reference import parse_reference
from imagectl.registry.manifest import OCI_MANIFEST, Manifest
from imagectl.tags.store import (
    HISTORY_TAG,
    EngineTagStore,
    Move,
    RegistryTagStore,
    _parse_moves,
)


class FakeClient:
    """A registry like distribution 2.x: no tag-only deletes; a manifest delete removes its tags."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self.manifests: dict[str, Manifest] = {}
        self.blobs: set[str] = set()
        self.calls: list[tuple[str, str]] = []

    def put_image(self, tag: str, n: int) -> str:
        raw = b'{"schemaVersion":2,"n":%d,"config":{"digest":"sha256:%s","size":1},"layers":[]}' % (n, b"0" * 64)
        manifest = Manifest.from_bytes(raw, OCI_MANIFEST)
        self.manifests[manifest.digest] = manifest
        self.tags[tag] = manifest.digest
        return manifest.digest

    def list_tags(self, repository):
        self.calls.append(("list", ""))
        return list(self.tags)

    def head_manifest(self, repository, reference):
        self.calls.append(("HEAD", reference))
        digest = self.tags.get(reference, reference)
        return digest if digest in self.manifests else None

    def get_manifest(self, repository, reference):
        self.calls.append(("GET", reference))
        digest = self.tags.get(reference, reference)
        if digest not in self.manifests:
            raise NotFoundError(f"no manifest {reference}")
        return self.manifests[digest]

    def put_manifest(self, repository, reference, manifest):
        self.calls.append(("PUT", reference))
        self.manifests[manifest.digest] = manifest
        if not reference.startswith("sha256:"):
            self.tags[reference] = manifest.digest
        return manifest.digest

    def delete_tag(self, repository, tag):
        self.calls.append(("DELETE tag", tag))
        return False

    def delete_manifest(self, repository, digest):
        self.calls.append(("DELETE", digest))
        del self.manifests[digest]
        for tag in [t for t, d in self.tags.items() if d == digest]:
            del self.tags[tag]

    def blob_exists(self, repository, digest):
        self.calls.append(("HEAD blob", digest))
        return digest in self.blobs

    def upload_blob(self, repository, data, digest=None):
        self.calls.append(("upload", digest))
        self.blobs.add(digest)
        return digest


@pytest.fixture
def registry_store():
    client = FakeClient()
    return client, RegistryTagStore(client, parse_reference("reg.example.com/ml/torch-2.3-cu121"))


def test_point_is_one_get_and_one_put(registry_store):
    client, store = registry_store
    target = client.put_image("v1", 1)
    client.calls.clear()
    store.point("latest", target)
    assert client.calls == [("GET", target), ("PUT", "latest")]
    assert store.exists(target) and not store.exists("sha256:" + "f" * 64)


def test_a_deleted_manifest_can_be_put_back_under_a_pointer(registry_store):
    client, store = registry_store
    old = client.put_image("v1", 1)
    client.tags["latest"] = old  # a rollback landed on it
    store.delete("v1")  # prune: the registry deletes the manifest, and latest with it
    assert "latest" not in client.tags and old not in client.manifests
    store.point("latest", old)
    assert client.tags["latest"] == old and old in client.manifests
    with pytest.raises(NotFoundError):
        RegistryTagStore(client, store.repository).point("x", "sha256:" + "e" * 64)


def test_record_checks_the_empty_config_blob_only_for_the_first_entry(registry_store):
    client, store = registry_store
    first = Move("latest", "sha256:" + "1" * 64, None, "build", "2024-01-01T00:00:00+00:00", "a@b")
    store.record(first)
    assert ("upload", "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a") in client.calls
    client.calls.clear()
    second = Move("latest", "sha256:" + "2" * 64, first.to, "rollback", "2024-01-02T00:00:00+00:00", "a@b")
    store.record(second)
    assert [c[0] for c in client.calls] == ["GET", "PUT", "GET"]  # read, write, verify: no blob requests
    assert store.moves() == [first, second]
    assert HISTORY_TAG not in store.tags()


def test_the_log_ignores_fields_a_newer_imagectl_adds():
    text = ('[{"tag": "latest", "to": "sha256:1", "previous": null, "action": "build", "when": "t", "by": "a@b",'
            ' "reason": "new"}]')
    assert _parse_moves(text, "log")[0].action == "build"


class TinyEngine:
    def list_tags(self, repository):
        return []

    def inspect(self, ref):
        return None


def test_engine_log_loses_no_concurrent_append(tmp_path):
    stores = [EngineTagStore(TinyEngine(), parse_reference("ml/torch-2.3-cu121"), tmp_path) for _ in range(4)]
    moves = [Move("latest", f"sha256:{i}", None, "rollback", "t", "a@b") for i in range(40)]

    def append(i: int) -> None:
        stores[i % 4].record(moves[i])

    threads = [threading.Thread(target=append, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(m.to for m in stores[0].moves()) == sorted(m.to for m in moves)
    assert not stores[0].exists("sha256:1")


def test_a_half_done_manifest_delete_is_made_whole(registry_store):
    client, store = registry_store
    digest = client.put_image("v1", 1)
    real_delete = client.delete_manifest
    failures = []

    def half_done(repository, target):  # distribution 2.x: manifest deleted, then the tag lookup fails
        if not failures:
            failures.append(target)
            del client.manifests[target]
            from imagectl.errors import RegistryError

            raise RegistryError("500 Internal Server Error (UNKNOWN)")
        real_delete(repository, target)

    client.delete_manifest = half_done
    store.delete("v1")
    assert failures == [digest]
    assert "v1" not in client.tags and digest not in client.manifests  # put back, then deleted properly
    assert ("PUT", digest) in client.calls
