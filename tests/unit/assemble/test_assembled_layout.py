"""imagectl.registry.layout.write_layout over a system image layout made here by hand (a LayerWriter layer, a config,
a manifest, index.json, oci-layout), with layers as imagectl.images.assembled.Written hands them over, and
imagectl.assemble.compile.read_probe over probe.json files."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from imagectl.assemble.compile import PROBE_FILE, InstalledDist, Probe, read_probe
from imagectl.assemble.install import venv_scheme
from imagectl.assemble.layer import GZIP_LAYER, LayerBlob, LayerWriter
from imagectl.errors import BuildError
from imagectl.images.assembled import Written
from imagectl.registry.layout import (EPOCH, LayoutError, blob_path, read_small_blob, root_manifest, system_layers,
                                      write_layout)
from imagectl.registry.manifest import OCI_CONFIG, OCI_MANIFEST

SYSTEM_HISTORY = [{"created": "2024-05-01T12:00:00Z", "created_by": "/bin/sh -c #(nop) ADD file:base in /"},
                  {"created": "2024-05-01T12:00:01Z", "created_by": "ENV PATH=/opt/venv/bin:/usr/bin",
                   "empty_layer": True}]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def put_blob(layout: Path, data: bytes) -> str:
    digest = sha(data)
    path = layout / "blobs" / "sha256" / digest.removeprefix("sha256:")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest


def layer(folder: Path, name: str, files: dict[str, bytes]) -> LayerBlob:
    with LayerWriter(folder / name) as out:
        for path, data in files.items():
            out.add_bytes(path, data)
    return out.close()


def make_system(root: Path, manifest_type: str = OCI_MANIFEST,
                extra_diff_ids: tuple[str, ...] = ()) -> tuple[Path, dict, dict, LayerBlob]:
    """A system image layout: (its folder, its config, its manifest, its layer); ``extra_diff_ids``: more in its
    config than it has layers."""
    system = root / "system"
    base = layer(root, "base.tar.gz", {"/etc/os-release": b"ID=demo\n", "/opt/venv/bin/python": b"#!fake\n"})
    put_blob(system, base.path.read_bytes())
    config = {"architecture": "amd64", "os": "linux", "created": "2024-05-01T12:00:01Z",
              "config": {"Env": ["PATH=/opt/venv/bin:/usr/bin"], "Entrypoint": ["/opt/imagectl/entry.sh"],
                         "Labels": {"org.example": "yes"}},
              "rootfs": {"type": "layers", "diff_ids": [base.diff_id, *extra_diff_ids]}, "history": SYSTEM_HISTORY}
    config_bytes = json.dumps(config).encode()
    manifest = {"schemaVersion": 2, "mediaType": manifest_type,
                "config": {"mediaType": OCI_CONFIG, "digest": put_blob(system, config_bytes),
                           "size": len(config_bytes)},
                "layers": [base.descriptor()]}
    manifest_bytes = json.dumps(manifest, indent=1).encode()
    index = {"schemaVersion": 2, "manifests": [{"mediaType": manifest_type, "digest": put_blob(system, manifest_bytes),
                                                "size": len(manifest_bytes)}]}
    (system / "index.json").write_text(json.dumps(index))
    (system / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return system, config, manifest, base


@pytest.fixture
def assembled(tmp_path):
    system, config, manifest, base = make_system(tmp_path)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    lock = layer(blobs, "lock.tar.gz", {"/opt/venv/lib/python3.11/site-packages/demo/__init__.py": b"X = 1\n"})
    pyc = layer(blobs, "pyc.tar.gz", {"/opt/venv/lib/python3.11/site-packages/demo/__pycache__/x.pyc": b"\0pyc"})
    written = [Written(lock, "imagectl: install lock-1-core.txt (demo==1.0)"), Written(pyc, "imagectl: compile 1")]
    dest = write_layout(system, [w.layout_layer() for w in written], tmp_path / "layout")
    return dest, system, config, manifest, base, written


def test_the_layout_is_the_system_image_with_the_new_layers_on_top(assembled):
    dest, system, config, manifest, base, written = assembled
    assert json.loads((dest / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((dest / "index.json").read_text())
    assert index["schemaVersion"] == 2 and len(index["manifests"]) == 1
    entry = index["manifests"][0]
    raw = blob_path(dest, entry["digest"]).read_bytes()
    assert (entry["mediaType"], entry["size"], entry["digest"]) == (OCI_MANIFEST, len(raw), sha(raw))
    body = json.loads(raw)
    assert body["schemaVersion"] == 2 and body["mediaType"] == OCI_MANIFEST
    assert body["layers"] == [*manifest["layers"], *(w.blob.descriptor() for w in written)]
    assert [layer["mediaType"] for layer in body["layers"]] == [GZIP_LAYER] * 3
    assert body["config"]["mediaType"] == OCI_CONFIG


def test_the_config_extends_diff_ids_and_history_and_keeps_the_rest(assembled):
    dest, system, config, manifest, base, written = assembled
    body = json.loads(blob_path(dest, root_manifest(dest).digest).read_bytes())
    descriptor = body["config"]
    raw = read_small_blob(dest, descriptor["digest"])  # checks the digest
    assert descriptor["size"] == len(raw)
    new = json.loads(raw)
    assert new["rootfs"] == {"type": "layers", "diff_ids": [base.diff_id, *(w.blob.diff_id for w in written)]}
    assert new["history"] == [*SYSTEM_HISTORY,
                              {"created": EPOCH, "created_by": "imagectl: install lock-1-core.txt (demo==1.0)"},
                              {"created": EPOCH, "created_by": "imagectl: compile 1"}]
    assert EPOCH == "1970-01-01T00:00:00Z"
    assert {k: v for k, v in new.items() if k not in ("rootfs", "history")} == {
        k: v for k, v in config.items() if k not in ("rootfs", "history")}
    non_empty = [h for h in new["history"] if not h.get("empty_layer")]
    assert len(non_empty) == len(new["rootfs"]["diff_ids"]) == len(body["layers"])


def test_every_blob_is_present_and_matches_its_digest_and_diff_id(assembled):
    dest, system, config, manifest, base, written = assembled
    found = root_manifest(dest)
    assert found.media_type == OCI_MANIFEST and found.digest == json.loads(
        (dest / "index.json").read_text())["manifests"][0]["digest"]
    diff_ids = json.loads(read_small_blob(dest, found.config().digest))["rootfs"]["diff_ids"]
    for descriptor, diff_id in zip(found.layers(), diff_ids, strict=True):
        data = blob_path(dest, descriptor.digest).read_bytes()
        assert (sha(data), len(data)) == (descriptor.digest, descriptor.size)
        assert sha(gzip.decompress(data)) == diff_id
    files = {p.name for p in (dest / "blobs" / "sha256").iterdir()}
    expected = {d.digest.removeprefix("sha256:") for d in [*found.layers(), found.config()]}
    assert files == expected | {found.digest.removeprefix("sha256:")}
    for path in (dest / "blobs" / "sha256").iterdir():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name


def test_system_layers_gives_each_layer_its_blob_file_descriptor_and_diff_id(assembled):
    dest, system, config, manifest, base, written = assembled
    found = system_layers(dest)
    blobs = [base, *(w.blob for w in written)]
    assert [(f.path, f.descriptor.media_type, f.descriptor.digest, f.descriptor.size, f.diff_id) for f in found] == [
        (blob_path(dest, b.digest), GZIP_LAYER, b.digest, b.size, b.diff_id) for b in blobs]
    assert [f.created_by for f in found] == ["", "", ""]  # the config's history says them
    assert system_layers(system)[0].path == blob_path(system, base.digest)


def test_system_layers_refuses_a_config_whose_diff_ids_are_not_one_per_layer(tmp_path):
    system, *_ = make_system(tmp_path, extra_diff_ids=("sha256:" + "0" * 64,))
    with pytest.raises(BuildError, match="the system image's layout has 1 layers and 2 diff_ids"):
        system_layers(system)


def test_the_system_layout_is_left_as_it_was(tmp_path):
    system, *_ = make_system(tmp_path)
    before = {p: p.read_bytes() for p in system.rglob("*") if p.is_file()}
    blob = layer(tmp_path, "new.tar.gz", {"/x": b"x"})
    write_layout(system, [Written(blob, "x").layout_layer()], tmp_path / "layout")
    assert {p: p.read_bytes() for p in system.rglob("*") if p.is_file()} == before
    assert blob.path.read_bytes() == blob_path(tmp_path / "layout", blob.digest).read_bytes()


def test_two_layers_of_the_same_bytes_share_one_blob(tmp_path):
    system, _, manifest, _ = make_system(tmp_path)
    first = layer(tmp_path, "a.tar.gz", {})
    second = layer(tmp_path, "b.tar.gz", {})
    assert first.digest == second.digest
    dest = write_layout(system, [Written(first, "one").layout_layer(), Written(second, "two").layout_layer()],
                        tmp_path / "layout")
    found = root_manifest(dest)
    assert [d.digest for d in found.layers()][1:] == [first.digest, first.digest]
    assert blob_path(dest, first.digest).read_bytes() == first.path.read_bytes()
    config = json.loads(read_small_blob(dest, found.config().digest))
    assert config["rootfs"]["diff_ids"][1:] == [first.diff_id, first.diff_id]


def test_no_new_layers_gives_the_system_images_layers_and_history(tmp_path):
    system, config, manifest, base = make_system(tmp_path)
    dest = write_layout(system, [], tmp_path / "layout")
    found = root_manifest(dest)
    assert [d.digest for d in found.layers()] == [base.digest]
    assert json.loads(read_small_blob(dest, found.config().digest))["history"] == SYSTEM_HISTORY


def test_a_system_layout_that_is_an_index_is_refused(tmp_path):
    system, *_ = make_system(tmp_path, manifest_type="application/vnd.oci.image.index.v1+json")
    with pytest.raises(BuildError, match="no config"):
        write_layout(system, [], tmp_path / "layout")


def test_a_folder_that_is_no_layout_is_refused(tmp_path):
    (tmp_path / "system").mkdir()
    with pytest.raises(LayoutError):
        write_layout(tmp_path / "system", [], tmp_path / "layout")


# ---------------------------------------------------------------------------------------------- read_probe


SCHEME = venv_scheme("/opt/venv", "3.11")
SITE = "/opt/venv/lib/python3.11/site-packages"


def probe_json(stage: Path, **changes) -> Path:
    data = {"purelib": SITE, "platlib": SITE, "scripts": "/opt/venv/bin", "prefix": "/opt/venv", "python": "3.11",
            "pyc": [f"{SITE}/z/__pycache__/m.cpython-311.pyc", f"{SITE}/a/__pycache__/__init__.cpython-311.pyc"],
            "dists": [{"name": "Pip", "version": "24.0", "path": f"{SITE}/pip-24.0.dist-info",
                       "files": [f"{SITE}/pip/__init__.py", "/opt/venv/bin/pip"]}]}
    data.update(changes)
    stage.mkdir(exist_ok=True)
    (stage / PROBE_FILE).write_text(json.dumps(data))
    return stage


def test_a_good_probe_gives_the_pyc_paths_sorted_and_the_dists(tmp_path):
    probe = read_probe(probe_json(tmp_path / "stage"), SCHEME)
    assert probe == Probe((f"{SITE}/a/__pycache__/__init__.cpython-311.pyc", f"{SITE}/z/__pycache__/m.cpython-311.pyc"),
                          (InstalledDist("Pip", "24.0", f"{SITE}/pip-24.0.dist-info",
                                         (f"{SITE}/pip/__init__.py", "/opt/venv/bin/pip")),))


def test_a_probe_without_pyc_or_dists_gives_empty_ones(tmp_path):
    assert read_probe(probe_json(tmp_path / "stage", pyc=None, dists=[]), SCHEME) == Probe((), ())


@pytest.mark.parametrize("changes", [
    {"purelib": "/opt/venv/lib/python3.12/site-packages"},
    {"platlib": "/opt/venv/lib64/python3.11/site-packages"},
    {"scripts": "/opt/venv/Scripts"},
    {"prefix": "/usr/local"},
])
def test_a_probe_whose_folders_are_not_the_schemes_names_both(tmp_path, changes):
    stage = probe_json(tmp_path / "stage", **changes)
    with pytest.raises(BuildError) as caught:
        read_probe(stage, SCHEME)
    message = str(caught.value)
    (key, seen), = changes.items()
    assert f"'{key}': '{seen}'" in message  # what the image has
    assert f"'{key}': '{getattr(SCHEME, key)}'" in message  # what imagectl writes
    assert 'install = "pip"' in message


def test_a_missing_or_unreadable_probe_is_refused(tmp_path):
    with pytest.raises(BuildError, match="no readable probe.json"):
        read_probe(tmp_path, SCHEME)
    (tmp_path / PROBE_FILE).write_text("{not json")
    with pytest.raises(BuildError, match="no readable probe.json"):
        read_probe(tmp_path, SCHEME)
