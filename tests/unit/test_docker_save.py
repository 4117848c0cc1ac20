"""imagectl/engine/docker_save.py on save streams written here in the shape Docker 20.10 writes them: the layout does
not depend on how the stream was cut into chunks, a repeated layer (a save's symlink) is one blob, a layer of an
exact multiple of the gzip member size decompresses whole, and a stream that is not the image is refused with one
line.  The real daemon's stream: tests/integration/test_docker_push.py."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from imagectl.engine.docker_save import MEMBER_BYTES, compress_layer, zlib_member, layout_from_save
from imagectl.errors import EngineError


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer_tar(name: str, data: bytes) -> bytes:
    """A tar of one file: its header, its data padded to 512 bytes, the two zero blocks (no record padding)."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512) + b"\0" * 1024


def save_stream(layers: list[bytes], *, diff_ids: list[str] | None = None, repeat_first: bool = False) -> tuple[
        bytes, str]:
    """A save of an image of ``layers`` (the first again on top where ``repeat_first``, as a symlink); its id."""
    stack = [*layers, layers[0]] if repeat_first else layers
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": diff_ids or [sha(data) for data in stack]}}).encode()
    image_id = sha(config)
    names = [f"{n:064x}/layer.tar" for n in range(len(stack))]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add(f"{image_id.removeprefix('sha256:')}.json", config)
        for n, data in enumerate(layers):
            add(names[n], data)
        if repeat_first:
            link = tarfile.TarInfo(names[-1])
            link.type, link.linkname = tarfile.SYMTYPE, f"../{names[0]}"
            tar.addfile(link)
        add("manifest.json", json.dumps([{"Config": f"{image_id.removeprefix('sha256:')}.json", "RepoTags": None,
                                          "Layers": names}]).encode())
    return out.getvalue(), image_id


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def manifest_of(layout: Path, digest: str) -> dict:
    return json.loads((layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_bytes())


def test_the_layout_does_not_depend_on_the_chunks_and_a_repeated_layer_is_one_blob(tmp_path):
    layers = [layer_tar("a", b"x" * (MEMBER_BYTES - 1536)),  # its tar is exactly one gzip member
              layer_tar("b", bytes(range(256)) * 30_000)]
    assert len(layers[0]) == MEMBER_BYTES
    stream, image_id = save_stream(layers, repeat_first=True)
    digests = {layout_from_save(chunks(stream, size), image_id, tmp_path / str(size)) for size in (977, 65536, 1 << 22)}
    assert len(digests) == 1
    layout, digest = tmp_path / "977", digests.pop()
    manifest = manifest_of(layout, digest)
    assert manifest["config"]["digest"] == image_id
    blobs = [layer["digest"] for layer in manifest["layers"]]
    assert blobs[0] == blobs[2] and len(set(blobs)) == 2
    assert (layout / "blobs" / "sha256" / blobs[0].removeprefix("sha256:")).read_bytes() == zlib_member(layers[0])
    for blob, data in zip(blobs, [*layers, layers[0]], strict=True):
        assert gzip.decompress((layout / "blobs" / "sha256" / blob.removeprefix("sha256:")).read_bytes()) == data


@pytest.mark.parametrize("case", ["wrong diff_id", "no manifest.json", "not a tar"])
def test_a_stream_that_is_not_the_image_is_refused_with_one_line(tmp_path, case):
    layers = [layer_tar("a", b"a"), layer_tar("b", b"b")]
    stream, image_id = save_stream(layers, diff_ids=[sha(layers[0]), sha(b"other")] if case == "wrong diff_id"
                                   else None)
    if case == "no manifest.json":
        stream = stream.replace(b"manifest.json", b"manifest.jsoX")
    if case == "not a tar":
        stream = b"\x01" * 2048
    with pytest.raises(EngineError, match=r"^docker save: ") as raised:
        layout_from_save(chunks(stream, 4096), image_id, tmp_path / "layout")
    assert "\n" not in str(raised.value)


def test_a_layer_of_many_members_is_its_runs_compressed_in_order_and_gzip_reads_it_back(tmp_path):
    """The members are compressed side by side (WORKERS threads) and written in the tar's order: the blob is the
    runs of MEMBER_BYTES, each one gzip member, and smaller than the tar (zlib level 1, not stored blocks)."""
    text = b"".join(b"line %d of a layer that compresses\n" % n for n in range(900_000))
    tar = tmp_path / "layer.tar"
    tar.write_bytes(text)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    blob = compress_layer(tar, blobs)
    data = (blobs / blob.digest.removeprefix("sha256:")).read_bytes()
    runs = [text[i:i + MEMBER_BYTES] for i in range(0, len(text), MEMBER_BYTES)]
    assert len(runs) > 6 and data == b"".join(zlib_member(run) for run in runs)
    assert gzip.decompress(data) == text and blob.size == len(data) < len(text) // 3
    assert blob.digest == f"sha256:{hashlib.sha256(data).hexdigest()}"
