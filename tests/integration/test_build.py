"""imagectl build end to end: real engine, real registry, stand-in base and wheels, no internet.  The tests that take
``engine`` run on both engines: Docker, and buildah chosen by ``auto`` (the default) on a runner without a Docker
daemon (tests/integration/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

import pytest

from imagectl.assemble.layer import LAYER_WRITER
from imagectl.evidence.statement import SLSA_PROVENANCE, parse_statement
from imagectl.registry import RegistryClient
from imagectl.registry.referrers import list_referrers
from tests.integration.conftest import login, write_config

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11


def registry_tags(server, repo: str) -> dict[str, str]:
    client = RegistryClient(server.host, insecure=True)
    return {t: client.head_manifest(repo, t) for t in client.list_tags(repo)}


def provenance_of(client: RegistryClient, repo: str, digest: str) -> dict:
    """The (unsigned) provenance predicate attached to image ``digest``."""
    found = [r for r in list_referrers(client, repo, digest)
             if r.annotations.get("in-toto.io/predicate-type") == SLSA_PROVENANCE]
    assert len(found) == 1, found
    layer = client.get_manifest(repo, found[0].digest).layers()[0]
    return parse_statement(client.read_blob(repo, layer.digest), "provenance")["predicate"]


def test_build_push_check_and_reuse(run_cli, tmp_path, mirror, wheel_index, registry, docker_config, engine):
    namespace = f"e2e-{engine or 'auto'}"  # one per engine: both run in one registry
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace, engine=engine)
    first = run_cli("build", PROFILE)
    assert first.code == 0, first.err[-3000:]
    assert "check: ok" in first.err and "torch loaded" not in first.err
    assert f"{PROFILE}  built" in first.out

    tags = registry_tags(registry, f"{namespace}/{PROFILE}")
    immutable = [t for t in tags if t.startswith("2.3.1-cu121-py3.11-")]
    assert len(immutable) == 1 and tags["latest"] == tags[immutable[0]]

    client = RegistryClient(registry.host, insecure=True)
    manifest = client.get_manifest(f"{namespace}/{PROFILE}", "latest")
    config = client.get_image_config(f"{namespace}/{PROFILE}", manifest)
    labels = config.labels
    assert labels["imagectl.profile"] == PROFILE and labels["imagectl.nccl"] == "2.20.5"
    assert labels["imagectl.engine"] == (engine or "buildah")  # auto (the default) took buildah, with no daemon
    # torch-2.3-cu121's pins bring nvidia-* wheels: its default flavour is base (tests/integration/test_flavours.py)
    assert labels["org.opencontainers.image.base.digest"] == mirror.digests["nvidia/cuda:12.1.1-base-ubuntu22.04"]
    from imagectl.tags.naming import immutable_parts

    parts = immutable_parts(immutable[0])
    assert labels["imagectl.build-key"].startswith(parts["key"]) and config.digest[7:19] == parts["image"]
    if labels["imagectl.engine"] == "buildah":  # every layer staged into containers-storage (or found there) first
        staged = re.search(r"(\d+) layers staged into the engine's store as they were written \(\d+ s\), (\d+) there "
                           r"already \(seconds per layer: [\d ]+\); loaded", first.err)
        assert staged and int(staged[1]) + int(staged[2]) == len(manifest.layers()), first.err[-3000:]
        # the layers went up while the image was made; the push after the check sent the config (a few kB) alone
        early = re.search(r"uploaded while the image was made: ([\d.]+ [kMG]?B) uploaded", first.err)
        assert early and early[1] != "0 B", first.err[-3000:]
        assert re.search(r"push: [\d.]+ k?B uploaded", first.err), first.err[-3000:]

    # the provenance names the byte format of the layers imagectl wrote (buildah assembles them; Docker writes all)
    versions = provenance_of(client, f"{namespace}/{PROFILE}", manifest.digest)["runDetails"]["builder"]["version"]
    assert versions.get("layer-writer") == (LAYER_WRITER if labels["imagectl.engine"] == "buildah" else None)

    # the base flavour has no system NCCL, so no warning (a -runtime build warns: test_flavours.py)
    assert "NCCL_VERSION of the base image" not in first.out + first.err

    again = run_cli("build", PROFILE)
    assert again.code == 0 and f"{PROFILE}  reused" in again.out
    assert registry_tags(registry, f"{namespace}/{PROFILE}") == tags  # nothing new, nothing moved

    tested = run_cli("test", PROFILE, "--json")
    assert tested.code == 0, tested.err
    report = json.loads(tested.out)
    assert report["ok"]
    assert {f["what"] for f in report["findings"]} >= {
        "python", "torch version", "nccl loaded by torch", "pip nvidia-nccl-cu12"
    }


def tamper_hash(lock_text: str, package: str) -> tuple[str, str]:
    """``lock_text`` with the first ``--hash=sha256:`` of ``package`` replaced by the sha256 of other bytes, and
    that wrong hash."""
    pattern = re.compile(rf"^({re.escape(package)}==\S+ \\\n\s+--hash=sha256:)([0-9a-f]{{64}})", re.MULTILINE)
    match = pattern.search(lock_text)
    assert match, f"{package} is not in the lock"
    wrong = hashlib.sha256(b"not the wheel of " + package.encode()).hexdigest()
    assert wrong != match[2]
    return lock_text[:match.start(2)] + wrong + lock_text[match.end(2):], wrong


def test_failed_build_and_failed_check_leave_the_moving_tag(run_cli, tmp_path, mirror, wheel_index, lying_wheel_index,
                                                            empty_index, registry, docker_config, engine):
    namespace = f"fail-{engine or 'auto'}"  # one per engine: both run in one registry
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace, engine=engine)
    assert run_cli("build", PROFILE).code == 0
    before = registry_tags(registry, f"{namespace}/{PROFILE}")

    # an index without the framework: the build fails at the lock, before any Docker build, naming the index
    write_config(tmp_path, mirror=mirror, index_url=empty_index, registry=registry, namespace=namespace, engine=engine)
    broken = run_cli("build", PROFILE)
    assert broken.code == 1
    assert f"{PROFILE}  failed" in broken.out
    error = [line for line in broken.err.splitlines() if line.startswith(f"imagectl: {PROFILE}: ")]
    assert len(error) == 1, broken.err[-3000:]
    assert "cannot lock" in error[0] and empty_index in error[0] and "[pip] index_url" in error[0], error
    assert f"building {PROFILE}" not in broken.err
    assert registry_tags(registry, f"{namespace}/{PROFILE}") == before

    # a team lock whose hash of one package is wrong: pip refuses the file at the build step
    locks = tmp_path / "locks"
    locks.mkdir()
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace, locks=locks,
                 engine=engine)
    made = run_cli("lock", PROFILE)
    assert made.code == 0, made.err
    lock_file = locks / "torch-2.3.1-cu121-py3.11.txt"
    text, wrong = tamper_hash(lock_file.read_text(), "filelock")
    lock_file.write_text(text)
    tampered = run_cli("build", PROFILE, "--quiet")  # the log is not streamed: its tail is printed on failure
    assert tampered.code == 1
    assert f"{PROFILE}  failed" in tampered.out
    assert f"imagectl: {PROFILE}: build: " in tampered.err
    if engine == "docker":  # pip checks the file it downloaded in the build
        tail = [line for line in tampered.err.splitlines() if line.startswith("| ")]
        assert any("DO NOT MATCH THE HASHES" in line for line in tail), tampered.err[-3000:]  # pip's own complaint
        assert any("filelock==" in line for line in tail), tail
        assert any(f"Expected sha256 {wrong}" in line for line in tail), tail  # pip checked the tampered team lock
    else:  # buildah assembles the lock's layers: imagectl finds no file of that sha256 on the index, before any layer
        [line] = [line for line in tampered.err.splitlines() if line.startswith(f"imagectl: {PROFILE}: build: ")]
        assert "filelock==" in line and f"expected sha256 {wrong}" in line, line
    assert registry_tags(registry, f"{namespace}/{PROFILE}") == before

    write_config(tmp_path, mirror=mirror, index_url=lying_wheel_index, registry=registry, namespace=namespace,
                 engine=engine)
    lying = run_cli("build", PROFILE)
    assert lying.code == 1
    assert "check: in-image check failed: nccl loaded by torch: expected 2.20.5, found 2.19.3" in lying.err
    assert registry_tags(registry, f"{namespace}/{PROFILE}") == before


def test_push_to_registry_with_basic_auth(run_cli, tmp_path, mirror, wheel_index, auth_registry, docker_config, engine):
    namespace = f"secure-{engine or 'auto'}"  # one per engine: both run in one registry
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=auth_registry, namespace=namespace,
                 engine=engine)
    denied = run_cli("build", PROFILE)
    assert denied.code == 1 and auth_registry.password not in denied.err + denied.out
    login(docker_config, auth_registry)
    ok = run_cli("build", PROFILE)
    assert ok.code == 0, ok.err[-2000:]
    from imagectl.registry import Credentials

    credentials = Credentials(auth_registry.username, auth_registry.password)
    client = RegistryClient(auth_registry.host, insecure=True, credentials=credentials)
    tags = client.list_tags(f"{namespace}/{PROFILE}")
    assert "latest" in tags and any(t.startswith("2.3.1-cu121-py3.11-") for t in tags)


def local_image(engine: str | None, docker_client, ref: str) -> tuple[dict[str, str], list[str]]:
    """The labels and names of ``ref`` in the local engine's own store, asked of the engine itself (the Docker SDK;
    ``buildah inspect`` and ``buildah images`` on containers-storage)."""
    if engine == "docker":
        image = docker_client.images.get(ref)
        return image.labels, image.tags
    inspected = json.loads(subprocess.run(["buildah", "inspect", "--type", "image", ref], capture_output=True,
                                          text=True, check=True, timeout=60).stdout)
    listed = json.loads(subprocess.run(["buildah", "images", "--json"], capture_output=True, text=True, check=True,
                                       timeout=60).stdout)
    names = next(i.get("names") or [] for i in listed if inspected["FromImageID"].startswith(i["id"]))  # short ids
    return inspected["OCIv1"]["config"].get("Labels") or {}, names


def test_local_engine_only(run_cli, tmp_path, mirror, wheel_index, docker_client, engine):
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, namespace="localonly", engine=engine)
    r = run_cli("build", PROFILE, "--quiet")
    assert r.code in (0,), r.err[-2000:]
    # a name Docker Hub never answers
    labels, names = local_image(engine, docker_client, f"localhost/localonly/{PROFILE}:latest")
    assert labels["imagectl.profile"] == PROFILE
    assert any(t.startswith(f"localhost/localonly/{PROFILE}:2.3.1-cu121-py3.11-") for t in names), names
    again = run_cli("build", PROFILE)
    assert again.code == 0 and "reused" in again.out


def test_extras_on_a_managed_base(run_cli, tmp_path, mirror, wheel_index, registry, docker_config, engine):
    namespace = f"team-{engine or 'auto'}"  # one per engine: both run in one registry
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace, engine=engine)
    assert run_cli("build", PROFILE).code == 0
    (tmp_path / "req.txt").write_text("# our extras\nteam-extra==1.0\n")
    base = f"{registry.host}/{namespace}/{PROFILE}:latest"
    r = run_cli("build", PROFILE, "--base", base, "--requirements", "req.txt", "--suffix", "nlp")
    assert r.code == 0, r.err[-2000:]
    tags = registry_tags(registry, f"{namespace}/{PROFILE}-nlp")
    assert "latest" in tags
    before = registry_tags(registry, f"{namespace}/{PROFILE}")
    assert before["latest"] != tags["latest"]  # the profile's own moving tag did not move
    bad = run_cli("build", PROFILE, "--requirements", "missing.txt")
    assert bad.code == 2 and "missing.txt" in bad.err
    (tmp_path / "evil.txt").write_text("--index-url http://evil.example.com/simple\n")
    assert run_cli("build", PROFILE, "--requirements", "evil.txt").code == 2


def same_second(monkeypatch) -> None:
    """Every immutable tag made in this process is stamped 2024-05-01T12:00:00 UTC (two builds "in the same
    second", however long they take)."""
    from datetime import datetime, timezone

    from imagectl.images import builder

    real = builder.immutable_tag
    when = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
    monkeypatch.setattr(builder, "immutable_tag", lambda profile, key, _=None, **kw: real(profile, key, when, **kw))


def test_concurrent_forced_builds_in_one_second_keep_both_images(run_cli, tmp_path, mirror, wheel_index, registry,
                                                                  docker_config, docker_client, monkeypatch):
    """Issue 9, item 3: two ``build --force`` of one profile at once, stamped in the same second, made one
    immutable tag name with two digests, so one image lost its only tag.  Docker only: two builds there give two
    images (a buildah build is reproducible: one image, one name).  Now each keeps its own name; then
    ``test`` checks the image the registry's ``latest`` points to, by digest, not the local ``latest``."""
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace="forced-race")
    same_second(monkeypatch)
    both = run_cli("build", PROFILE, PROFILE, "-j", "2", "--force", "--no-cache", "--quiet")
    assert both.code == 0, both.err[-3000:]

    from imagectl.tags.naming import is_immutable

    tags = registry_tags(registry, f"forced-race/{PROFILE}")
    immutable = sorted(filter(is_immutable, tags))
    assert len(immutable) == 2 and len({tags[t] for t in immutable}) == 2, tags  # two names, two images
    assert {t.rsplit("-", 1)[0] for t in immutable} == {immutable[0].rsplit("-", 1)[0]}  # same stamp and key
    for tag in immutable:  # each name ends with its own image's id
        config = RegistryClient(registry.host, insecure=True).get_manifest(f"forced-race/{PROFILE}", tag).config()
        assert config is not None and config.digest[7:19] == tag.rsplit("-", 1)[1]
    assert tags["latest"] in {tags[t] for t in immutable}

    # the registry's latest goes to the other image; the local latest is left on the one it is not on
    repo = f"{registry.host}/forced-race/{PROFILE}"
    other = next(t for t in immutable if tags[t] != tags["latest"])
    moved = run_cli("rollback", PROFILE, "--to", other)
    assert moved.code == 0, moved.err
    stale = next(t for t in immutable if t != other)
    docker_client.images.get(f"{repo}:{stale}").tag(repo, "latest")
    tested = run_cli("test", PROFILE, "--json")
    assert tested.code == 0, tested.err[-2000:]
    assert json.loads(tested.out)["image"] == f"{repo}@{tags[other]}"


def test_a_build_never_overwrites_an_immutable_tag_of_another_image(run_cli, tmp_path, mirror, wheel_index, registry,
                                                                     docker_config, monkeypatch):
    """The check before the push: the very name the build would push already names another image (written by
    something else): the build fails at step ``tag``, the tag and ``latest`` stay where they were."""
    from imagectl.images import builder
    from tests.integration.support.registry import push_sample_image

    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace="clash")
    assert run_cli("build", PROFILE, "--quiet").code == 0
    repo = f"clash/{PROFILE}"
    clash = "2.3.1-cu121-py3.11-20240501T120000-0123456789-0123456789ab"
    other = push_sample_image(RegistryClient(registry.host, insecure=True), repo, clash)
    before = registry_tags(registry, repo)
    monkeypatch.setattr(builder, "immutable_tag", lambda *args, **kwargs: clash)

    again = run_cli("build", PROFILE, "--force", "--quiet")
    assert again.code == 1
    assert f"imagectl: {PROFILE}: tag: {registry.host}/{repo}:{clash} already names another image" in again.err
    assert registry_tags(registry, repo) == before and before[clash] == other
