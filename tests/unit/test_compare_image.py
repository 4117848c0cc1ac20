"""compare_images over hand-made images: layer tars written with tarfile (fixed mtimes), gzip or uncompressed or
zstd, one side an OCI layout on disk (LayoutSource), the other in memory (the registry side's protocol)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagectl.images.compare_image import (
    FileFacts,
    LayoutSource,
    compare_images,
    diff_files,
    first_difference,
    format_comparison,
    layer_history,
    tar_facts,
)
from imagectl.registry.manifest import OCI_LAYER, OCI_LAYER_GZIP, OCI_LAYER_ZSTD, Descriptor, Manifest

Files = dict[str, tuple[bytes, int, int]]  # path -> (content, mode, mtime)


def layer_tar(files: Files) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, (content, mode, mtime) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, mtime
            tar.addfile(info, io.BytesIO(content))
    return raw.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Image:
    manifest_bytes: bytes
    config_bytes: bytes
    blobs: dict[str, bytes]

    @property
    def manifest_value(self) -> Manifest:
        return Manifest.from_bytes(self.manifest_bytes)


def make_image(layers: list[Files], created_by: list[str] | None = None, *, compression: str = "gzip",
               labels: dict[str, str] | None = None) -> Image:
    tars = [layer_tar(files) for files in layers]
    if compression == "gzip":
        blobs, media = [gzip.compress(t, mtime=0) for t in tars], OCI_LAYER_GZIP
    elif compression == "zstd":
        blobs = [subprocess.run(["zstd", "-q", "-c"], input=t, capture_output=True, check=True).stdout for t in tars]
        media = OCI_LAYER_ZSTD
    else:
        blobs, media = tars, OCI_LAYER
    history = [{"created": "1970-01-01T00:00:00Z", "created_by": c}
               for c in (created_by or [f"RUN step {i}" for i in range(len(tars))])]
    history.insert(1, {"created_by": "ENV A=1", "empty_layer": True})
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels or {}},
                         "rootfs": {"type": "layers", "diff_ids": [_digest(t) for t in tars]},
                         "history": history}, sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": _digest(config),
                   "size": len(config)},
        "layers": [{"mediaType": media, "digest": _digest(b), "size": len(b)} for b in blobs],
    }).encode()
    return Image(manifest, config, {_digest(b): b for b in [config, *blobs]})


class MemorySource:
    """The registry side, in memory."""

    name = "registry"

    def __init__(self, image: Image) -> None:
        self.image = image

    def manifest(self) -> Manifest:
        return self.image.manifest_value

    def config(self) -> bytes:
        return self.image.config_bytes

    def open_layer(self, layer: Descriptor) -> io.BytesIO:
        return io.BytesIO(self.image.blobs[layer.digest])


def write_layout(path: Path, image: Image) -> Path:
    blobs = path / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    for digest, data in {**image.blobs, _digest(image.manifest_bytes): image.manifest_bytes}.items():
        (blobs / digest[7:]).write_bytes(data)
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": _digest(image.manifest_bytes),
             "size": len(image.manifest_bytes)}
    (path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [entry]}))
    return path


BASE: Files = {"etc/os-release": (b"ID=debian\n", 0o644, 0)}
APP: Files = {"opt/app/a.py": (b"print(1)\n", 0o644, 0), "opt/app/run": (b"#!/bin/sh\n", 0o755, 0)}


def test_the_same_image_is_reproduced(tmp_path):
    image = make_image([BASE, APP])
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", image)), MemorySource(image))
    assert result.reproduced and result.layer is None
    assert format_comparison(result) == [f"reproduced {_digest(image.manifest_bytes)}"]


def test_a_changed_file_names_the_layer_its_history_and_the_file_on_both_sides(tmp_path):
    registry = make_image([BASE, APP], ["FROM base", "COPY app /opt/app"])
    changed = {**APP, "opt/app/a.py": (b"print(2)\n", 0o644, 1700000000)}
    rebuilt = make_image([BASE, changed], ["FROM base", "COPY app /opt/app"])
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    assert not result.reproduced and result.layer is not None
    layer = result.layer
    assert layer.index == 1  # the bottom layer is the same
    assert layer.rebuilt_created_by == layer.registry_created_by == "COPY app /opt/app"  # empty_layer entries skipped
    assert [f.path for f in layer.files] == ["opt/app/a.py"] and layer.files_total == 1
    diff = layer.files[0]
    assert diff.rebuilt == FileFacts("file", 9, hashlib.sha256(b"print(2)\n").hexdigest(), "0o644", 1700000000, "0:0")
    assert diff.registry is not None and diff.registry.sha256 == hashlib.sha256(b"print(1)\n").hexdigest()
    assert diff.registry.mtime == 0
    text = "\n".join(format_comparison(result))
    assert "first differing layer: #1" in text and "opt/app/a.py" in text and "mtime 1.7e+09" in text
    assert layer.rebuilt_diff_id != layer.registry_diff_id and layer.registry_diff_id in text


def test_a_mode_or_an_mtime_alone_is_a_difference():
    ours = tar_facts(io.BytesIO(layer_tar({"x": (b"same", 0o755, 5)})))
    theirs = tar_facts(io.BytesIO(layer_tar({"x": (b"same", 0o644, 6)})))
    [diff] = diff_files(ours, theirs)
    assert (diff.rebuilt.mode, diff.registry.mode) == ("0o755", "0o644")
    assert (diff.rebuilt.mtime, diff.registry.mtime) == (5, 6)


def test_a_file_on_one_side_only_is_named_with_absent_on_the_other(tmp_path):
    registry = make_image([BASE, APP])
    rebuilt = make_image([BASE, {**APP, "tmp/leftover": (b"x", 0o600, 0)}])
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    [diff] = result.layer.files
    assert diff.path == "tmp/leftover" and diff.registry is None
    assert "(absent)" in "\n".join(format_comparison(result))


def test_an_extra_layer_is_the_first_difference(tmp_path):
    registry = make_image([BASE])
    rebuilt = make_image([BASE, APP])
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    assert result.layer.index == 1 and result.layer.registry_diff_id == ""
    assert {f.path for f in result.layer.files} == set(APP)


def test_the_same_layers_with_another_config_name_the_config_keys(tmp_path):
    registry = make_image([BASE], labels={"a": "1"})
    rebuilt = make_image([BASE], labels={"a": "2"})
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    assert result.layer is None and result.config_keys == ("config.Labels",) and result.history is None
    assert "config differs in: config.Labels" in format_comparison(result)


def test_a_differing_history_entry_is_shown_on_both_sides(tmp_path):
    registry = make_image([BASE, APP], ["FROM base", "COPY app /opt/app"])
    rebuilt = make_image([BASE, APP], ["FROM base", "COPY --chown=0:0 app /opt/app"])
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    assert result.layer is None and result.config_keys == ("history",)
    index, ours, theirs = result.history
    assert index == 2 and "--chown" in ours and "--chown" not in theirs  # entry 1 is the empty ENV layer
    assert "first differing history entry: #2" in format_comparison(result)


def test_the_same_tars_compressed_differently_differ_only_in_their_blobs(tmp_path):
    registry = make_image([BASE, APP], compression="gzip")
    rebuilt = make_image([BASE, APP], compression="none")
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    assert not result.reproduced and result.layer is None and result.config_keys == ()
    assert "compressed bytes" in result.note


@pytest.mark.skipif(shutil.which("zstd") is None, reason="needs the zstd command to make zstd layers")
def test_zstd_layers_are_compared_file_by_file(tmp_path):
    registry = make_image([BASE, APP], compression="zstd")
    rebuilt = make_image([BASE, {**APP, "opt/app/run": (b"#!/bin/bash\n", 0o755, 0)}], compression="zstd")
    result = compare_images(LayoutSource(write_layout(tmp_path / "l", rebuilt)), MemorySource(registry))
    assert [f.path for f in result.layer.files] == ["opt/app/run"]


def test_first_difference_and_layer_history_are_pure():
    assert first_difference(["a", "b"], ["a", "b"]) is None
    assert first_difference(["a", "b"], ["a", "c"]) == 1
    assert first_difference(["a"], ["a", "b"]) == 1
    config = {"history": [{"created_by": "FROM x"}, {"created_by": "ENV y", "empty_layer": True},
                          {"created_by": "RUN z"}]}
    assert layer_history(config) == ["FROM x", "RUN z"]
