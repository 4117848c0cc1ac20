"""imagectl.images.assembled.group_layer with ``own_from`` (``[framework] layers``' ``own_layer_mib``): each file a
wheel stores in at least that many bytes is a layer of its own, so that a release keeping one of its big files
byte for byte gives the same blob for it, while the rest of the install layer changes; the files and RECORD are
those of the layer written whole."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

from imagectl.assemble.install import venv_scheme
from imagectl.assemble.layer import record_hash
from imagectl.errors import MatrixError
from imagectl.images.assembled import INSTALL_STEP, LayerGroup, group_layer
from imagectl.lock.lockfile import LockedPackage
from imagectl.matrix.load import load_matrix
from tests.conftest import REPO
from tests.unit.assemble.test_install import FILES, layer_files, make_wheel, read_record

SCHEME = venv_scheme("/opt/venv", "3.11")
SITE = SCHEME.purelib
MIB = 1 << 20
SAME = hashlib.shake_256(b"the same in both releases").digest(2 * MIB)  # incompressible: stored in 2 MiB


def release(folder: Path, version: str) -> Path:
    """demo_pkg ``version``: the small files of test_install's wheel, a big file the same in every release, a big
    file of this release's own, and a small one under the threshold."""
    files = {member.replace("demo_pkg-1.0", f"demo_pkg-{version}"): value for member, value in FILES.items()}
    files[f"demo_pkg-{version}.dist-info/METADATA"] = (f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {version}\n"
                                                     .encode(), 0o644)
    files["demo_pkg/lib/libsame.so"] = (SAME, 0o755)
    files["demo_pkg/lib/libmine.so"] = (hashlib.shake_256(version.encode()).digest(MIB + MIB // 2), 0o755)
    files["demo_pkg/lib/small.so"] = (hashlib.shake_256(b"small" + version.encode()).digest(MIB // 2), 0o755)
    folder.mkdir(parents=True)
    return make_wheel(folder, files, name=f"demo_pkg-{version}-py3-none-any.whl")


def write(tmp_path: Path, version: str, own_from: int, lines: list[str] | None = None) -> list:
    wheel = release(tmp_path / f"wheels-{version}-{own_from}", version)
    group = LayerGroup("framework", "lock-2-framework.txt", (LockedPackage("demo-pkg", version, ()),))
    blobs, stage = tmp_path / f"blobs-{version}-{own_from}", tmp_path / f"stage-{version}-{own_from}"
    blobs.mkdir()
    stage.mkdir()
    return group_layer(group, {"demo-pkg": wheel}, SCHEME, f"demo-pkg=={version}\n".encode(), blobs, stage,
                       (lines if lines is not None else []).append, first=True, own_from=own_from)


def test_each_big_file_is_a_layer_of_its_own_the_smallest_first_before_the_rest(tmp_path):
    lines: list[str] = []
    layers = write(tmp_path, "1.0", MIB, lines)
    assert [w.created_by for w in layers] == [  # libmine.so (1.5 MiB) before libsame.so (2 MiB), as the wheel has not
        f"{INSTALL_STEP} {SITE}/demo_pkg/lib/libmine.so (a file of demo-pkg==1.0)",
        f"{INSTALL_STEP} {SITE}/demo_pkg/lib/libsame.so (a file of demo-pkg==1.0)",
        f"{INSTALL_STEP} /opt/imagectl/lock-2-framework.txt (demo-pkg==1.0)"]
    own = [layer_files(w.blob.path) for w in layers[:2]]
    assert [sorted(files) for files in own] == [[f"{SITE}/demo_pkg/lib/libmine.so"],
                                                [f"{SITE}/demo_pkg/lib/libsame.so"]]
    assert own[1][f"{SITE}/demo_pkg/lib/libsame.so"] == (SAME, 0o755)
    with tarfile.open(layers[1].blob.path, "r:gz") as tar:  # its folders come with it, as in any layer
        assert {i.name for i in tar.getmembers() if i.isdir()} >= {"opt", "opt/venv", SITE.lstrip("/") + "/demo_pkg"}
    rest = layer_files(layers[-1].blob.path)
    assert f"{SITE}/demo_pkg/lib/small.so" in rest and f"{SITE}/demo_pkg/lib/libsame.so" not in rest
    assert rest["/opt/imagectl/lock-2-framework.txt"] == (b"demo-pkg==1.0\n", 0o644)
    assert "wrote the framework layer" in lines[0] and "and 2 of its files' own" in lines[0]
    # blobs named by the lock file: a layer the matrix calls "pyc" or "files" cannot take the .pyc layer's file
    assert [w.blob.path.name for w in layers] == ["lock-2-framework+2.tar.gz", "lock-2-framework+1.tar.gz",
                                                  "lock-2-framework.tar.gz"]


def test_the_layers_hold_the_files_and_record_of_the_layer_written_whole(tmp_path):
    split, [whole] = write(tmp_path, "1.0", MIB), write(tmp_path, "1.0", 0)
    together: dict = {}
    for written in split:
        for path, value in layer_files(written.blob.path).items():
            assert path not in together, path  # each file in one layer only
            together[path] = value
    assert together == layer_files(whole.blob.path)
    record = {row[0]: row[1:] for row in read_record(together[f"{SITE}/demo_pkg-1.0.dist-info/RECORD"][0])}
    assert record["demo_pkg/lib/libsame.so"] == [record_hash(hashlib.sha256(SAME).digest()), str(len(SAME))]


def test_a_big_file_a_new_release_keeps_is_the_same_blob_and_the_rest_is_not(tmp_path):
    old, new = write(tmp_path, "1.0", MIB), write(tmp_path, "1.1", MIB)
    assert old[1].blob.digest == new[1].blob.digest and old[1].blob.diff_id == new[1].blob.diff_id  # libsame.so
    assert old[0].blob.digest != new[0].blob.digest  # libmine.so
    assert old[2].blob.digest != new[2].blob.digest  # the rest: METADATA, RECORD, the lock file
    again = write(tmp_path, "1.1", 3 * MIB)  # over every file's stored size: no layer of its own
    assert [w.created_by for w in again] == [f"{INSTALL_STEP} /opt/imagectl/lock-2-framework.txt (demo-pkg==1.1)"]


def test_the_matrix_says_which_layers_and_from_what_size(shipped_matrix):
    torch = shipped_matrix.frameworks["torch"]
    assert torch.own_layer_mib("framework") == 8 and torch.own_layer_mib("cuda") == 0
    assert [name for name, _ in torch.layers] == ["cuda", "libs", "framework", "rest"]


@pytest.mark.parametrize("value", ["0", "4097", "true", '"8"', "1.5"])
def test_an_own_layer_size_that_is_not_a_whole_number_of_mib_is_refused(tmp_path, value):
    folder = tmp_path / "matrices"
    shutil.copytree(REPO / "matrices", folder)
    path = folder / "torch.toml"
    path.write_text(path.read_text().replace("own_layer_mib = 8", f"own_layer_mib = {value}", 1))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "own_layer_mib = " in text)
    with pytest.raises(MatrixError, match=rf"torch\.toml:{line}: layer framework: own_layer_mib must be a whole "):
        load_matrix([folder])


def test_files_of_one_size_are_layered_by_path(tmp_path):
    data = hashlib.shake_256(b"equal").digest(MIB + 1)
    files = {**FILES, "demo_pkg/lib/zz.so": (data, 0o644), "demo_pkg/lib/aa.so": (data, 0o644)}
    wheel = make_wheel(tmp_path, files)
    group = LayerGroup("framework", "lock-2-framework.txt", (LockedPackage("demo-pkg", "1.0", ()),))
    (tmp_path / "blobs").mkdir()
    (tmp_path / "stage").mkdir()
    layers = group_layer(group, {"demo-pkg": wheel}, SCHEME, b"", tmp_path / "blobs", tmp_path / "stage",
                         [].append, first=True, own_from=MIB)
    assert [w.created_by.split(" (")[0].rsplit("/", 1)[-1] for w in layers[:2]] == ["aa.so", "zz.so"]
    assert layers[0].blob.digest != layers[1].blob.digest  # another path: another layer, though the bytes are one
