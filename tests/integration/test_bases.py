"""Bases in custody (issue 22, item 1) against a real registry (CNCF distribution 2.8: no referrers API, so the
tag-schema fallback; a second one as the team's where blobs must cross registries), checked with an independent
client (skopeo).

"Upstream" is a mirror prefix of the test registry holding a stand-in ``nvidia/cuda:12.1.1-base-ubuntu22.04`` as a
two-platform manifest list, as NVIDIA publishes it: its linux/amd64 child is the session's runnable stand-in base
(copied by digest from the shared mirror, so that one is never touched) and its linux/arm64 child a small image,
with an attestation attached to the list.  The test then does to that tag what upstream does: moves it, deletes it.
One real image build (``build --force`` once upstream is gone); everything else is registry work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from imagectl.registry import RegistryClient
from imagectl.registry.copy import Endpoint, copy_image
from imagectl.registry.manifest import DOCKER_MANIFEST_LIST, Descriptor, Manifest
from imagectl.registry.referrers import Artifact, attach, list_referrers
from imagectl.bases.status import holds_all
from imagectl.config import load_config
from imagectl.images.base_digest import resolve_pinned_base
from imagectl.reference import parse_reference
from tests.integration.conftest import Mirror, _registry, write_config
from tests.integration.support.registry import RegistryServer, make_sample_image, push_sample_image
from tests.integration.test_index_tags import layers, resolved
from tests.integration.test_tags import seed, skopeo_digest, tag_of

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11
PUBLIC = "nvidia/cuda:12.1.1-base-ubuntu22.04"  # torch-2.3-cu121's base (its pins bring nvidia-* wheels)
NAME, TAG = PUBLIC.split(":")
SBOM = "application/vnd.example.sbom+json"


def arm_child(client: RegistryClient, repo: str, text: str) -> Manifest:
    image = make_sample_image({"arm.txt": text.encode()}, docker_media_types=True, architecture="arm64")
    return client.get_manifest(repo, push_sample_image(client, repo, digest_of(image), image))


def digest_of(image) -> str:
    """The digest of a sample image's manifest: what it is put under (untagged, as an index's child)."""
    return Manifest.from_bytes(image.manifest, image.media_type).digest


def push_list(client: RegistryClient, repo: str, tag: str, children: dict[str, Manifest]) -> Manifest:
    """A Docker manifest list of ``children`` (``linux/ARCH`` -> a manifest in ``repo``) under ``tag``."""
    entries = [{"mediaType": m.media_type, "digest": m.digest, "size": len(m.raw),
                "platform": {"os": p.split("/")[0], "architecture": p.split("/")[1]}} for p, m in children.items()]
    body = json.dumps({"schemaVersion": 2, "mediaType": DOCKER_MANIFEST_LIST, "manifests": entries}, indent=3)
    index = Manifest.from_bytes(body.encode(), DOCKER_MANIFEST_LIST)
    client.put_manifest(repo, tag, index)
    return index


def attach_sbom(client: RegistryClient, repo: str, index: Manifest, text: str) -> str:
    subject = Descriptor(index.media_type, index.digest, len(index.raw))
    return attach(client, repo, subject, Artifact(SBOM, "application/json", text.encode())).digest


def make_upstream(client: RegistryClient, mirror: Mirror | None, prefix: str) -> tuple[Manifest, str]:
    """``prefix/nvidia/cuda:TAG``: a two-platform list (amd64: the runnable stand-in base of ``mirror``, or without
    one a small image) with an attestation; returns the list and the attestation's digest."""
    repo = f"{prefix}/{NAME}"
    if mirror is not None:
        copy_image(Endpoint(client, f"{mirror.prefix}/{NAME}"), mirror.digests[PUBLIC], Endpoint(client, repo))
        amd = client.get_manifest(repo, mirror.digests[PUBLIC])
    else:
        image = make_sample_image({"amd.txt": f"{prefix} amd64\n".encode()}, docker_media_types=True)
        amd = client.get_manifest(repo, push_sample_image(client, repo, digest_of(image), image))
    arm = arm_child(client, repo, f"{prefix} arm64 one\n")
    index = push_list(client, repo, TAG, {"linux/amd64": amd, "linux/arm64": arm})
    return index, attach_sbom(client, repo, index, f'{{"upstream": "{prefix}"}}')


def status_of(run_cli) -> dict:
    found = run_cli("bases", "status", PROFILE, "--json")
    assert found.code == 0, found.err
    (only,) = json.loads(found.out)
    return only


def test_custody_sync_then_upstream_moves_and_deletes_the_tag_and_builds_and_rollback_still_work(
        run_cli, tmp_path, registry, mirror, wheel_index, docker_config):
    client = RegistryClient(registry.host, insecure=True)
    index, sbom = make_upstream(client, mirror, "upcustody")
    upstream_repo, team_repo = f"upcustody/{NAME}", f"custody/bases/{NAME}"
    write_config(tmp_path, mirror=Mirror(registry, "upcustody", {}), index_url=wheel_index, registry=registry,
                 namespace="custody")

    # sync: the whole list by digest, both platforms, the attestation, a digest tag; nothing through the engine
    synced = run_cli("bases", "sync", PROFILE, "--json")
    assert synced.code == 0, synced.err
    (result,) = json.loads(synced.out)
    assert (result["action"], result["digest"], result["platforms"], result["referrers"]) == \
        ("copied", index.digest, ["linux/amd64", "linux/arm64"], 1)
    assert result["team_copy"] == f"{registry.host}/{team_repo}:{TAG}"
    assert resolved(registry.host, team_repo, TAG) == index.digest  # skopeo: the same list, byte for byte
    for arch, child in zip(("amd64", "arm64"), index.children()):
        assert resolved(registry.host, team_repo, TAG, arch) == layers(client, upstream_repo, child.digest)
    assert skopeo_digest(registry.host, team_repo, f"{TAG}--{index.digest[7:19]}") == index.digest
    assert [r.digest for r in list_referrers(client, team_repo, index.digest)] == [sbom]
    again = run_cli("bases", "sync", PROFILE, "--json")
    assert again.code == 0 and json.loads(again.out)[0]["action"] == "unchanged"
    current = status_of(run_cli)
    assert (current["team_state"], current["upstream"], current["pinned"]) == ("held", "current", index.digest)

    # upstream moves the tag (a rebuild with fixes): status says so, the team copy keeps its pin
    moved = push_list(client, upstream_repo, TAG, {"linux/amd64": client.get_manifest(upstream_repo,
                                                                                      index.children()[0].digest),
                                                   "linux/arm64": arm_child(client, upstream_repo, "arm64 two\n")})
    now = status_of(run_cli)
    assert (now["upstream"], now["upstream_digest"], now["pinned"]) == ("moved", moved.digest, index.digest)
    table = run_cli("bases", "status", PROFILE)
    assert table.code == 0 and "moved" in table.out and "held" in table.out
    listed = run_cli("list", "--cuda", "12.1", "--upstream")  # the other 12.1 bases are not in this "upstream"
    assert listed.code == 0 and f"warning: base {PUBLIC} moved upstream" in listed.err, listed.err

    # upstream deletes it (NVIDIA's end of life: the tag and its manifests go)
    for digest in (moved.digest, index.digest, index.children()[0].digest):
        client.delete_manifest(upstream_repo, digest)
    gone = status_of(run_cli)
    assert (gone["upstream"], gone["team_state"], gone["pinned"]) == ("gone", "held", index.digest)
    kept = run_cli("bases", "sync", PROFILE)
    assert kept.code == 0 and f"warning: {PUBLIC} is gone upstream; the team copy keeps" in kept.err
    # a base pinned by digest (rebuild from an image's labels) comes from the team copy when it holds the digest
    config = load_config(str(tmp_path / "imagectl.toml"))
    pulled = parse_reference(f"{registry.host}/{upstream_repo}:{TAG}")
    team = parse_reference(f"{registry.host}/{team_repo}:{TAG}")
    assert resolve_pinned_base(pulled, index.digest, config).source == team
    assert resolve_pinned_base(pulled, moved.digest, config).source is None  # never synced: pulled as named

    # a rebuild works from the team copy, and so does a rollback to the image before it
    repo = f"custody/{PROFILE}"
    before = seed(client, repo, days=(1,))[1]
    built = run_cli("build", PROFILE, "--force")
    assert built.code == 0, built.err[-3000:]
    assert f"base {PUBLIC} is gone upstream; building from the team copy" in built.err
    latest = client.get_manifest(repo, "latest")
    labels = client.get_image_config(repo, latest).labels
    assert labels["org.opencontainers.image.base.digest"] == index.digest and labels["imagectl.profile"] == PROFILE
    back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert f"-> {tag_of(1)}" in back.out and skopeo_digest(registry.host, repo, "latest") == before


SYNC_AT = """
import sys, time
from imagectl.cli import main
import imagectl.bases.sync, imagectl.registry.referrers  # imported before the start line: both start together
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
sys.exit(main(["bases", "sync", sys.argv[2], "--json"]))
"""


@pytest.fixture(scope="module")
def team_registry(tmp_path_factory) -> Iterator[RegistryServer]:
    """A second registry: the team's, apart from "upstream" (blobs cross between them as bytes, or by a mount from
    another team repository)."""
    yield from _registry(tmp_path_factory, None)


def test_sync_across_registries_streams_blobs_and_mounts_those_a_profile_repository_holds(
        run_cli, tmp_path, registry, team_registry):
    upstream, team = RegistryClient(registry.host, insecure=True), RegistryClient(team_registry.host, insecure=True)
    index, sbom = make_upstream(upstream, None, "upcross")
    amd, arm = (upstream.get_manifest(f"upcross/{NAME}", child.digest) for child in index.children())
    # an image of a profile on this base, pushed earlier, carries the base's amd64 layers
    copy_image(Endpoint(upstream, f"upcross/{NAME}"), amd.digest, Endpoint(team, f"cross/{PROFILE}"), "old")
    write_config(tmp_path, mirror=Mirror(registry, "upcross", {}), index_url="http://127.0.0.1:9/simple",
                 registry=team_registry, namespace="cross")
    synced = run_cli("bases", "sync", PROFILE, "--json")
    assert synced.code == 0, synced.err
    (result,) = json.loads(synced.out)
    assert (result["action"], result["digest"], result["referrers"]) == ("copied", index.digest, 1)
    assert result["mounted"] == len(amd.blobs()) and result["blobs_copied"] == len(amd.blobs()) + len(arm.blobs())
    team_repo = f"cross/bases/{NAME}"
    assert resolved(team_registry.host, team_repo, TAG) == index.digest
    for arch, child in (("amd64", amd), ("arm64", arm)):
        assert resolved(team_registry.host, team_repo, TAG, arch) == [layer.digest for layer in child.layers()]
    assert [r.digest for r in list_referrers(team, team_repo, index.digest)] == [sbom]


def test_two_syncs_at_once_lose_and_corrupt_nothing(tmp_path, registry, team_registry):
    upstream, client = RegistryClient(registry.host, insecure=True), RegistryClient(team_registry.host, insecure=True)
    index, first = make_upstream(upstream, None, "uprace")
    second = attach_sbom(upstream, f"uprace/{NAME}", index, '{"second": true}')
    team_repo = f"race/bases/{NAME}"
    write_config(tmp_path, mirror=Mirror(registry, "uprace", {}), index_url="http://127.0.0.1:9/simple",
                 registry=team_registry, namespace="race")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    start = f"{time.time() + 4:.3f}"
    procs = [subprocess.Popen([sys.executable, "-c", SYNC_AT, start, PROFILE], cwd=tmp_path, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err
        (result,) = json.loads(out)
        assert result["action"] in ("copied", "unchanged") and result["digest"] == index.digest
    assert sorted(json.loads(out)[0]["action"] for out, _ in outs) in (["copied", "copied"], ["copied", "unchanged"])
    assert resolved(team_registry.host, team_repo, TAG) == index.digest
    assert holds_all(client, team_repo, index.digest)
    for arch, child in zip(("amd64", "arm64"), index.children()):
        assert resolved(team_registry.host, team_repo, TAG, arch) == layers(upstream, f"uprace/{NAME}", child.digest)
    assert sorted(r.digest for r in list_referrers(client, team_repo, index.digest)) == sorted([first, second])
    for referrer in (first, second):
        manifest = client.get_manifest(team_repo, referrer)
        for blob in manifest.blobs():
            assert client.blob_exists(team_repo, blob.digest)
