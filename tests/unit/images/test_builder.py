"""The build orchestration (``build_one``, reuse, build, ``build_many``) over a fake engine and in-memory tag stores.

Hermetic: the base image's digest comes from a stand-in for ``resolve_base_digest`` (one test runs the real one
against a mirror on a closed loopback port), a registry's tags are FakeStores (``open_tag_store`` patched), and
any attempt to open a registry connection fails the test.  Immutable tags are stamped by a fake clock, a minute
apart, so their names are known.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import imagectl.registry.access
from enginefake import FakeEngine, FakeRegistry, check_report, push_by_digest
from imagectl.config import Config
from imagectl.errors import BuildError, ConfigError, OperationError
from imagectl.images import builder, context_dirs, tester
from imagectl.owner import this_process
from imagectl.images.base_digest import resolve_base_digest
from imagectl.images.build_key import build_key
from imagectl.image_spec import ImageSpec
from imagectl.images.builder import base_resolver, build_many, build_one, plan_many
from imagectl.images.plan import BuildOptions, BuildRequest, plan_build
from imagectl.images.publish import Unattested
from imagectl.images.trace import Trace
from imagectl.lock.make import lock_for_build
from imagectl.imagecheck.run import CHECK_COMMAND
from imagectl.labels import BUILD_KEY, ENGINE, NCCL, OCI_BASE_DIGEST, OCI_BASE_NAME, PROFILE, labels_for
from imagectl.matrix.names import resolve_profile
from imagectl.registry import RetryPolicy
from imagectl.registry.client import connect
from imagectl.tags.moves import rollback
from imagectl.tags.naming import MOVING_TAG, immutable_parts, is_immutable, short_digest

REGISTRY = "registry.example.com"
NAME = "torch-2.3-cu121"
REPO = f"{REGISTRY}/ml/{NAME}"
BASE = "docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04"
BASE_DIGEST = "sha256:" + "b" * 64
START = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


@dataclass
class Clock:
    now: datetime = START
    step: timedelta = timedelta(minutes=1)


@dataclass
class BaseDigests:
    """A stand-in for ``resolve_base_digest``: the digest of each base by its reference (else BASE_DIGEST)."""

    digests: dict[str, str] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def __call__(self, base, config, engine) -> str:
        self.asked.append(str(base))
        return self.digests.get(str(base), BASE_DIGEST)


@dataclass
class Logs:
    lines: dict[str, list[str]] = field(default_factory=dict)

    def sink(self, name: str):
        return self.lines.setdefault(name, []).append


@pytest.fixture(autouse=True)
def hermetic(monkeypatch, tmp_path):
    """Caches, state and Docker config under tmp_path; opening any registry connection fails the test."""
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "DOCKER_CONFIG"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)

    def no_registry(host, **_):
        raise AssertionError(f"a unit test tried to reach registry {host}")

    monkeypatch.setattr(imagectl.registry.access, "connect", no_registry)


@pytest.fixture(autouse=True)
def clock(monkeypatch) -> Clock:
    """Immutable tags stamped 2024-05-01T12:00:00 UTC, then one ``step`` later each."""
    clock = Clock()
    real = builder.immutable_tag

    def stamped(profile, key, when=None, **kwargs):
        tag = real(profile, key, when or clock.now, **kwargs)
        clock.now += clock.step
        return tag

    monkeypatch.setattr(builder, "immutable_tag", stamped)
    return clock


@pytest.fixture(autouse=True)
def attested(monkeypatch) -> list:
    """Attesting reaches the registry (tests/integration/test_evidence.py): here it only records the images."""
    calls: list = []

    def record(plan, config, engine, built, trace):
        calls.append(built.digest)
        return []

    monkeypatch.setattr(builder, "attest_build", record)
    return calls


@pytest.fixture(autouse=True)
def bare(monkeypatch) -> set[str]:
    """The registry push is the fake engine's (by digest, as ``build`` pushes); reading an image's attestations
    reaches the registry, so here the digests a test puts in the returned set lack them, and the others carry them
    (every image the fake ``attest_build`` saw carries them)."""
    missing: set[str] = set()

    def unattested(store, config, repo, tag, digest):
        return Unattested(tag, digest, ("sbom, provenance, check report",)) if digest in missing else None

    monkeypatch.setattr(builder, "push_by_digest", push_by_digest)
    monkeypatch.setattr(builder, "unattested", unattested)
    return missing


@pytest.fixture(autouse=True)
def sized(monkeypatch) -> list:
    """Reading an image's expected size reaches its index and its base's registry (tests/integration/
    test_size_budget.py): here no budget applies, and ``build --plan`` records the platforms it would size."""
    calls: list = []

    def expected(plans, config, log, *, always=False):
        calls.append([plan.platform for plan in plans] if always else None)

    monkeypatch.setattr(builder, "expected_gate", expected)
    return calls


@pytest.fixture(autouse=True)
def bases(monkeypatch) -> BaseDigests:
    found = BaseDigests()
    monkeypatch.setattr(builder, "resolve_base_digest", found)
    return found


@pytest.fixture
def registry(monkeypatch) -> FakeRegistry:
    fake = FakeRegistry()
    monkeypatch.setattr(builder, "open_tag_store", fake.open_tag_store)
    return fake


@pytest.fixture
def engine(registry) -> FakeEngine:
    return FakeEngine(registry)


@pytest.fixture
def profile(matrix):
    return resolve_profile(NAME, matrix)


def with_registry(**changes) -> Config:
    return Config(registry_url=REGISTRY, namespace="ml", **changes)


def build(profile, config, engine, logs: Logs | None = None, **options):
    """Plan and build one profile as ``build_many`` does, but raising what the build raises."""
    trace = Trace((logs or Logs()).sink(profile.name))
    plan = plan_build(BuildRequest(profile, BuildOptions(**options)), config, base_resolver(config, engine), trace)
    result = build_one(plan, config, engine, trace)
    result.phases = trace.seconds
    return result


def many(profiles, config, engine, jobs: int = 1, logs: Logs | None = None, **options):
    """``build_many`` of ``profiles`` with the same options."""
    requests = [BuildRequest(p, BuildOptions(**options)) for p in profiles]
    return build_many(requests, config, engine, jobs, (logs or Logs()).sink)


def plan_one(profile, config, engine, **options):
    """What ``build --plan`` says of one profile."""
    return plan_many([BuildRequest(profile, BuildOptions(**options))], config, engine)[0]


def test_fresh_build_tags_pushes_and_moves_latest(profile, engine, registry, bases, attested):
    store = registry.store(REPO)
    seen = []

    def pointed(tag, target):
        seen.append((tag, target, list(engine.pushes), list(attested), engine.list_tags(REPO)))
        if tag != MOVING_TAG:
            store.hooks["point"] = pointed  # a hook is called once; see the moving tag's too
    store.hooks["point"] = pointed
    logs = Logs()
    result = build(profile, with_registry(), engine, logs)

    [made] = engine.builds
    key = made.labels[BUILD_KEY]
    assert key == build_key(made.files, BASE_DIGEST, {})  # the key of the context the engine got
    tag = f"2.3.1-cu121-py3.10-20240501T120000-{key[:10]}-{made.image[7:19]}"
    [(pushed_repo, pushed_tag, digest)] = engine.pushes
    assert (result.profile, result.status, result.tag, result.digest) == (NAME, "built", tag, digest)
    assert is_immutable(result.tag) and immutable_parts(result.tag)["key"] == key[:10]
    assert (pushed_repo, pushed_tag) == (REPO, "")  # by digest: no tag names the image before it is attested
    assert bases.asked == [BASE] and registry.opened == [REPO]
    assert f"FROM {BASE}@{BASE_DIGEST}" in made.dockerfile
    assert engine.runs[0].image == made.image and engine.runs[0].command == CHECK_COMMAND
    assert store.tag_map == {tag: digest, MOVING_TAG: digest}
    # the immutable tag after the push and the attestations, latest after it, the local tags after the registry's
    assert seen == [(tag, digest, [(REPO, "", digest)], [digest], []),
                    (MOVING_TAG, digest, [(REPO, "", digest)], [digest], [tag])]
    [logged] = store.log
    assert (logged.tag, logged.to, logged.previous, logged.action) == (MOVING_TAG, digest, None, "build")
    assert logged.to_tag == tag
    assert engine.tags_of(REPO) == {tag: made.image, MOVING_TAG: made.image}
    assert result.size == engine.images[made.image].size > 0 and result.notes == []
    assert "check: ok    torch version: expected 2.3.1, found 2.3.1" in logs.lines[NAME]
    assert "check: ok    nccl loaded by torch: expected 2.20.5, found 2.20.5" in logs.lines[NAME]


def test_zstd_asked_of_the_docker_engine_is_a_note_not_silence(profile, engine, registry):
    result = build(profile, with_registry(registry_compression="zstd"), engine)
    assert engine.name == "docker" and result.status == "built"
    assert result.notes == ["[registry] compression = zstd is the buildah engine's: the Docker engine pushed gzip "
                            "layers"]


def test_fresh_build_into_the_local_engine_tags_locally_and_pushes_nothing(profile, tmp_path):
    engine = FakeEngine()  # no registry: the real open_tag_store gives the engine's own store
    result = build(profile, Config(namespace="ml"), engine)

    [made] = engine.builds
    assert result.status == "built" and result.digest == made.image and engine.pushes == []
    assert engine.tags_of(f"localhost/ml/{NAME}") == {result.tag: made.image, MOVING_TAG: made.image}
    assert immutable_parts(result.tag)["key"] == made.labels[BUILD_KEY][:10]
    again = build(profile, Config(namespace="ml"), engine)
    assert (again.status, again.tag, again.digest, len(engine.builds)) == ("reused", result.tag, made.image, 1)
    logs = list((tmp_path / "xdg_state_home" / "imagectl" / "history").glob("*.json"))
    assert [p.name for p in logs] == [f"localhost_ml_{NAME}.json"] and '"action": "build"' in logs[0].read_text()


def test_unchanged_inputs_are_reused_without_building(profile, engine, registry):
    first = build(profile, with_registry(), engine)
    store = registry.store(REPO)
    store.calls.clear()
    logs = Logs()
    again = build(profile, with_registry(), engine, logs)

    key = engine.builds[0].labels[BUILD_KEY]
    assert (again.status, again.tag, again.digest, again.notes) == ("reused", first.tag, first.digest, [])
    assert len(engine.builds) == 1 and len(engine.runs) == 1 and len(engine.pushes) == 1
    assert store.calls[0] == ("tag_with_key", key)
    assert ("point", MOVING_TAG, first.digest) not in store.calls and len(store.log) == 1
    assert logs.lines[NAME][-1] == f"reusing {REPO}:{first.tag}: an image with build key {key[:10]} exists"


def test_reuse_keeps_a_rolled_back_latest(profile, engine, registry):
    older = build(profile, with_registry(build_args={"PIP_PROXY": "http://a:3128"}), engine)
    newer = build(profile, with_registry(build_args={"PIP_PROXY": "http://b:3128"}), engine)
    store = registry.store(REPO)
    assert store.tag_map[MOVING_TAG] == newer.digest
    assert rollback(store).target == older.digest
    moves = len(store.log)

    again = build(profile, with_registry(build_args={"PIP_PROXY": "http://b:3128"}), engine)
    assert (again.status, again.tag, again.digest) == ("reused", newer.tag, newer.digest)
    assert store.tag_map[MOVING_TAG] == older.digest and len(store.log) == moves and len(engine.builds) == 2
    assert again.notes == [f"{MOVING_TAG} stays on {short_digest(older.digest)} (a rollback or newer build); "
                           "--force rebuilds and moves it"]


def test_reuse_sets_latest_when_the_repository_has_none(profile, engine, registry):
    first = build(profile, with_registry(), engine)
    store = registry.store(REPO)
    del store.tag_map[MOVING_TAG]

    again = build(profile, with_registry(), engine)
    assert (again.status, again.notes, len(engine.builds)) == ("reused", [], 1)
    assert store.tag_map[MOVING_TAG] == first.digest
    last = store.log[-1]
    assert (last.tag, last.to, last.previous, last.action) == (MOVING_TAG, first.digest, None, "build")
    assert last.to_tag == first.tag


def test_a_failed_attach_leaves_the_image_untagged_and_the_next_build_tags_it(profile, engine, registry,
                                                                                attested, monkeypatch):
    first = build(profile, with_registry(), engine)
    store = registry.store(REPO)
    before, moves = dict(store.tag_map), list(store.log)

    def refused(plan, config, engine, built, trace):
        raise BuildError(f"cannot attest {built.digest}: registry refused the artifact (500)", "attest")

    monkeypatch.setattr(builder, "attest_build", refused)
    options = {"build_args": {"PIP_PROXY": "http://p:3128"}}  # other inputs: another key, a new image
    with pytest.raises(BuildError, match="cannot attest") as failed:
        build(profile, with_registry(**options), engine)
    [_, (_, tag, digest)] = engine.pushes
    assert failed.value.step == "attest" and tag == "" and digest in store.manifests  # pushed by digest alone
    assert store.tag_map == before and store.log == moves  # no tag names it, latest stays
    assert engine.tags_of(REPO) == {first.tag: engine.builds[0].image, MOVING_TAG: engine.builds[0].image}

    monkeypatch.setattr(builder, "attest_build", lambda plan, config, engine, built, trace: attested.append(
        built.digest) or [])
    again = build(profile, with_registry(**options), engine)  # nothing tagged it: built, attested, then tagged
    assert again.status == "built" and attested[-1] == again.digest == store.tag_map[MOVING_TAG]
    assert store.tag_map[again.tag] == again.digest


def test_an_image_found_without_its_attestations_is_rebuilt_and_latest_never_moves_onto_it(profile, engine,
                                                                                            registry, bare, attested):
    engine.rebuild_same = True  # a rebuild from the cache: the very same image
    first = build(profile, with_registry(), engine)
    store = registry.store(REPO)
    del store.tag_map[MOVING_TAG]  # as a build of an older imagectl left it: tagged, attaching failed, no latest
    bare.add(first.digest)
    seen = []
    store.hooks["point"] = lambda tag, target: seen.append((tag, target, list(attested)))
    logs = Logs()

    again = build(profile, with_registry(), engine, logs)
    assert again.status == "built" and len(engine.builds) == 2 and len(engine.runs) == 2  # built and checked again
    assert again.digest == first.digest and attested == [first.digest, first.digest]
    assert seen[0] == (again.tag, first.digest, [first.digest, first.digest])  # tagged once attested again
    assert store.tag_map[MOVING_TAG] == first.digest and store.log[-1].to_tag == again.tag
    assert again.notes[0] == (f"rebuilt: {first.tag} ({short_digest(first.digest)}) lacked its attestations (sbom, "
                              "provenance, check report); the rebuild is the same image: its attestations are now "
                              "attached to it")
    assert (f"not reusing {REPO}:{first.tag} ({short_digest(first.digest)}): it has the build key but lacks its "
            "attestations (sbom, provenance, check report missing); rebuilding it, and latest moves only onto an "
            "attested image") in logs.lines[NAME]


def test_an_attested_image_is_reused_as_before(profile, engine, registry, bare):
    first = build(profile, with_registry(), engine)
    bare.add("sha256:" + "0" * 64)  # another image lacks them: not this one
    again = build(profile, with_registry(), engine)
    assert (again.status, again.digest, len(engine.builds)) == ("reused", first.digest, 1)


def test_force_builds_again_and_moves_latest(profile, engine, registry):
    first = build(profile, with_registry(), engine)
    again = build(profile, with_registry(), engine, force=True, no_cache=True)

    assert again.status == "built" and len(engine.builds) == 2 and engine.builds[1].no_cache
    assert again.tag != first.tag and again.digest != first.digest
    assert immutable_parts(again.tag)["key"] == immutable_parts(first.tag)["key"]  # same inputs, same key
    store = registry.store(REPO)
    assert store.tag_map == {first.tag: first.digest, again.tag: again.digest, MOVING_TAG: again.digest}
    assert [(m.to, m.previous, m.action) for m in store.log] == [(first.digest, None, "build"),
                                                                 (again.digest, first.digest, "build")]


def test_index_credentials_reach_the_context_but_never_the_plan_files_or_the_cache(profile, engine, registry,
                                                                                   tmp_path):
    password = "S3cr3t-0f-the-index"
    config = with_registry(pip_index_url=f"https://user:{password}@pypi.example.com/simple")
    plan = plan_build(BuildRequest(profile), config, base_resolver(config, engine), Trace())
    first = build(profile, config, engine)
    again = build(profile, config, engine, force=True)

    assert (first.status, again.status, len(engine.builds)) == ("built", "built", 2)
    for made in engine.builds:
        assert password.encode() in made.files["imagectl-pip.netrc"]
    assert not [name for name, content in plan.files.items() if password.encode() in content]  # held apart
    assert password not in repr(plan) and password.encode() in plan.netrc
    cache = tmp_path / "xdg_cache_home" / "imagectl"
    entries = [p for p in cache.rglob("*") if p.is_file()]
    assert not [p for p in entries if password.encode() in p.read_bytes()]


@pytest.mark.parametrize("lie, crash, message", [
    ({NCCL: "2.19.3"}, 0, "in-image check failed: nccl loaded by torch: expected 2.20.5, found 2.19.3"),
    ({}, 3, "the in-image check exited with status 3"),
])
def test_failed_check_leaves_latest_and_creates_no_tag(profile, engine, registry, lie, crash, message):
    first = build(profile, with_registry(), engine)
    store = registry.store(REPO)
    before, moves, local = dict(store.tag_map), list(store.log), engine.tags_of(REPO)
    engine.lies.update(lie)
    engine.check_status = crash

    with pytest.raises(BuildError, match=message) as failed:
        build(profile, with_registry(build_args={"PIP_PROXY": "http://p:3128"}), engine)
    assert failed.value.step == "check"
    assert ("FAIL  nccl loaded by torch: expected 2.20.5, found 2.19.3" in failed.value.log_tail) == bool(lie)
    assert len(engine.builds) == 2 and len(engine.pushes) == 1
    assert store.tag_map == before and store.tag_map[MOVING_TAG] == first.digest and store.log == moves
    assert engine.tags_of(REPO) == local


def test_failed_engine_build_leaves_nothing_tagged(profile, engine, registry):
    error = "No matching distribution found for torch==2.3.1"
    engine.fail_builds(error)
    with pytest.raises(BuildError, match=f"build failed: {error}") as failed:
        build(profile, with_registry(), engine)

    assert failed.value.step == "build" and failed.value.log_tail.endswith(f"ERROR: {error}")
    assert [b.image for b in engine.builds] == [""] and engine.runs == [] and engine.pushes == []
    assert engine.tags_of(REPO) == {} and registry.store(REPO).tag_map == {} and registry.store(REPO).log == []


def test_failed_push_leaves_the_registry_and_latest(profile, engine, registry):
    first = build(profile, with_registry(), engine)
    store = registry.store(REPO)
    before = dict(store.tag_map)
    engine.push_failure = "denied: requested access to the resource is denied"

    with pytest.raises(BuildError, match="push of .* failed: denied") as failed:
        build(profile, with_registry(build_args={"PIP_PROXY": "http://p:3128"}), engine)
    assert failed.value.step == "push" and store.tag_map == before and store.tag_map[MOVING_TAG] == first.digest
    assert engine.tags_of(REPO)[MOVING_TAG] == engine.builds[0].image  # the local latest did not move either


def test_a_refused_local_latest_is_a_note_after_the_registry_moved(profile, engine, registry):
    engine.tag_failures.add(MOVING_TAG)
    result = build(profile, with_registry(), engine)

    assert result.status == "built" and registry.store(REPO).tag_map[MOVING_TAG] == result.digest
    assert result.notes == [f"local tag {MOVING_TAG} not updated: engine: tag {REPO}:{MOVING_TAG}: refused"]
    assert MOVING_TAG not in engine.tags_of(REPO)


def test_build_many_reports_one_failure_and_builds_the_others(matrix, engine, registry):
    names = ["torch-2.3-cu121", "torch-2.3-cu118", "torch-2.7-cu128"]
    profiles = [resolve_profile(name, matrix) for name in names]
    engine.fail_builds("pip: resolution impossible", profile="torch-2.3-cu118")
    logs = Logs()

    results = many(profiles, with_registry(), engine, jobs=2, logs=logs)
    assert [(r.profile, r.status) for r in results] == [(names[0], "built"), (names[1], "failed"), (names[2], "built")]
    assert results[1].error == "build: build failed: pip: resolution impossible" and results[1].tag == ""
    assert results[1].log_tail[-1] == "ERROR: pip: resolution impossible"  # the CLI shows it where not streamed
    assert not any(line.startswith("| ") for line in logs.lines[names[1]])
    for result in (results[0], results[2]):
        store = registry.store(f"{REGISTRY}/ml/{result.profile}")
        assert store.tag_map == {result.tag: result.digest, MOVING_TAG: result.digest}
    assert registry.store(f"{REGISTRY}/ml/torch-2.3-cu118").tag_map == {}
    assert sorted(b.labels[BUILD_KEY][:10] for b in engine.builds if b.image) == sorted(
        immutable_parts(r.tag)["key"] for r in (results[0], results[2]))


def test_build_many_turns_other_errors_into_failed_results(matrix, engine, registry, bases, monkeypatch):
    def refuse(base, config, engine):
        raise OperationError("the mirror is down")

    monkeypatch.setattr(builder, "resolve_base_digest", refuse)
    results = many([resolve_profile(NAME, matrix)], with_registry(), engine)
    assert [(r.status, r.error) for r in results] == [("failed", "the mirror is down")] and engine.builds == []


@pytest.mark.parametrize("key", [b"junk", b""])
def test_build_many_refuses_a_key_that_cannot_sign_before_anything_is_planned(matrix, engine, registry, bases,
                                                                               tmp_path, key):
    path = tmp_path / "attest.pem"
    path.write_bytes(key)
    with pytest.raises(ConfigError, match=rf"\[attest\] key {path}: not a readable unencrypted PEM private key"):
        many([resolve_profile(NAME, matrix)], with_registry(attest_key=path), engine)
    assert bases.asked == [] and engine.builds == [] and engine.pushes == [] and registry.opened == []


def test_a_changed_build_arg_changes_the_build_key(profile, engine, registry):
    a = build(profile, with_registry(build_args={"PIP_PROXY": "http://a:3128"}), engine)
    b = build(profile, with_registry(build_args={"PIP_PROXY": "http://b:3128"}), engine)

    first, second = engine.builds
    assert (a.status, b.status) == ("built", "built") and first.files == second.files  # same context, other arg
    assert second.build_args == {"PIP_PROXY": "http://b:3128"}
    assert first.labels[BUILD_KEY] != second.labels[BUILD_KEY]
    assert first.labels[BUILD_KEY] == build_key(first.files, BASE_DIGEST, {"PIP_PROXY": "http://a:3128"})
    back = build(profile, with_registry(build_args={"PIP_PROXY": "http://a:3128"}), engine)
    assert (back.status, back.tag, len(engine.builds)) == ("reused", a.tag, 2)


def test_a_new_base_digest_builds_again(profile, engine, registry, bases):
    first = build(profile, with_registry(), engine)
    bases.digests[BASE] = "sha256:" + "c" * 64  # the upstream tag was pushed again
    again = build(profile, with_registry(), engine)

    assert again.status == "built" and immutable_parts(again.tag)["key"] != immutable_parts(first.tag)["key"]
    assert f"FROM {BASE}@sha256:{'c' * 64}" in engine.builds[1].dockerfile
    assert engine.images[engine.builds[1].image].labels[OCI_BASE_DIGEST] == "sha256:" + "c" * 64


def test_added_context_files_reach_the_build_and_the_key(profile, engine, registry, tmp_path):
    files = tmp_path / "ctx"
    (files / "wheels").mkdir(parents=True)
    (files / "wheels" / "team.whl").write_bytes(b"wheel v1")
    first = build(profile, with_registry(context_dirs=(files,)), engine)
    (files / "wheels" / "team.whl").write_bytes(b"wheel v2, longer")
    again = build(profile, with_registry(context_dirs=(files,)), engine)

    assert engine.builds[0].files["files/wheels/team.whl"] == b"wheel v1"
    assert engine.builds[1].files["files/wheels/team.whl"] == b"wheel v2, longer"
    assert (first.status, again.status) == ("built", "built") and first.tag != again.tag


def test_the_built_image_carries_the_profile_labels_the_check_compares(profile, engine, registry):
    build(profile, with_registry(), engine)
    labels = engine.images[engine.builds[0].image].labels
    lock = lock_for_build(profile, with_registry()).lock
    spec = ImageSpec(profile, base_digest=BASE_DIGEST, lock=lock)
    base = profile.base_image.with_digest(BASE_DIGEST)
    assert {k: v for k, v in labels.items() if k not in (BUILD_KEY, ENGINE)} == labels_for(spec, base)
    assert labels[PROFILE] == NAME and labels[OCI_BASE_NAME] == BASE
    assert check_report(labels)["framework"]["nccl"] == profile.variant.nccl == "2.20.5"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_base_digest_falls_back_to_the_engine_copy_of_the_mirrored_base(profile, engine, registry, monkeypatch):
    """The real resolve_base_digest: the mirror's HEAD is refused at once (retries without sleeping), the engine
    knows the mirrored base by its repo digest."""
    port = closed_port()
    mirror = f"127.0.0.1:{port}/hub"
    monkeypatch.setattr(builder, "resolve_base_digest", resolve_base_digest)
    no_wait = functools.partial(connect, retry=RetryPolicy(sleep=lambda s: None))
    monkeypatch.setattr(imagectl.registry.access, "connect", no_wait)
    digest = "sha256:" + "d" * 64
    engine.add_image(f"{mirror}/{BASE.split('/', 1)[1]}", repo_digests=(f"{mirror}/nvidia/cuda@{digest}",))

    result = build(profile, with_registry(mirrors={"docker.io": mirror}), engine)
    assert result.status == "built"
    assert f"FROM {mirror}/nvidia/cuda:12.1.1-runtime-ubuntu22.04@{digest}" in engine.builds[0].dockerfile
    labels = engine.images[engine.builds[0].image].labels
    assert (labels[OCI_BASE_NAME], labels[OCI_BASE_DIGEST]) == (BASE, digest)  # the public name, the mirror's digest


def test_a_changed_ca_bundle_builds_again(profile, engine, registry, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nold\n-----END CERTIFICATE-----\n")
    first = build(profile, with_registry(ca_bundle=ca), engine)
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\nrotated\n-----END CERTIFICATE-----\n")
    again = build(profile, with_registry(ca_bundle=ca), engine)

    assert first.status == "built" and engine.builds[0].files["ca.pem"].endswith(b"old\n-----END CERTIFICATE-----\n")
    assert again.status == "built" and len(engine.builds) == 2
    assert engine.builds[1].files["ca.pem"] == ca.read_bytes()


# -- immutable tags are unique per image and never overwritten (issue 9, item 3)

CLASH = "2.3.1-cu121-py3.10-20240501T120000-aaaaaaaaaa-bbbbbbbbbbbb"


def test_two_forced_builds_in_the_same_second_get_two_immutable_tags(profile, engine, registry, clock):
    clock.step = timedelta(0)  # both tags are stamped 2024-05-01T12:00:00
    first = build(profile, with_registry(), engine, force=True)
    second = build(profile, with_registry(), engine, force=True, no_cache=True)

    a, b = (immutable_parts(r.tag) for r in (first, second))
    assert (a["stamp"], a["key"]) == (b["stamp"], b["key"]) and first.tag != second.tag
    assert (a["image"], b["image"]) == (engine.builds[0].image[7:19], engine.builds[1].image[7:19])
    assert first.digest != second.digest
    store = registry.store(REPO)
    assert store.tag_map == {first.tag: first.digest, second.tag: second.digest, MOVING_TAG: second.digest}


def test_an_immutable_tag_naming_another_image_is_never_overwritten(profile, engine, registry, monkeypatch):
    monkeypatch.setattr(builder, "immutable_tag", lambda profile, key, when=None, image="": CLASH)
    store = registry.store(REPO)
    other = "sha256:" + "e" * 64
    store.add(CLASH, other)  # another image already has the name (written by someone else)

    with pytest.raises(BuildError, match=f"{REPO}:{CLASH} already names another image") as failed:
        build(profile, with_registry(), engine, force=True)
    assert failed.value.step == "tag" and "never overwritten" in str(failed.value)
    assert engine.pushes == [] and store.tag_map == {CLASH: other} and store.log == []
    assert ("digest", CLASH) in store.calls and engine.tags_of(REPO) == {}


def test_an_immutable_tag_already_naming_this_image_is_not_pushed_again(profile, engine, registry, clock):
    clock.step = timedelta(0)
    engine.rebuild_same = True  # --force over a warm cache: the very same image, so the very same name
    first = build(profile, with_registry(), engine, force=True)
    logs = Logs()
    again = build(profile, with_registry(), engine, logs, force=True)

    assert (again.status, again.tag, again.digest) == ("built", first.tag, first.digest)
    assert len(engine.builds) == 2 and len(engine.pushes) == 1
    assert f"{REPO}:{first.tag} already names this image ({short_digest(first.digest)}): not pushed again" in (
        logs.lines[NAME])
    assert registry.store(REPO).tag_map == {first.tag: first.digest, MOVING_TAG: first.digest}


def test_a_local_immutable_tag_naming_another_image_is_never_moved(profile, monkeypatch):
    engine = FakeEngine()  # no registry: the engine's own tags are the store
    monkeypatch.setattr(builder, "immutable_tag", lambda profile, key, when=None, image="": CLASH)
    other = engine.add_image(f"localhost/ml/{NAME}:{CLASH}")

    with pytest.raises(BuildError, match="already names another image") as failed:
        build(profile, Config(namespace="ml"), engine, force=True)
    assert failed.value.step == "tag" and engine.tags_of(f"localhost/ml/{NAME}") == {CLASH: other}


def test_immutable_tags_with_and_without_the_image_part_are_read_alike(profile):
    image = "sha256:" + "0123456789ab" + "f" * 52
    when = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
    new = builder.immutable_tag(profile, "c" * 64, when, image=image)
    old = builder.immutable_tag(profile, "c" * 64, when)
    assert new == f"{old}-0123456789ab" and old == "2.3.1-cu121-py3.10-20240501T120000-cccccccccc"
    assert is_immutable(new) and is_immutable(old)
    assert immutable_parts(new) == {**immutable_parts(old), "image": "0123456789ab"}
    assert "image" not in immutable_parts(old)
    from imagectl.tags.naming import image_part, tag_time, tags_with_key

    assert tag_time(new) == tag_time(old) == when and tags_with_key([old, new, "latest"], "c" * 64) == [new, old]
    assert not is_immutable(f"{old}-0123456789") and not is_immutable(f"{old}-0123456789AB")
    assert image_part("0123456789abcdef") == "0123456789ab" and len(image_part("not hex at all")) == 12


# -- build contexts under the cache dir, swept when their process died (issue 9, "Also")


def contexts(tmp_path) -> Path:
    return tmp_path / "xdg_cache_home" / "imagectl" / "contexts"


def test_a_build_context_lives_under_the_cache_dir_and_is_removed(profile, engine, registry, tmp_path):
    build(profile, with_registry(), engine)
    [made] = engine.builds
    context = Path(made.context)
    assert context.parent == contexts(tmp_path) and not context.exists()
    assert context.name.startswith(f"{this_process().token}-{context_dirs._host()}-")  # PID.START: its process
    assert list(contexts(tmp_path).iterdir()) == []


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_sweep_removes_only_old_contexts_of_dead_processes_of_this_host(tmp_path):
    root = tmp_path / "contexts"
    host, dead, old = context_dirs._host(), dead_pid(), time.time() - 120
    names = {
        f"{dead}-{host}-gone": (old, False),  # dead and old: swept
        f"{dead}-{host}-fresh": (time.time(), True),  # dead but younger than a minute
        f"{os.getpid()}-{host}-mine": (old, True),  # alive (this process)
        f"{dead}-other_host-x": (old, True),  # another host's (a shared cache dir)
        "imagectl-notours": (old, True),
        f"0-{host}-zero": (old, True),  # PID 0 is no process of ours
    }
    for name, (mtime, _) in names.items():
        (root / name / "files").mkdir(parents=True)
        (root / name / "Dockerfile").write_text("FROM scratch\n")
        os.utime(root / name, (mtime, mtime))

    removed = context_dirs.sweep_contexts(root)
    assert removed == [root / f"{dead}-{host}-gone"]
    assert sorted(p.name for p in root.iterdir()) == sorted(n for n, (_, kept) in names.items() if kept)
    assert context_dirs.sweep_contexts(tmp_path / "missing") == []


def test_a_context_left_by_kill_9_is_swept_by_the_next_build(profile, engine, registry, tmp_path):
    code = ("import sys, time\nfrom imagectl.images.context_dirs import build_context\n"
            "with build_context() as d:\n    print(d, flush=True)\n    time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(builder.__file__).parents[2])})
    try:
        left = Path(child.stdout.readline().strip())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert left.parent == contexts(tmp_path) and left.is_dir()  # kill -9: no cleanup ran
    a_minute_ago = time.time() - 61
    os.utime(left, (a_minute_ago, a_minute_ago))

    build(profile, with_registry(), engine)
    assert not left.exists() and list(contexts(tmp_path).iterdir()) == []


# -- imagectl test: the image the registry's moving tag points to, by digest (issue 9, "Also")


@pytest.fixture
def registry_for_test(registry, monkeypatch) -> FakeRegistry:
    monkeypatch.setattr(tester, "open_tag_store", registry.open_tag_store)
    return registry


def test_test_checks_the_registry_latest_by_digest_not_the_local_latest(matrix, profile, engine, registry_for_test):
    older = build(profile, with_registry(build_args={"PIP_PROXY": "http://a:3128"}), engine)
    newer = build(profile, with_registry(build_args={"PIP_PROXY": "http://b:3128"}), engine)
    assert rollback(registry_for_test.store(REPO)).target == older.digest  # as if rolled back on another machine
    older_image, newer_image = engine.builds[0].image, engine.builds[1].image
    assert engine.tags_of(REPO)[MOVING_TAG] == newer_image  # the local latest is still the newer image

    image, findings = tester.check_image(NAME, matrix, with_registry(), engine, Logs().sink(NAME))
    assert image == f"{REPO}@{older.digest}" and newer.digest not in image
    assert engine.runs[-1].image == older_image and engine.pulls == []
    assert findings and all(f.ok for f in findings if f.severity == "error")


def test_test_pulls_the_registry_latest_when_the_engine_lacks_it(matrix, profile, engine, registry_for_test):
    built = build(profile, with_registry(), engine)
    ref = f"{REPO}@{built.digest}"
    engine.remote[ref] = engine.images.pop(engine.builds[0].image)  # only in the registry now

    image, _ = tester.check_image(NAME, matrix, with_registry(), engine, Logs().sink(NAME))
    assert image == ref and engine.pulls == [ref] and engine.runs[-1].image == engine.builds[0].image


def test_test_without_a_registry_latest_says_so(matrix, engine, registry_for_test):
    with pytest.raises(OperationError, match=f"{REPO}:{MOVING_TAG} does not exist in the registry"):
        tester.target_image(NAME, matrix, with_registry(), engine)
    assert engine.pulls == [] and engine.runs == []


def test_test_without_a_registry_is_the_local_latest(matrix, engine):
    assert tester.target_image(NAME, matrix, Config(namespace="ml"), engine) == f"localhost/ml/{NAME}:{MOVING_TAG}"
    assert tester.target_image("ubuntu:22.04", matrix, with_registry(), engine) == "ubuntu:22.04"


def test_build_one_times_its_phases_and_names_the_repository(profile, engine, registry):
    result = build(profile, with_registry(), engine)
    assert set(result.phases) == {"resolve", "lock", "render", "lookup", "build", "check", "tag", "push"}
    assert result.repository == REPO and result.image_id == engine.builds[0].image


def test_a_failed_build_keeps_its_phases_step_tail_and_real_seconds(matrix, engine, registry, monkeypatch):
    def slow_refusal(base, config, engine):
        time.sleep(0.15)
        raise OperationError("the mirror is down")

    monkeypatch.setattr(builder, "resolve_base_digest", slow_refusal)
    [failed] = many([resolve_profile(NAME, matrix)], with_registry(), engine)
    assert failed.status == "failed" and failed.seconds >= 0.1 and failed.phases["resolve"] >= 0.15
    assert failed.repository == REPO and failed.step == "" and failed.log_tail == []

    monkeypatch.setattr(builder, "resolve_base_digest", lambda base, config, engine: BASE_DIGEST)
    engine.fail_builds("pip: resolution impossible")
    [failed] = many([resolve_profile(NAME, matrix)], with_registry(), engine)
    assert (failed.step, failed.log_tail[-1]) == ("build", "ERROR: pip: resolution impossible")
    assert "build" in failed.phases and "check" not in failed.phases


def test_plan_one_says_build_reuse_or_refused_and_changes_nothing(profile, engine, registry, monkeypatch):
    plan = plan_one(profile, with_registry(), engine)
    assert (plan.profile, plan.action, plan.repository, plan.tag) == (NAME, "build", REPO, "")
    assert engine.builds == [] and registry.store(REPO).tag_map == {}

    built = build(profile, with_registry(), engine)
    assert plan.key == engine.builds[0].labels[BUILD_KEY]
    store = registry.store(REPO)
    store.calls.clear()
    again = plan_one(profile, with_registry(), engine)
    assert (again.action, again.tag, again.key) == ("reuse", built.tag, plan.key)
    assert store.calls == [("tag_with_key", plan.key)]
    assert plan_one(profile, with_registry(), engine, force=True).action == "build"

    def refuse(base, config, engine):
        raise OperationError("the mirror is down")

    monkeypatch.setattr(builder, "resolve_base_digest", refuse)
    refused = plan_one(profile, with_registry(), engine)
    assert (refused.action, refused.reason) == ("refused", "the mirror is down") and len(engine.builds) == 1


def test_an_unreachable_base_registry_names_the_registry_and_the_mirror_setting(profile, engine, registry,
                                                                               monkeypatch):
    port = closed_port()
    monkeypatch.setattr(builder, "resolve_base_digest", resolve_base_digest)
    no_wait = functools.partial(connect, retry=RetryPolicy(sleep=lambda s: None))
    monkeypatch.setattr(imagectl.registry.access, "connect", no_wait)
    mirror = f"127.0.0.1:{port}/hub"
    with pytest.raises(BuildError) as through_mirror:
        build(profile, with_registry(mirrors={"docker.io": mirror}), engine)
    assert f"127.0.0.1:{port}" in str(through_mirror.value)
    assert "through the mirror of docker.io ([mirrors] in imagectl.toml or IMAGECTL_MIRRORS)" in str(
        through_mirror.value)
    from imagectl.images.base_digest import mirror_hint
    from imagectl.reference import parse_reference

    hint = mirror_hint(parse_reference("docker.io/nvidia/cuda:12.1.1-base-ubuntu22.04"), Config())
    assert 'mirror it: [mirrors] "docker.io" = ' in hint and "IMAGECTL_MIRRORS" in hint


def test_a_context_that_cannot_be_written_is_a_failed_build_that_tags_nothing(matrix, engine, registry,
                                                                             monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(builder, "write_context", full)
    [failed] = many([resolve_profile(NAME, matrix)], with_registry(), engine)
    assert (failed.status, failed.step) == ("failed", "build") and "No space left on device" in failed.error
    assert engine.builds == [] and registry.store(REPO).tag_map == {}
