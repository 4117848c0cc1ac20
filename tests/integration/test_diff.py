"""``imagectl diff`` between two real pushed images: torch 2.3.0 and torch 2.3.1 stand-ins (the same CUDA pins),
built by ``imagectl build`` on the default engine (buildah, its assembled layers) into a real registry 2.8, attested
and signed; and what ``diff``
answers for the same image, an image without imagectl labels, a tag the registry lacks and a digest prefix no
image has.  Nothing is pulled: ``diff`` reads manifests, configs and referrers."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from imagectl.cli import main
from imagectl.registry import RegistryClient
from tests.integration.conftest import NO_DAEMON, shipped_pins, write_config
from tests.integration.support.skips import require_binary
from tests.integration.support.wheels import make_standin_framework_wheels, start_simple_index

pytestmark = pytest.mark.integration

NEWER = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11
OLDER = "torch-2.3.0-cu121-py3.11"
NAMESPACE = "diff"
# a team's advisory that torch 2.3.1 fixed: diff says B (2.3.1) fixes it
TEAM_ADVISORY = {"id": "TEAM-2024-1", "summary": "a flaw of torch 2.3.0", "modified": "2024-06-06T00:00:00Z",
                 "affected": [{"package": {"ecosystem": "PyPI", "name": "torch"},
                               "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "2.3.0"},
                                                                           {"fixed": "2.3.1"}]}]}]}


def publish(wheels: Path, profile: str, uploaded: datetime) -> None:
    """Stand-ins of ``profile``'s pins and their dependencies, uploaded at ``uploaded``."""
    pins = shipped_pins(profile)
    facts = {"torch_version": pins["torch"], "cuda": "12.1", "cudnn": pins["nvidia-cudnn-cu12"],
             "nccl": pins["nvidia-nccl-cu12"]}
    make_standin_framework_wheels(wheels, pins, facts, upload_time=uploaded)


def write_key(folder: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = folder / "attest.pem"
    key.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return key


def cli(config: Path, *args: str, capsys) -> tuple[int, str, str]:
    code = main(["--config", str(config), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def built(tmp_path_factory, mirror, registry):
    """Both profiles built, pushed, attested and signed (one ``build`` command) by buildah, with no Docker daemon
    to reach, as on a runner without one; yields the config file."""
    require_binary("buildah")
    folder = tmp_path_factory.mktemp("diff")
    wheels = folder / "wheels"
    # 2.3.1 first: the files both releases share keep the earlier upload time
    publish(wheels, NEWER, datetime(2024, 6, 5, 17, 0, tzinfo=timezone.utc))
    publish(wheels, OLDER, datetime(2024, 4, 24, 17, 0, tzinfo=timezone.utc))
    advisories = folder / "advisories"
    advisories.mkdir()
    (advisories / "TEAM-2024-1.json").write_text(json.dumps(TEAM_ADVISORY))
    saved = {n: os.environ.pop(n) for n in list(os.environ)
             if (n.startswith("IMAGECTL_") and not n.startswith("IMAGECTL_TEST_")) or n == "DOCKER_HOST"}
    os.environ["DOCKER_HOST"] = NO_DAEMON
    try:
        with start_simple_index(wheels) as index:
            config = write_config(folder, mirror=mirror, index_url=index.url, registry=registry, namespace=NAMESPACE,
                                  engine=None)
            config.write_text(config.read_text() + f"\n[attest]\nkey = {json.dumps(str(write_key(folder)))}\n"
                              f"\n[paths]\nadvisories = [{json.dumps(str(advisories))}]\n")
            assert main(["--config", str(config), "build", OLDER, NEWER, "--quiet"]) == 0
        yield config
    finally:
        os.environ.pop("DOCKER_HOST", None)
        os.environ.update(saved)


def test_diff_between_two_pushed_images_says_what_changed(built, registry, capsys):
    code, out, err = cli(built, "diff", OLDER, NEWER, "--json", capsys=capsys)
    assert code == 1, err  # they differ, as diff(1) says
    found = json.loads(out)
    client = RegistryClient(registry.host, insecure=True)
    assert found["same"] is False
    assert found["a"]["digest"] == client.head_manifest(f"{NAMESPACE}/{OLDER}", "latest")
    assert found["b"]["digest"] == client.head_manifest(f"{NAMESPACE}/{NEWER}", "latest")
    facts = found["facts"]
    assert (facts["version"]["a"], facts["version"]["b"]) == ("2.3.0", "2.3.1")
    for same in ("framework", "cuda", "cudnn", "nccl", "python", "min_driver", "base", "base_digest"):
        assert facts[same]["same"] and facts[same]["a"], same
    assert not facts["build_key"]["same"] and not facts["lock_sha256"]["same"]

    # packages: torch and its companions up, nothing of CUDA, the same closure otherwise
    older, newer = shipped_pins(OLDER), shipped_pins(NEWER)
    moved = sorted(name for name in newer if older.get(name) != newer[name])
    assert "torch" in moved and not any(name.startswith("nvidia-") for name in moved)
    assert sorted(p["name"] for p in found["packages"]) == moved
    assert all(p["change"] == "up" and p["a"] == older[p["name"]] and p["b"] == newer[p["name"]]
               for p in found["packages"])
    assert found["packages_same"] == len(found["a"]["packages"]) - len(moved) > len(moved)

    # the SBOMs' OS packages (one base) and the check reports (what the image loads) were read
    assert found["os_packages"] == [] and found["os_packages_same"] > 50
    assert found["check"]["result"] == {"a": "pass", "b": "pass", "same": True}
    assert (found["check"]["framework"]["a"], found["check"]["framework"]["b"]) == ("2.3.0", "2.3.1")
    assert found["check"]["nccl"]["same"] and found["check"]["nccl"]["a"] == newer["nvidia-nccl-cu12"]
    for side in ("a", "b"):
        assert found[side]["attestations"].startswith("ok, signatures verified (ed25519"), found[side]
        assert found[side]["attestation_problems"] == []

    # sizes per layer group: the same base, CUDA and libraries' layers (shared blobs), another framework layer
    sizes = {s["group"]: s for s in found["sizes"]}
    assert list(sizes) == ["system", "cuda", "libs", "framework", "rest", "imagectl", "total"]
    assert sizes["system"]["a"] == sizes["system"]["b"] and sizes["cuda"]["a"] == sizes["cuda"]["b"]
    assert sizes["framework"]["a"] != sizes["framework"]["b"]
    assert sizes["total"]["b"] == found["b"]["size"] == sum(layer["size"] for layer in found["b"]["layers"])
    shared = {layer["digest"] for layer in found["a"]["layers"]} & {layer["digest"] for layer in found["b"]["layers"]}
    assert found["new_layers"] == len(found["b"]["layers"]) - len(shared) > 0
    assert found["new_bytes"] < sizes["total"]["b"]

    # advisories: the team's record of a flaw torch 2.3.1 fixed; the shipped ones affect both
    assert [(f["id"], f["package"], f["version"]) for f in found["advisories"]["fixed"]] == [
        ("TEAM-2024-1", "torch", "2.3.0")]
    assert found["advisories"]["gained"] == []
    assert len(found["a"]["advisories"]) == len(found["b"]["advisories"]) + 1

    # the text: what changed, CUDA named as the same
    code, text, err = cli(built, "diff", OLDER, NEWER, capsys=capsys)
    assert code == 1, err
    assert "up      torch" in text and "same: framework torch, cuda 12.1, cudnn" in text
    assert "fixed   TEAM-2024-1: torch 2.3.0, fixed in 2.3.1" in text
    assert "B adds " in text and err == ""


def test_the_same_image_by_two_names_is_no_difference(built, registry, capsys):
    client = RegistryClient(registry.host, insecure=True)
    digest = client.head_manifest(f"{NAMESPACE}/{NEWER}", "latest")
    immutable = next(t for t in client.list_tags(f"{NAMESPACE}/{NEWER}") if t.startswith("2.3.1-"))
    for other in (f"{NEWER}:{immutable}", f"{NEWER}@{digest[:19]}", f"{registry.host}/{NAMESPACE}/{NEWER}@{digest}"):
        code, out, err = cli(built, "diff", NEWER, other, capsys=capsys)
        assert code == 0, other + err
        assert out.splitlines()[-1] == f"A and B are the same image ({digest})"


def test_bad_input_and_a_missing_image_are_one_line_each(built, registry, mirror, capsys):
    foreign = f"{registry.host}/{mirror.prefix}/nvidia/cuda:12.1.1-base-ubuntu22.04"  # a stand-in base, no labels
    code, out, err = cli(built, "diff", NEWER, foreign, capsys=capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith(f"imagectl: diff {foreign}: the image has no imagectl labels"), err

    code, out, err = cli(built, "diff", NEWER, f"{NEWER}@sha256:{'0' * 12}", capsys=capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "is not the digest of any immutable tag of" in err

    code, out, err = cli(built, "diff", NEWER, f"{NEWER}:no-such-tag", "--json", capsys=capsys)
    assert (code, out) == (1, "") and err.count("\n") == 1, err
    assert "no-such-tag" in err
