"""imagectl import end to end: a team's own image (built with its own Dockerfile: no imagectl labels, no check
script) from a registry or the local engine, checked in a container, copied under the naming scheme, then
rolled back like a built image.  Checked with skopeo as an independent client."""

from __future__ import annotations

import io
import json
import os
import subprocess

import pytest

from imagectl.errors import NotFoundError
from imagectl.registry import Credentials, RegistryClient
from tests.integration.conftest import login, shipped_pins
from tests.integration.support.engine import push_to_registry
from tests.integration.support.skips import require_binary
from tests.integration.test_tags import skopeo_digest

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"
STANDIN = "imagectl-test/nvidia/cuda:12.1.1-base-ubuntu22.04"  # made by the mirror fixture, with the JIT toolchain
TEAM_IMAGE = "imagectl-test/team-own:v1"


@pytest.fixture(scope="session")
def team_image(docker_client, mirror, wheel_index) -> str:
    """A team's image made without imagectl: the stand-in CUDA base (whose stand-in carries the compilers
    torch.compile needs: the check compiles a function; no apt step to wait for), a venv, torch and its pins from
    the index."""
    pins = " ".join(f"{name}=={version}" for name, version in sorted(shipped_pins("torch-2.3-cu121").items()))
    dockerfile = (f"FROM {STANDIN}\n"
                  "RUN python3 -m venv /opt/team"
                  f" && /opt/team/bin/pip install --no-cache-dir --index-url {wheel_index} {pins}\n"
                  "ENV PATH=/opt/team/bin:$PATH\n")
    image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), network_mode="host", rm=True)
    image.tag(TEAM_IMAGE)
    return TEAM_IMAGE


@pytest.fixture(scope="session")
def pushed_team_image(docker_client, team_image, registry) -> tuple[str, str]:
    """The team's image pushed by the engine to ``registry`` as ``team/own:v1``: (reference, digest).  Pushed once
    (its base layers with the compilers, some 250 MB, which the engine compresses on every push); the imports
    only read it."""
    return push_to_registry(docker_client, team_image, registry.host, "team/own:v1")


def skopeo_copy(source: str, target: str, target_server) -> None:
    """Copy ``source`` to ``target`` (both ``host/repo:tag``) with skopeo, an independent client, keeping the
    manifest byte for byte (so its digest) and logging in to ``target_server``."""
    require_binary("skopeo")
    argv = ["skopeo", "copy", "--preserve-digests", "--src-tls-verify=false", "--dest-tls-verify=false",
            f"--dest-creds={target_server.username}:{target_server.password}", f"docker://{source}",
            f"docker://{target}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def config(tmp_path, namespace: str, registry=None) -> None:
    registry_line = f'url = "{registry.host}"\n' if registry is not None else ""
    (tmp_path / "imagectl.toml").write_text(
        f'[registry]\n{registry_line}namespace = "{namespace}"\n\n[build]\nnetwork = "host"\nengine = "docker"\n'
    )


def test_import_from_a_registry_then_roll_back(run_cli, tmp_path, docker_client, pushed_team_image, registry):
    source, source_digest = pushed_team_image
    config(tmp_path, "imp", registry)
    repo = f"imp/{PROFILE}"

    first = run_cli("import", source, "--name", PROFILE, "--json")
    assert first.code == 0, first.err[-2000:]
    report = json.loads(first.out)
    assert report["checked"] and report["ok"] and report["matches"] == [PROFILE], report
    assert {f["what"] for f in report["findings"]} >= {"torch version", "nccl loaded by torch", "pip nvidia-nccl-cu12"}
    assert report["digest"] == source_digest and report["moved"]  # the manifest is copied unchanged
    assert "mounted" in report["copied"] and "0 streamed" in report["copied"]
    assert report["tag"].startswith("2.3.1-cu121-py3.11-") and report["tag"].endswith(source_digest[7:17])
    assert skopeo_digest(registry.host, repo, "latest") == source_digest
    assert skopeo_digest(registry.host, repo, report["tag"]) == source_digest

    again = run_cli("import", source, "--name", PROFILE, "--json")
    assert again.code == 0 and json.loads(again.out)["reused"] is True

    # an image that is no torch image at all: said so, imported anyway (not --strict), latest moved on request
    base, base_digest = push_to_registry(docker_client, STANDIN, registry.host, "team/base:v1")
    other = run_cli("import", base, "--name", PROFILE, "--set-latest")
    assert other.code == 0, other.err[-2000:]
    assert "warning: the image matches no profile of the matrix" in other.err
    assert skopeo_digest(registry.host, repo, "latest") == base_digest

    rows = json.loads(run_cli("history", PROFILE, "--json").out)
    assert [r["digest"] for r in rows if r["current"]] == [base_digest]
    assert {m["action"] for r in rows for m in r["moves"]} == {"import"}
    back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert skopeo_digest(registry.host, repo, "latest") == source_digest

    strict = run_cli("import", source, "--name", "torch-2.3-cu118", "--strict")
    assert strict.code == 1
    assert "torch CUDA: expected 11.8, found 12.1" in strict.err and "nothing imported" in strict.err
    with pytest.raises(NotFoundError):
        RegistryClient(registry.host, insecure=True).list_tags("imp/torch-2.3-cu118")


def test_import_across_registries_streams_the_blobs(run_cli, tmp_path, pushed_team_image, registry, auth_registry,
                                                    docker_config):
    auth = {"username": auth_registry.username, "password": auth_registry.password}
    source, source_digest = f"{auth_registry.host}/team/own:v1", pushed_team_image[1]
    skopeo_copy(pushed_team_image[0], source, auth_registry)
    assert skopeo_digest(auth_registry.host, "team/own", "v1", auth_registry) == source_digest
    config(tmp_path, "across", registry)
    denied = run_cli("import", source, "--name", PROFILE, "--no-check")
    assert denied.code == 1 and auth_registry.password not in denied.err + denied.out
    login(docker_config, auth_registry)
    result = run_cli("import", source, "--name", PROFILE, "--no-check", "--json")
    assert result.code == 0, result.err[-2000:]
    report = json.loads(result.out)
    assert report["digest"] == source_digest and not report["checked"]
    assert "0 blobs mounted" in report["copied"] and "streamed" in report["copied"]
    assert skopeo_digest(registry.host, f"across/{PROFILE}", "latest") == source_digest
    source_client = RegistryClient(auth_registry.host, insecure=True, credentials=Credentials(**auth))
    assert source_client.head_manifest("team/own", "v1") == source_digest  # the source is left as it was


def test_import_a_local_image(run_cli, tmp_path, docker_client, team_image, monkeypatch):
    namespace = f"implocal{os.getpid()}"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config(tmp_path, namespace)
    try:
        result = run_cli("import", team_image, "--name", PROFILE, "--json")
        assert result.code == 0, result.err[-2000:]
        report = json.loads(result.out)
        assert report["ok"] and report["copied"] == "tagged in the local engine"
        image_id = docker_client.images.get(team_image).id
        assert docker_client.images.get(f"localhost/{namespace}/{PROFILE}:latest").id == image_id == report["digest"]
        rows = json.loads(run_cli("history", PROFILE, "--json").out)
        assert [(r["tag"], r["current"]) for r in rows] == [(report["tag"], True)]
    finally:
        for tag in docker_client.images.get(team_image).tags:
            if tag.startswith(f"localhost/{namespace}/"):
                docker_client.images.remove(tag, noprune=True)


def test_import_a_local_image_into_the_registry(run_cli, tmp_path, team_image, registry, docker_client):
    config(tmp_path, "imppush", registry)
    result = run_cli("import", team_image, "--name", PROFILE, "--json")
    assert result.code == 0, result.err[-2000:]
    report = json.loads(result.out)
    assert report["ok"] and report["copied"] == "pushed from the local engine"
    assert skopeo_digest(registry.host, f"imppush/{PROFILE}", report["tag"]) == report["digest"]
    assert skopeo_digest(registry.host, f"imppush/{PROFILE}", "latest") == report["digest"]


def test_an_import_never_overwrites_an_immutable_tag_of_another_image(run_cli, tmp_path, registry, monkeypatch):
    """Issue 9, item 3, on the registry-to-registry copy: the name the import would write already names another
    image: exit 1, nothing copied, the tag stays where it was and no ``latest`` appears."""
    from imagectl.images import importer
    from tests.integration.support.registry import make_sample_image, push_sample_image

    client = RegistryClient(registry.host, insecure=True)
    source_digest = push_sample_image(client, "team/sample", "v1", make_sample_image({"a.txt": b"source\n"}))
    repo = f"impclash/{PROFILE}"
    clash = "2.3.1-cu121-py3.11-20240501T120000-abcdefabcd"
    other = push_sample_image(client, repo, clash, make_sample_image({"b.txt": b"someone else's\n"}))
    monkeypatch.setattr(importer, "immutable_tag", lambda *args, **kwargs: clash)
    config(tmp_path, "impclash", registry)

    result = run_cli("import", f"{registry.host}/team/sample:v1", "--name", PROFILE, "--no-check")
    assert result.code == 1, result.err[-2000:]
    assert f"{registry.host}/{repo}:{clash} already names another image" in result.err
    assert client.head_manifest(repo, clash) == other != source_digest
    assert client.head_manifest(repo, "latest") is None
