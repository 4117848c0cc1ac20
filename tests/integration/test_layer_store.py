"""Layers staged into containers-storage with its own CLI (``containers-storage import-layer``) before an assembled
image is loaded are the layers the load would have made: the same image, the same files; a layer that is not
what its diff_id says is refused; layers a failed build staged are removed.  Real buildah, real stores."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagectl.assemble.layer import FILE_MODE, LayerWriter
from imagectl.engine.buildah import BuildahEngine
from imagectl.engine.layer_store import LayerStager, LayerStore, storage_layer_id
from imagectl.errors import BuildError
from imagectl.images.assembled import Written
from imagectl.registry.layout import write_layout
from imagectl.registry.manifest import sha256_digest
from tests.integration.conftest import empty_storage
from tests.integration.support.skips import require_binary

pytestmark = pytest.mark.integration


def mounts_under(folder: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(f"{folder}/")]


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[Path, list[Written]]]:
    """An image of three layers written by imagectl's layer writer on an empty system image, as an OCI layout."""
    require_binary("buildah")
    require_binary("containers-storage")
    system = tmp_path / "system"
    (system / "blobs" / "sha256").mkdir(parents=True)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/bin/true"]},
                         "rootfs": {"type": "layers", "diff_ids": []}, "history": []}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": sha256_digest(config), "size": len(config)}, "layers": []}).encode()
    for data in (config, manifest):
        (system / "blobs" / "sha256" / sha256_digest(data).removeprefix("sha256:")).write_bytes(data)
    (system / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (system / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha256_digest(manifest),
         "size": len(manifest)}]}))
    written = []
    for n, files in enumerate([{"/opt/a/one.txt": b"one\n" * 1000, "/opt/a/two.bin": bytes(range(256)) * 64},
                               {"/opt/a/one.txt": b"replaced\n", "/opt/b/three.txt": b"three\n"},
                               {"/opt/c/four.txt": b"four\n"}]):
        with LayerWriter(tmp_path / f"layer-{n}.tar.gz") as out:
            for path, data in files.items():
                out.add_bytes(path, data, FILE_MODE)
        written.append(Written(out.close(), f"layer {n}"))
    yield write_layout(system, [w.layout_layer() for w in written], tmp_path / "layout"), written
    for mount in reversed(mounts_under(tmp_path)):  # buildah leaves a store's overlay folder bind-mounted on itself
        subprocess.run(["umount", mount], check=False)


def store_layers(engine: BuildahEngine) -> set[str]:
    store = engine._layer_store()
    assert store is not None
    done = subprocess.run([*store._argv, "layers", "--json"], capture_output=True, text=True, check=False)
    return {layer["id"] for layer in json.loads(done.stdout or "[]") or ()}


def exported_files(engine: BuildahEngine, image_id: str, dest: Path) -> dict[str, dict[str, str]]:
    """Each layer of ``image_id`` exported from the engine (``buildah push oci:``), by diff_id: its members' sha256."""
    engine.export_layout(image_id, dest)
    index = json.loads((dest / "index.json").read_text())
    blob = lambda digest: dest / "blobs" / "sha256" / digest.removeprefix("sha256:")  # noqa: E731
    manifest = json.loads(blob(index["manifests"][0]["digest"]).read_text())
    layers = {}
    for descriptor in manifest["layers"]:
        raw = gzip.decompress(blob(descriptor["digest"]).read_bytes())
        layers[sha256_digest(raw)] = _members(raw)
    return layers


def _members(raw: bytes) -> dict[str, str]:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name: hashlib.sha256(tar.extractfile(m).read()).hexdigest() if m.isfile() else m.type.decode()
                for m in tar.getmembers()}


def test_staged_layers_are_the_ones_the_load_makes(tmp_path, monkeypatch, layout):
    path, written = layout
    diff_ids = [w.blob.diff_id for w in written]
    empty_storage(monkeypatch, tmp_path / "staged")
    staged = BuildahEngine()
    made = [staged.stage_layer(diff_ids[:n], lambda w=w: w.blob.path) for n, w in enumerate(written, 1)]
    assert made == ["imported"] * 3
    assert mounts_under(tmp_path) == []  # the program leaves nothing mounted behind it
    # a layer already there is not imported again: its blob is not even asked for
    assert staged.stage_layer(diff_ids[:2], lambda: pytest.fail("blob asked for")) == "present"
    ids = {storage_layer_id(diff_ids[:n]) for n in (1, 2, 3)}
    assert store_layers(staged) == ids
    image = staged.load_layout(path)
    assert store_layers(staged) == ids  # the load made no layer of its own: it took the staged ones
    staged.discard_staged()
    assert store_layers(staged) == ids  # the image uses them: nothing to discard

    empty_storage(monkeypatch, tmp_path / "loaded")
    loaded = BuildahEngine()
    assert loaded.load_layout(path) == image
    assert store_layers(loaded) == ids
    # the same files in the same layers, read back out of each store
    files = exported_files(staged, image, tmp_path / "out-staged")
    assert files == exported_files(loaded, image, tmp_path / "out-loaded")
    assert list(files) == diff_ids and files[diff_ids[1]]["opt/a/one.txt"] == hashlib.sha256(b"replaced\n").hexdigest()


def test_a_layer_that_is_not_its_diff_id_is_refused_and_removed(tmp_path, monkeypatch, layout):
    _, written = layout
    empty_storage(monkeypatch, tmp_path / "store")
    engine = BuildahEngine()
    wrong = [written[1].blob.diff_id]  # claims layer 1's content, brings layer 0's blob
    with pytest.raises(BuildError, match=f"not the layer {wrong[0]} it stands for"):
        engine.stage_layer(wrong, lambda: written[0].blob.path)
    assert store_layers(engine) == set()


def test_layers_a_failed_build_staged_are_removed(tmp_path, monkeypatch, layout):
    _, written = layout
    diff_ids = [w.blob.diff_id for w in written]
    empty_storage(monkeypatch, tmp_path / "store")
    engine = BuildahEngine()
    for n, w in enumerate(written[:2], 1):
        engine.stage_layer(diff_ids[:n], lambda w=w: w.blob.path)
    assert len(store_layers(engine)) == 2
    engine.discard_staged()
    assert store_layers(engine) == set()


def test_without_the_program_nothing_is_staged(tmp_path, monkeypatch, layout):
    path, written = layout
    monkeypatch.setattr("imagectl.engine.layer_store.TOOL", "containers-storage-not-installed")
    empty_storage(monkeypatch, tmp_path / "store")
    engine = BuildahEngine()
    assert engine.stage_layer([written[0].blob.diff_id], lambda: written[0].blob.path) == "unsupported"
    assert engine.load_layout(path)
    assert LayerStore.of({"GraphRoot": "/x", "RunRoot": "/y", "GraphDriverName": "overlay"}) is None


def test_a_diff_id_that_is_not_sha256_stops_the_staging_and_leaves_the_layers_to_the_load(tmp_path, monkeypatch,
                                                                                          layout):
    _, written = layout
    empty_storage(monkeypatch, tmp_path / "store")
    stager = LayerStager(BuildahEngine())
    stager.add("md5:" + "0" * 32, lambda: written[0].blob.path)
    stager.add(written[1].blob.diff_id, lambda: written[1].blob.path)
    stager.close()
    assert "not a sha256 diff_id" in stager.stopped
    assert stager.describe().startswith("layers not staged (not a sha256 diff_id")
    assert stager.done == {"imported": 0, "present": 0}
