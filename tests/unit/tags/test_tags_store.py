"""The tag stores' additions: the registry store puts back a manifest it deleted, records the log without
needless blob checks, and the engine store's log loses no append under concurrency."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from datetime import datetime, timedelta, timezone

import pytest

from imagectl.errors import AuthError, NotFoundError, RegistryError
from imagectl.reference import parse_reference
from imagectl.registry.manifest import OCI_MANIFEST, Manifest
from imagectl.tags import store as store_module
from imagectl.tags.store import (
    HISTORY_ANNOTATION,
    HISTORY_TAG,
    MOVE_PREFIX,
    EngineTagStore,
    Move,
    NotAnImageError,
    RegistryTagStore,
    key_of_record,
    parse_moves,
    record_key,
    record_tag,
    record_time,
)

EMPTY_CONFIG = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


class FakeClient:
    """A registry like distribution 2.x: no tag-only deletes; a manifest delete removes its tags."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self.manifests: dict[str, Manifest] = {}
        self.blobs: set[str] = {"sha256:" + "0" * 64}  # the config of put_image's images
        self.calls: list[tuple[str, str]] = []
        self.hooks: dict[str, object] = {}  # name -> callable run once before that call (to stage races)

    def put_image(self, tag: str, n: int) -> str:
        raw = (b'{"schemaVersion":2,"n":%d,"config":{"mediaType":"application/vnd.oci.image.config.v1+json",'
               b'"digest":"sha256:%s","size":1},"layers":[]}' % (n, b"0" * 64))
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
        hook = self.hooks.pop("PUT", None)
        if hook is not None:
            hook()
        config = (manifest.json().get("config") or {}).get("digest")
        if config and config not in self.blobs:  # as distribution: 400 MANIFEST_BLOB_UNKNOWN
            raise RegistryError(f"PUT manifest {reference}: 400 (MANIFEST_BLOB_UNKNOWN)")
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


def a_move(n: int, tag: str = "latest", previous: int | None = None, to_tag: str | None = None) -> Move:
    return Move(tag, "sha256:" + f"{n:x}".rjust(64, "0"), None if previous is None else "sha256:" +
                f"{previous:x}".rjust(64, "0"), "rollback", f"2024-01-{n % 28 + 1:02d}T00:00:00+00:00", "a@b", to_tag)


def put_legacy_log(client: FakeClient, text: str) -> None:
    """An ``imagectl-history`` manifest as earlier versions wrote it (all moves in one annotation)."""
    body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"digest": EMPTY_CONFIG, "size": 2},
            "layers": [], "annotations": {HISTORY_ANNOTATION: text}}
    client.blobs.add(EMPTY_CONFIG)
    client.put_manifest("r", HISTORY_TAG, Manifest.from_bytes(json.dumps(body).encode(), OCI_MANIFEST))


def test_each_move_is_a_record_of_its_own_written_with_one_put(registry_store):
    client, store = registry_store
    first, second = a_move(1), a_move(2, previous=1)
    store.record(first)  # the repository lacks the empty config blob: the PUT fails, the blob goes up, PUT again
    assert [c[0] for c in client.calls] == ["PUT", "upload", "PUT"] and EMPTY_CONFIG in client.blobs
    client.calls.clear()
    store.record(second)
    assert [c[0] for c in client.calls] == ["PUT"]  # no read, no merge, no verify, no blob request
    assert store.moves() == [first, second] and store.problems == []
    records = [t for t in client.tags if t.startswith(MOVE_PREFIX)]
    assert len(records) == 2 and all(key_of_record(t) == "latest" for t in records)
    assert store.tags() == []  # every imagectl-* tag is hidden from listings, plans and prune


def test_a_writer_racing_another_loses_neither_entry(registry_store):
    """The old log (read, append, write one manifest) lost the entry of a writer that wrote in between."""
    client, store = registry_store
    other = RegistryTagStore(client, store.repository)
    client.blobs.add(EMPTY_CONFIG)
    mine, theirs = a_move(1), a_move(2, "stable")
    client.hooks["PUT"] = lambda: other.record(theirs)  # the other writer lands while this one writes
    store.record(mine)
    assert sorted(m.tag for m in store.moves()) == ["latest", "stable"]


def test_concurrent_writers_in_threads_lose_no_entry(registry_store):
    client, store = registry_store
    client.blobs.add(EMPTY_CONFIG)
    stores = [RegistryTagStore(client, store.repository) for _ in range(4)]
    moves = [a_move(i) for i in range(1, 41)]
    threads = [threading.Thread(target=stores[i % 4].record, args=(moves[i],)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(m.to for m in store.moves()) == sorted(m.to for m in moves)


def test_record_names_sort_by_time_and_name_the_tag_moved():
    early = record_tag("latest", datetime(2024, 1, 1, 12, 0, 0, 5, tzinfo=timezone.utc), "f" * 12)
    late = record_tag("latest", datetime(2024, 1, 1, 12, 0, 0, 6, tzinfo=timezone.utc), "0" * 12)
    assert early < late and early.startswith("imagectl-move-20240101T120000000005Z-")
    long_tag = "9" * 120
    named = record_tag(long_tag, datetime(2024, 1, 1, tzinfo=timezone.utc), "a" * 12)
    assert len(named) <= 128 and key_of_record(named) == record_key(long_tag) != long_tag
    assert key_of_record("imagectl-move-by-someone-else") is None


def test_the_old_single_manifest_log_is_still_read_before_the_records(registry_store):
    client, store = registry_store
    old = [a_move(1, to_tag="t1"), a_move(2, previous=1, to_tag="2.3.1-cu121-py3.10-20240102T120000-0000000002"),
           a_move(3, previous=2)]
    put_legacy_log(client, json.dumps([asdict(m) for m in old]))
    read = store.moves()
    assert [m.to for m in read] == [m.to for m in old] and read[2].from_tag == old[1].to_tag  # named as it went
    store.record(a_move(4, "stable"))
    assert [m.tag for m in store.moves()] == ["latest", "latest", "latest", "stable"]
    last = store.last_move("latest")  # from the old log, the image it left named by an earlier move's tag
    assert last.to == old[2].to and last.from_tag == old[1].to_tag
    assert store.tags() == []


def test_last_move_reads_only_records_of_that_tag_newest_first(registry_store):
    client, store = registry_store
    client.blobs.add(EMPTY_CONFIG)
    store.record(a_move(1))
    store.record(a_move(2, previous=1))
    for n in range(3, 13):
        store.record(a_move(n, "stable"))
    client.calls.clear()
    last = store.last_move("latest")
    assert last.to == a_move(2).to
    assert [c[0] for c in client.calls] == ["list", "GET"]  # one listing, one record read
    assert store.last_move("canary") is None


def test_a_corrupt_old_log_and_foreign_records_are_reported_not_raised(registry_store):
    """The old store raised on an annotation another tool wrote, blocking history, rollback and promote."""
    client, store = registry_store
    put_legacy_log(client, "{this is not json")
    store.record(a_move(1))
    foreign = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"digest": EMPTY_CONFIG, "size": 2},
               "layers": [], "annotations": {"org.imagectl.move": '{"tag": 5}'}}
    client.put_manifest("r", MOVE_PREFIX + "20990101T000000000000Z-000000000000-latest",
                        Manifest.from_bytes(json.dumps(foreign).encode(), OCI_MANIFEST))
    client.put_manifest("r", MOVE_PREFIX + "zzz", Manifest.from_bytes(b'{"schemaVersion": 2}', OCI_MANIFEST))
    assert store.moves() == [a_move(1)]
    assert store.last_move("latest") == a_move(1)
    assert len(store.problems) == 3 and all("ignored" in p and "\n" not in p for p in store.problems)
    assert any(HISTORY_TAG in p and "unreadable move log" in p for p in store.problems)


def test_entries_an_old_log_cannot_explain_are_skipped_one_by_one():
    good = asdict(a_move(1))
    moves, problems = parse_moves(json.dumps([good, {"tag": "latest"}, 7, dict(good, to=None)]), "log")
    assert moves == [a_move(1)] and problems == ["log: 3 of 4 move entries unreadable; ignored"]
    assert parse_moves('{"a": 1}', "log") == ([], ["log: the move log is not a JSON list; ignored"])


def test_records_beyond_the_keep_are_trimmed_and_only_records(registry_store, monkeypatch):
    client, store = registry_store
    client.blobs.add(EMPTY_CONFIG)
    monkeypatch.setattr(store_module, "MOVES_KEEP", 3)
    image = client.put_image("v1", 1)
    fake = MOVE_PREFIX + "00000000T000000000000Z-000000000000-latest"  # an image under a record-shaped name
    client.tags[fake] = image
    for n in range(1, 6):
        store.record(a_move(n))
    store.last_move("latest")  # a listing: the next record knows how many there are
    store.record(a_move(6))
    left = sorted(t for t in client.tags if t.startswith(MOVE_PREFIX))
    assert fake in left and image in client.manifests  # never deletes what is not its own record
    assert [m.to for m in store.moves()] == [a_move(n).to for n in (3, 4, 5, 6)]  # 3 kept of the 6 listed, + 6


def test_an_auth_error_on_record_is_not_taken_for_a_missing_blob(registry_store):
    client, store = registry_store

    def refuse(repository, reference, manifest):
        raise AuthError("PUT refused")

    client.put_manifest = refuse
    with pytest.raises(AuthError):
        store.record(a_move(1))
    assert ("upload", EMPTY_CONFIG) not in client.calls


def test_the_log_ignores_fields_a_newer_imagectl_adds():
    text = ('[{"tag": "latest", "to": "sha256:1", "previous": null, "action": "build", "when": "t", "by": "a@b",'
            ' "reason": "new"}]')
    assert parse_moves(text, "log")[0][0].action == "build"


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


def test_a_corrupt_local_log_is_reported_and_kept_not_raised(tmp_path):
    store = EngineTagStore(TinyEngine(), parse_reference("ml/torch-2.3-cu121"), tmp_path)
    log = tmp_path / "ml_torch-2.3-cu121.json"
    log.write_text("[{not json")
    assert store.moves() == [] and store.last_move("latest") is None
    assert store.problems and "unreadable move log" in store.problems[0]
    store.record(a_move(1))
    assert store.moves() == [a_move(1)]
    assert (tmp_path / "ml_torch-2.3-cu121.unreadable").read_text() == "[{not json"


def test_the_engine_store_hides_reserved_tags_too(tmp_path):
    class Tagged(TinyEngine):
        def list_tags(self, repository):
            return ["latest", "imagectl-history", "imagectl-move-x"]

    assert EngineTagStore(Tagged(), parse_reference("ml/torch-2.3-cu121"), tmp_path).tags() == ["latest"]


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


# ---- issue 24, item 4: clocks, non-images; the whole flows against a real registry are in test_tags.py

AHEAD = timedelta(days=365)


def test_a_record_sorts_after_every_record_its_writer_saw_whatever_the_clocks():
    now = datetime(2024, 6, 1, tzinfo=timezone.utc)
    future = record_tag("latest", now + AHEAD, "a" * 12)
    assert record_time(now, []) == now and record_time(now, ["imagectl-move-odd"]) == now
    assert record_time(now, [future]) == now + AHEAD + timedelta(microseconds=1)
    assert record_time(now + 2 * AHEAD, [future]) == now + 2 * AHEAD


def test_moves_after_a_record_from_a_clock_a_year_ahead_are_last(registry_store):
    client, store = registry_store
    client.blobs.add(EMPTY_CONFIG)
    RegistryTagStore(client, store.repository, clock=lambda: datetime.now(timezone.utc) + AHEAD).record(a_move(1))
    store.log_position("latest")  # the listing every move makes before it writes
    store.record(a_move(2, previous=1))
    store.log_position("latest")
    store.record(a_move(3, previous=2))
    assert [m.to for m in RegistryTagStore(client, store.repository).moves()] == [a_move(n).to for n in (1, 2, 3)]
    assert RegistryTagStore(client, store.repository).last_move("latest") == a_move(3, previous=2)


def test_moves_since_a_position_are_other_writers_moves_of_that_tag(registry_store):
    client, store = registry_store
    client.blobs.add(EMPTY_CONFIG)
    store.record(a_move(1))
    position = store.log_position("latest")
    other = RegistryTagStore(client, store.repository)
    other.record(a_move(2, previous=1))
    other.record(a_move(3, "stable"))
    store.record(a_move(4, previous=2))  # this store's own record is not another writer's
    assert store.moves_since("latest", position) == [a_move(2, previous=1)]


def test_a_tag_is_never_pointed_at_an_artifact(registry_store):
    client, store = registry_store
    client.blobs.add(EMPTY_CONFIG)
    store.record(a_move(1))
    record = next(t for t in client.tags if t.startswith(MOVE_PREFIX))
    client.calls.clear()
    with pytest.raises(NotAnImageError, match=r"is not an image \(application/vnd.imagectl.move.v1\+json\); "
                                              "refusing to point canary at it"):
        store.point("canary", client.tags[record])
    assert [c[0] for c in client.calls] == ["GET"] and "canary" not in client.tags
