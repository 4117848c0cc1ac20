"""push_layout against a real registry (CNCF distribution 2.8, ``docker-registry``) behind a counting proxy.

What was uploaded is measured AT THE REGISTRY: the proxy sums the request bodies of blob uploads
(``/blobs/uploads/``), and the test compares that with what ``LayoutPush`` reports.  Layouts are written by hand
(blobs from ``make_sample_image``) or by ``buildah push ... oci:DIR`` (zstd).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from imagectl.errors import OperationError
from imagectl.registry import OCI_INDEX, RegistryClient, RetryPolicy
from imagectl.registry.layout import BlobDigestError, LayoutError
from imagectl.registry.layout_push import push_layout
from imagectl.registry.manifest import OCI_LAYER_ZSTD
from tests.integration.support.proxy import TamperingProxy
from tests.integration.support.registry import FaultInjectingProxy, RegistryServer, make_sample_image, start_registry
from tests.integration.support.skips import require_binary, skip_or_fail
from tests.integration.support.sleeps import Sleeps

pytestmark = pytest.mark.integration
UPLOADS = "/blobs/uploads/"
SHARED = os.urandom(300_000)  # the "CUDA layer" both images hold (random: gzip cannot shrink it)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[RegistryServer]:
    require_binary("docker-registry")
    try:
        running = start_registry(tmp_path_factory.mktemp("layout-registry"))
    except RuntimeError as exc:
        skip_or_fail(f"no registry: {exc}")
    yield running
    running.stop()


@pytest.fixture()
def proxy(server) -> Iterator[FaultInjectingProxy]:
    counting = FaultInjectingProxy(server.url)
    yield counting
    counting.stop()


def _client(host: str) -> RegistryClient:
    return RegistryClient(host, insecure=True, retry=RetryPolicy(sleep=Sleeps()))


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _write_blob(layout: Path, data: bytes) -> dict[str, object]:
    path = layout / "blobs" / "sha256" / hashlib.sha256(data).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": _digest(data), "size": len(data)}


def write_layout(layout: Path, files: dict[str, bytes], *, architecture: str = "amd64") -> dict[str, object]:
    """An OCI layout of a sample image (one layer per file) in ``layout``; the descriptor of its manifest."""
    image = make_sample_image(files)
    config = json.loads(image.config)
    config["architecture"] = architecture
    manifest = json.loads(image.manifest)
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest["config"].update(_write_blob(layout, config_bytes))
    for layer in image.layers:
        _write_blob(layout, layer)
    raw = json.dumps(manifest).encode()
    descriptor = {"mediaType": image.media_type, **_write_blob(layout, raw),
                  "platform": {"os": "linux", "architecture": architecture}}
    _write_index(layout, [descriptor])
    return descriptor


def _write_index(layout: Path, entries: list[dict[str, object]]) -> None:
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": entries}))


def _config_digest(layout: Path) -> str:
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((layout / "blobs/sha256" / index["manifests"][0]["digest"][7:]).read_bytes())
    return str(manifest["config"]["digest"])


def _blob_sizes(layout: Path) -> dict[str, int]:
    """The sizes of the layout's config and layer blobs (manifests left out)."""
    sizes = {}
    for path in (layout / "blobs" / "sha256").iterdir():
        if b'"schemaVersion"' not in path.read_bytes()[:4096]:
            sizes[f"sha256:{path.name}"] = path.stat().st_size
    return sizes


def test_a_second_repository_mounts_the_shared_layer_and_uploads_only_the_rest(proxy, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    write_layout(first, {"cuda/libs.bin": SHARED, "torch/a.py": b"torch 2.3.0\n"})
    write_layout(second, {"cuda/libs.bin": SHARED, "torch/a.py": b"torch 2.3.1\n"})
    client = _client(proxy.host)

    pushed = push_layout(client, first, "team/torch-2.3.0-cu121", "v1")
    assert pushed.uploaded == pushed.total == sum(_blob_sizes(first).values())
    assert proxy.body_bytes(UPLOADS) == pushed.uploaded  # what the registry received, byte for byte

    before = proxy.body_bytes(UPLOADS)
    lines: list[str] = []
    again = push_layout(client, second, "team/torch-2.3.1-cu121", "v1", on_line=lines.append)
    shared_layer = next(d for d, size in _blob_sizes(second).items() if size > len(SHARED))
    assert again.mounted_from == {shared_layer: "team/torch-2.3.0-cu121"}
    assert again.mounted == _blob_sizes(second)[shared_layer]
    sent = proxy.body_bytes(UPLOADS) - before
    assert sent == again.uploaded == again.total - again.mounted  # config and the torch layer only
    assert sent < len(SHARED)
    assert shared_layer not in again.uploaded_blobs
    assert "mounted from other repositories (1 blob)" in lines[-1]
    assert client.get_manifest("team/torch-2.3.1-cu121", "v1").digest == again.digest
    with client.open_blob("team/torch-2.3.1-cu121", shared_layer) as reader:  # the mounted blob is really there
        assert _digest(reader.read()) == shared_layer


def test_pushing_twice_to_one_repository_uploads_nothing(proxy, tmp_path):
    layout = tmp_path / "img"
    write_layout(layout, {"only.txt": b"once\n"})
    client = _client(proxy.host)
    first = push_layout(client, layout, "team/twice", "one")
    before, catalog = proxy.body_bytes(UPLOADS), proxy.hits("/v2/_catalog")
    second = push_layout(client, layout, "team/twice", "two")
    assert (second.uploaded, second.mounted, second.present) == (0, 0, first.total)
    assert proxy.body_bytes(UPLOADS) == before
    assert proxy.hits("/v2/team/twice" + UPLOADS, "POST") == len(first.uploaded_blobs)  # no session opened again
    assert proxy.hits("/v2/_catalog") == catalog  # nothing missing: the catalog is not read
    assert second.digest == first.digest


def test_an_index_of_two_platforms_is_pushed_with_its_children(proxy, tmp_path):
    layout = tmp_path / "multi"
    amd = write_layout(layout, {"lib.so": b"x86-64 code\n", "common.txt": SHARED[:1000]})
    arm = write_layout(layout, {"lib.so": b"aarch64 code\n", "common.txt": SHARED[:1000]}, architecture="arm64")
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [amd, arm]}).encode()
    _write_index(layout, [{"mediaType": OCI_INDEX, **_write_blob(layout, index)}])
    client = _client(proxy.host)

    pushed = push_layout(client, layout, "team/multi", "latest", discover=False)
    manifest = client.get_manifest("team/multi", "latest")
    assert manifest.is_index and pushed.digest == manifest.digest == _digest(index)
    children = {c.platform["architecture"]: c.digest for c in manifest.children()}
    assert children == {"amd64": amd["digest"], "arm64": arm["digest"]}
    for child in manifest.children():
        blobs = client.get_manifest("team/multi", child.digest).blobs()
        assert all(client.blob_exists("team/multi", blob.digest) for blob in blobs)
    blob_bytes = sum(_blob_sizes(layout).values())
    assert pushed.uploaded == pushed.total == blob_bytes  # the shared layer counted (and sent) once
    assert proxy.body_bytes(UPLOADS) == blob_bytes
    again = push_layout(client, layout, "team/multi", "again", discover=False)
    assert again.uploaded == 0 and again.digest == pushed.digest


def test_a_blob_file_that_does_not_match_its_digest_is_never_committed(proxy, tmp_path):
    layout = tmp_path / "bad"
    write_layout(layout, {"file.txt": b"good bytes\n"})
    layer = next(p for p in (layout / "blobs" / "sha256").iterdir() if p.read_bytes()[:2] == b"\x1f\x8b")
    data = bytearray(layer.read_bytes())
    data[len(data) // 2] ^= 0xFF
    layer.write_bytes(bytes(data))
    client = _client(proxy.host)
    with pytest.raises(BlobDigestError, match=layer.name):
        push_layout(client, layout, "team/bad", "v1", discover=False)
    assert not client.blob_exists("team/bad", f"sha256:{layer.name}")
    assert client.head_manifest("team/bad", "v1") is None


def test_a_directory_that_is_no_layout_is_one_line(tmp_path):
    with pytest.raises(LayoutError, match="not an OCI image layout"):
        push_layout(_client("127.0.0.1:1"), tmp_path, "team/x", "v1")


def test_a_blob_deleted_by_another_writer_before_the_manifest_put_is_a_clear_error(server, tmp_path):
    layout = tmp_path / "racy"
    write_layout(layout, {"file.txt": b"racing\n"})
    tampering = TamperingProxy(server.url)
    try:
        hold = tampering.hold("PUT", "/v2/team/racy/manifests/v1")
        client = _client(tampering.host)
        layer = next(d for d in _blob_sizes(layout) if d != _config_digest(layout))
        failure: list[BaseException] = []

        def push() -> None:
            try:
                push_layout(client, layout, "team/racy", "v1", discover=False)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failure.append(exc)

        worker = threading.Thread(target=push)
        worker.start()
        assert hold.reached.wait(30)
        assert requests.delete(f"{server.url}/v2/team/racy/blobs/{layer}", timeout=10).status_code == 202
        hold.release()
        worker.join(60)
    finally:
        tampering.stop()
    assert failure and isinstance(failure[0], OperationError)
    message = str(failure[0])
    assert f"blob {layer} is not in team/racy" in message and "pushed a moment ago" in message and "\n" not in message


def test_a_buildah_layout_with_zstd_layers_is_pushed_as_zstd(proxy, tmp_path):
    require_binary("buildah")
    root = tmp_path / "storage"
    buildah = ["buildah", "--root", str(root / "root"), "--runroot", str(root / "run"), "--storage-driver", "vfs"]
    content = tmp_path / "hello.txt"
    content.write_bytes(b"hello from buildah\n")
    container = _run(buildah + ["from", "scratch"]).strip()
    _run(buildah + ["copy", container, str(content), "/hello.txt"])
    _run(buildah + ["commit", "--timestamp", "0", container, "localhost/layout-zstd:1"])
    layout = tmp_path / "zstd-layout"
    _run(buildah + ["push", "--format", "oci", "--compression-format", "zstd", "localhost/layout-zstd:1",
                    f"oci:{layout}"])
    try:
        client = _client(proxy.host)
        pushed = push_layout(client, layout, "team/zstd", "v1", discover=False)
        manifest = client.get_manifest("team/zstd", "v1")
        assert [layer.media_type for layer in manifest.layers()] == [OCI_LAYER_ZSTD]
        assert proxy.body_bytes(UPLOADS) == pushed.uploaded == pushed.total
    finally:
        subprocess.run(buildah + ["rm", "--all"], capture_output=True, check=False)
        subprocess.run(buildah + ["rmi", "--all", "--force"], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command[:1] + command[-4:])}: {done.stderr.strip()[-500:]}")
    return done.stdout
