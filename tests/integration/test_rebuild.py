"""imagectl rebuild NAME --compare end to end: ``imagectl build`` with the buildah engine pushes an image to a real
registry; ``rebuild --compare`` builds it again from its labels and says ``reproduced``; an image whose layer was
changed in the registry is named with the layer and the file (exit 1); images without the labels, or of another
imagectl version, are refused with one line (exit 2)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile

import pytest

from imagectl import __version__
from imagectl.labels import BUILD_KEY, IMAGECTL_VERSION, LOCK_SHA256, OCI_BASE_DIGEST, PROFILE
from imagectl.registry import Manifest, RegistryClient
from tests.integration.conftest import empty_storage, write_config
from tests.integration.support.registry import make_sample_image, push_sample_image
from tests.integration.support.skips import require_binary

pytestmark = pytest.mark.integration

PROFILE_NAME = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _change_a_file_in_the_top_layer(client: RegistryClient, repo: str, tag: str) -> str:
    """Replace the image's top layer in the registry by one where a file has other contents (labels and everything
    else kept) and put it under ``tag``; the path of the changed file."""
    manifest = client.get_manifest(repo, tag)
    data = manifest.json()
    top = data["layers"][-1]
    with client.open_blob(repo, top["digest"]) as reader:
        original = gzip.decompress(reader.read())
    changed_path, out = "", io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(original)) as source, tarfile.open(fileobj=out, mode="w",
                                                                              format=tarfile.PAX_FORMAT) as target:
        for member in source.getmembers():
            content = source.extractfile(member).read() if member.isfile() else None
            if content is not None and not changed_path and member.size > 0:
                changed_path, content = member.name, content + b"\n# changed in the registry\n"
                member.size = len(content)
            target.addfile(member, io.BytesIO(content) if content is not None else None)
    assert changed_path, "the top layer has no regular file to change"
    layer_tar = out.getvalue()
    layer = gzip.compress(layer_tar, mtime=0)
    config = json.loads(client.read_blob(repo, data["config"]["digest"]))
    config["rootfs"]["diff_ids"][-1] = _digest(layer_tar)
    config_bytes = json.dumps(config).encode()
    client.upload_blob(repo, layer)
    client.upload_blob(repo, config_bytes)
    top.update(digest=_digest(layer), size=len(layer))
    data["config"].update(digest=_digest(config_bytes), size=len(config_bytes))
    client.put_manifest(repo, tag, Manifest.from_bytes(json.dumps(data).encode(), manifest.media_type))
    return changed_path.removeprefix("./")


def _build(run_cli, tmp_path, mirror, wheel_index, registry, namespace: str) -> tuple[RegistryClient, str, str]:
    require_binary("buildah")
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace,
                 engine="buildah")
    built = run_cli("build", PROFILE_NAME, "--quiet")
    assert built.code == 0, built.err[-3000:]
    client = RegistryClient(registry.host, insecure=True)
    repo = f"{namespace}/{PROFILE_NAME}"
    return client, repo, client.get_manifest(repo, "latest").digest


def test_a_build_from_empty_storage_is_reproduced_and_a_changed_file_is_named(run_cli, tmp_path, monkeypatch, mirror,
                                                                             wheel_index, registry, docker_config):
    """Two builds of one profile, each from empty engine storage (two runners), have one digest, and ``rebuild
    --compare`` is what says so; once a file of the registry's image is changed, a rebuild in the now warm storage
    names the layer and the file (exit 1).  One test: each step is a full build."""
    require_binary("buildah")
    empty_storage(monkeypatch, tmp_path / "runner-a")
    client, repo, digest = _build(run_cli, tmp_path, mirror, wheel_index, registry, "rebuild-same")
    empty_storage(monkeypatch, tmp_path / "runner-b")
    same = run_cli("rebuild", PROFILE_NAME, "--compare")
    assert same.code == 0, same.out + same.err[-1500:]
    assert same.out.strip() == f"reproduced {digest}"
    assert list((tmp_path / "runner-b" / "root").iterdir()), "the rebuild did not use the empty storage"

    changed = _change_a_file_in_the_top_layer(client, repo, "latest")
    differs = run_cli("rebuild", f"{registry.host}/{repo}:latest", "--compare", "--json")
    assert differs.code == 1, differs.err[-3000:]
    document = json.loads(differs.out)
    layers = len(client.get_manifest(repo, "latest").layers())
    assert document["reproduced"] is False and document["layer"]["index"] == layers - 1
    assert document["rebuilt_digest"] == digest != document["registry_digest"]
    # re-tarring the layer in the test may change other members' headers too: the changed file must be among them
    [diff] = [f for f in document["layer"]["files"] if f["path"] == changed]
    assert diff["registry"]["size"] == diff["rebuilt"]["size"] + len(b"\n# changed in the registry\n")
    assert diff["registry"]["sha256"] != diff["rebuilt"]["sha256"]


@pytest.fixture()
def plain_config(tmp_path, registry):
    (tmp_path / "imagectl.toml").write_text(f'[registry]\nurl = "{registry.host}"\nnamespace = "ml"\n')
    return RegistryClient(registry.host, insecure=True)


def test_an_image_without_the_labels_is_refused_with_one_line(run_cli, plain_config, registry):
    push_sample_image(plain_config, "ml/foreign", "v1")
    refused = run_cli("rebuild", f"{registry.host}/ml/foreign:v1", "--compare")
    assert refused.code == 2
    assert "cannot rebuild: the image has no imagectl.profile, imagectl.lock.sha256" in refused.err
    assert refused.err.count("\n") == 1


def test_an_image_of_another_imagectl_version_is_refused_naming_both(run_cli, plain_config, registry):
    labels = {PROFILE: PROFILE_NAME, LOCK_SHA256: "0" * 64, OCI_BASE_DIGEST: _digest(b"base"),
              IMAGECTL_VERSION: "0.0.1", BUILD_KEY: "1" * 64}
    push_sample_image(plain_config, "ml/older", "v1", make_sample_image(labels=labels))
    refused = run_cli("rebuild", f"{registry.host}/ml/older:v1", "--compare")
    assert refused.code == 2
    assert f"built by imagectl 0.0.1, this is imagectl {__version__}" in refused.err
