"""imagectl.assemble.layer with ``compression = "zstd"`` (and imagectl.assemble.zstd_stream under it): a zstd layer of
real wheels holds the very tar the gzip layer of the same entries holds, read back by the zstandard module and by the
``zstd`` program; one frame with a checksum and no content size; bytes that depend on the entries alone (not on the
sizes the tar comes in); the refusals and the removal of a partial file as for gzip.  The golden digest is in
test_layer_golden.py."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import zstandard

from imagectl.assemble.layer import (
    GZIP_LAYER,
    LAYER_WRITER,
    ZSTD_LAYER,
    Compression,
    LayerBlob,
    LayerWriter,
    blob_name,
    layer_compression,
    writer_name,
)
from imagectl.assemble.wheel import read_wheel
from imagectl.assemble.zstd_stream import PIECE, ZstdStream
from imagectl.errors import BuildError
from tests.skipguard import running_in_ci
from tests.unit.assemble.test_layer import BIG, CONTENT, MIB, corrupt, make_wheel, tar_entries, write_layer


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return make_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def both(wheel, tmp_path_factory) -> dict[Compression, LayerBlob]:
    """The same entries written as a gzip layer and as a zstd layer."""
    folder = tmp_path_factory.mktemp("layers")
    blobs = {}
    for compression in ("gzip", "zstd"):
        blobs[compression] = write_layer(wheel, folder / blob_name("layer", compression), compression)[0]
    return blobs


def zstd_module_reads(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().stream_reader(data).read()


def test_a_zstd_layer_holds_the_tar_of_the_gzip_layer(both):
    gz, zst = both["gzip"], both["zstd"]
    tar = gzip.decompress(gz.path.read_bytes())
    data = zst.path.read_bytes()
    assert data[:4] == b"\x28\xb5\x2f\xfd" and zstd_module_reads(data) == tar  # a zstd frame, of the same tar
    assert zst.diff_id == gz.diff_id == f"sha256:{hashlib.sha256(tar).hexdigest()}"
    assert zst.digest == f"sha256:{hashlib.sha256(data).hexdigest()}" and zst.size == len(data)
    assert zst.descriptor() == {"mediaType": ZSTD_LAYER, "digest": zst.digest, "size": zst.size}
    assert gz.descriptor()["mediaType"] == GZIP_LAYER
    assert zst.size < gz.size  # BIG is random, but the tar's headers and padding compress
    assert zst.path.name == "layer.tar.zst" and gz.path.name == "layer.tar.gz"


def test_the_zstd_program_reads_it_and_checks_its_checksum(both, tmp_path):
    if shutil.which("zstd") is None:
        reason = "the zstd program is not installed (apt-get install zstd; .ci/run installs it)"
        if running_in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    tar = gzip.decompress(both["gzip"].path.read_bytes())
    done = subprocess.run(["zstd", "-dcq", str(both["zstd"].path)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == tar
    broken = tmp_path / "broken.tar.zst"
    data = bytearray(both["zstd"].path.read_bytes())
    data[-2] ^= 0xFF  # in the checksum: the frame still decodes, to bytes whose checksum differs
    broken.write_bytes(bytes(data))
    refused = subprocess.run(["zstd", "-dcq", str(broken)], capture_output=True, check=False)
    assert refused.returncode != 0 and b"checksum" in refused.stderr.lower()


def test_one_frame_with_a_checksum_no_content_size_no_dictionary(both):
    data = both["zstd"].path.read_bytes()
    params = zstandard.get_frame_parameters(data)
    assert params.has_checksum and params.content_size == zstandard.CONTENTSIZE_UNKNOWN and params.dict_id == 0
    reader = zstandard.ZstdDecompressor().decompressobj()
    reader.decompress(data)
    assert reader.eof and reader.unused_data == b""  # the whole blob is one frame


def test_the_entries_read_back_as_in_the_gzip_layer(both):
    """Every entry (names, modes, owners, contents) of the zstd layer is the gzip layer's."""
    import io
    import tarfile

    def entries(tar: bytes) -> list[tuple[str, int, int, int, bytes | None]]:
        with tarfile.open(fileobj=io.BytesIO(tar), mode="r:") as archive:
            return [(i.name, i.mode, i.uid, i.mtime, archive.extractfile(i).read() if i.isreg() else None)
                    for i in archive.getmembers()]

    gz = [(i.name, i.mode, i.uid, i.mtime, data) for i, data in tar_entries(both["gzip"].path)]
    assert entries(zstd_module_reads(both["zstd"].path.read_bytes())) == gz
    assert ("opt/venv/lib/python3.11/site-packages/demo/big.bin", 0o644, 0, 0, BIG) in gz


def test_a_zstd_layer_is_the_same_written_twice(wheel, tmp_path):
    first = write_layer(wheel, tmp_path / "a.tar.zst", "zstd")[0]
    second = write_layer(wheel, tmp_path / "b.tar.zst", "zstd")[0]
    assert (first.digest, first.size) == (second.digest, second.size)
    assert first.path.read_bytes() == second.path.read_bytes()


@pytest.mark.parametrize("sizes", [[1], [511, 512, 513], [PIECE - 1, 3], [3 * PIECE + 7]])
def test_the_stream_does_not_depend_on_the_sizes_it_is_given(sizes):
    data = hashlib.shake_256(b"stream").digest(3 * MIB) + b"\0" * MIB + b"tar header " * 100000

    def compressed(cuts: list[int]) -> bytes:
        out = bytearray()
        stream = ZstdStream(out.extend)
        position, n = 0, 0
        while position < len(data):
            size = cuts[n % len(cuts)]
            stream.write(data[position:position + size])
            position, n = position + size, n + 1
        stream.finish()
        return bytes(out)

    whole = compressed([len(data)])
    assert compressed(sizes if sizes != [1] else [4097]) == whole
    assert zstd_module_reads(whole) == data


def test_an_empty_stream_is_one_empty_frame():
    out = bytearray()
    stream = ZstdStream(out.extend)
    stream.finish()
    assert zstd_module_reads(bytes(out)) == b"" and zstandard.get_frame_parameters(bytes(out)).has_checksum


def test_a_corrupted_member_is_refused_and_leaves_no_zstd_file(wheel, tmp_path):
    bad = corrupt(wheel, "demo/big.bin", tmp_path / "demo-1.0-py3-none-any.whl", 3 * MIB)
    member = read_wheel(bad).member("demo/big.bin")
    dest = tmp_path / "layer.tar.zst"
    with pytest.raises(BuildError, match=r"demo/big\.bin"):
        with LayerWriter(dest, "zstd") as out:
            out.add_bytes("/before.txt", b"written before")
            out.add_member("/x/demo/big.bin", bad, member)
    assert not dest.exists()


def test_a_stored_and_an_empty_member_go_in_as_well(tmp_path):
    content = {"demo/stored.bin": (b"stored " * 1000, zipfile.ZIP_STORED, 0o644),
               "demo/empty.txt": (b"", zipfile.ZIP_DEFLATED, 0o644),
               "demo-1.0.dist-info/WHEEL": CONTENT["demo-1.0.dist-info/WHEEL"]}
    wheel = make_wheel(tmp_path, content)
    with LayerWriter(tmp_path / "l.tar.zst", "zstd") as out:
        for member in read_wheel(wheel).members:
            out.add_member(f"/x/{member.name}", wheel, member)
    tar = zstd_module_reads(out.close().path.read_bytes())
    assert b"stored " * 1000 in tar and b"x/demo/empty.txt" in tar


def test_compression_names_and_the_writer_name():
    assert layer_compression("gzip") == "gzip" and layer_compression("zstd") == "zstd"
    with pytest.raises(BuildError, match="unknown compression 'lz4'"):
        layer_compression("lz4")
    assert writer_name() == writer_name("gzip") == LAYER_WRITER
    version = ".".join(str(part) for part in zstandard.ZSTD_VERSION)
    assert writer_name("zstd") == f"{LAYER_WRITER}+zstd-{version}-l3"


def test_an_install_layer_and_its_files_own_layers_are_all_zstd(tmp_path):
    """images.assembled.group_layer with ``compression="zstd"`` (the assembled build's ``[registry] compression``):
    every layer it writes is zstd, and holds the tar its gzip twin holds."""
    from imagectl.images.assembled import LayerGroup, group_layer
    from imagectl.lock.lockfile import LockedPackage
    from tests.unit.assemble.test_own_layers import SCHEME, release

    wheel = release(tmp_path / "wheels", "1.0")
    group = LayerGroup("framework", "lock-2-framework.txt", (LockedPackage("demo-pkg", "1.0", ()),))
    written = {}
    for compression in ("gzip", "zstd"):
        blobs, stage = tmp_path / f"blobs-{compression}", tmp_path / f"stage-{compression}"
        blobs.mkdir()
        stage.mkdir()
        written[compression] = group_layer(group, {"demo-pkg": wheel}, SCHEME, b"demo-pkg==1.0\n", blobs, stage,
                                           [].append, first=True, own_from=MIB, compression=compression)
    gz, zst = written["gzip"], written["zstd"]
    assert len(zst) == len(gz) == 3  # two files of their own, then the rest
    assert [w.layout_layer().descriptor.media_type for w in zst] == [ZSTD_LAYER] * 3
    assert [w.layout_layer().descriptor.media_type for w in gz] == [GZIP_LAYER] * 3
    assert sorted(w.blob.path.name for w in zst) == ["lock-2-framework+1.tar.zst", "lock-2-framework+2.tar.zst",
                                                     "lock-2-framework.tar.zst"]
    assert [w.blob.diff_id for w in zst] == [w.blob.diff_id for w in gz]
    assert [w.created_by for w in zst] == [w.created_by for w in gz]
    for z, g in zip(zst, gz):
        assert zstd_module_reads(z.blob.path.read_bytes()) == gzip.decompress(g.blob.path.read_bytes())
