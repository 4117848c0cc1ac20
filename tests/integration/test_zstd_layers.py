"""``[registry] compression = "zstd"`` on buildah covers every layer: the system layers (buildah compresses them) and
the lock, ``.pyc`` and ``/opt/imagectl`` layers imagectl writes itself.  A build from empty storage pushes an image
whose every layer the registry lists as ``tar+zstd``; the build's in-image check passes on it (its layers staged into
containers-storage from the zstd blobs); on another empty store the image is pulled back from the registry and the
check passes again; its provenance names the zstd layer writer; and a gzip build of the same inputs is a build of its
own, not a reuse of the zstd image (the compression is in the build key).

Docker 20.10 (Debian bookworm's docker.io) is left out: zstd layers need Docker 23 or later (containerd 1.5+)."""

from __future__ import annotations

import json

import pytest

from imagectl.assemble.layer import writer_name
from imagectl.registry import RegistryClient
from imagectl.registry.manifest import OCI_LAYER_GZIP, OCI_LAYER_ZSTD
from tests.integration.conftest import NO_DAEMON, empty_storage, write_config
from tests.integration.support.skips import require_binary
from tests.integration.test_build import PROFILE, provenance_of

pytestmark = pytest.mark.integration

NAMESPACE = "zstd"


def test_a_zstd_build_pushes_every_layer_as_zstd_and_runs_from_the_registry(run_cli, tmp_path, monkeypatch, mirror,
                                                                             wheel_index, registry, docker_config):
    require_binary("buildah")
    monkeypatch.setenv("DOCKER_HOST", NO_DAEMON)  # a runner without Docker: buildah, and no daemon to share with
    config = write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace=NAMESPACE,
                          engine="buildah")
    config.write_text(config.read_text().replace("[registry]\n", '[registry]\ncompression = "zstd"\n', 1))
    empty_storage(monkeypatch, tmp_path / "runner")
    built = run_cli("build", PROFILE, "--json")
    assert built.code == 0, built.err[-3000:]
    assert "check: ok" in built.err, built.err[-3000:]
    [result] = json.loads(built.out)["results"]
    assert result["status"] == "built"

    repo = f"{NAMESPACE}/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    manifest = client.get_manifest(repo, "latest")
    media_types = [layer.media_type for layer in manifest.layers()]
    history = [h.get("created_by", "") for h in
               json.loads(client.read_blob(repo, manifest.config().digest))["history"] if not h.get("empty_layer")]
    assert len(media_types) == len(history)
    assert sum("imagectl: install" in line for line in history) >= 3  # the lock's layers are among them
    assert media_types == [OCI_LAYER_ZSTD] * len(media_types), list(zip(media_types, history))
    versions = provenance_of(client, repo, manifest.digest)["runDetails"]["builder"]["version"]
    assert versions["layer-writer"] == writer_name("zstd")

    # a node with nothing of the image: buildah pulls it from the registry (every layer zstd) and the check passes
    empty_storage(monkeypatch, tmp_path / "node")
    tested = run_cli("test", PROFILE, "--json")
    assert tested.code == 0, tested.err[-3000:]
    assert json.loads(tested.out)["ok"]

    # the same inputs with gzip layers are another build (its own key), not a reuse of the zstd image
    config.write_text(config.read_text().replace('compression = "zstd"\n', "", 1))
    empty_storage(monkeypatch, tmp_path / "runner-gzip")
    again = run_cli("build", PROFILE, "--json")
    assert again.code == 0, again.err[-3000:]
    [gzip_result] = json.loads(again.out)["results"]
    assert gzip_result["status"] == "built" and gzip_result["digest"] != result["digest"]
    layers = client.get_manifest(repo, "latest").layers()
    assert [layer.media_type for layer in layers] == [OCI_LAYER_GZIP] * len(layers)
