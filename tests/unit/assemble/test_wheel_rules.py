"""The installer's rules for a wheel (issue 35 item 4, issue 36 item 5): Wheel-Version, a member name twice in the
zip, paths too deep or long, metadata files over their cap, memory that does not grow with a member (measured with
tracemalloc: what Python allocates), and two wheels of a lock installing one path (imagectl.assemble.conflicts), in
one layer or across layers, checked before a layer of them is written (imagectl.images.assembled._lock_layers
against a loopback index)."""

from __future__ import annotations

import re
import struct
import tracemalloc
import warnings
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from imagectl.assemble.conflicts import LockPaths
from imagectl.assemble.install import MAX_DEPTH, SCRIPT_CAP, install_wheel, source_files
from imagectl.assemble.layer import LayerWriter
from imagectl.assemble.wheel import METADATA_CAP, member_chunks, read_wheel
from imagectl.errors import BuildError
from imagectl.images.assembled import LayerGroup, _lock_layers
from imagectl.lock.lockfile import package
from tests.unit.assemble.test_fetch import PLATFORM, _serving
from tests.unit.assemble.test_install import DIST, FILES, SCHEME, WHEEL_FILE, layer_files, make_wheel

MIB = 1 << 20
WHEEL = f"{DIST}.dist-info/WHEEL"


def install(wheel: Path, dest: Path) -> dict[str, tuple[bytes, int]]:
    """read_wheel, install_wheel into a layer at ``dest`` and source_files, as group_layer does; the layer's files."""
    read = read_wheel(wheel)
    with LayerWriter(dest) as out:
        install_wheel(read, SCHEME, out)
    source_files(read, SCHEME, dest.parent / "stage")
    return layer_files(dest)


def refused(wheel: Path, tmp_path: Path) -> str:
    """The one line install() refuses ``wheel`` with; nothing was written."""
    with pytest.raises(BuildError) as caught:
        install(wheel, tmp_path / "l.tar.gz")
    assert not (tmp_path / "l.tar.gz").exists() and not (tmp_path / "stage").exists()
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400, message
    return message


def peak_mib(work: Callable[[], object]) -> float:
    """What Python allocated at most while ``work`` ran, in MiB."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / MIB
    finally:
        tracemalloc.stop()


def wheel_of(folder: Path, project: str, files: dict[str, tuple[bytes, int]]) -> Path:
    """A wheel of ``project`` 1.0 holding ``files`` besides its METADATA and WHEEL."""
    dist = f"{project}-1.0.dist-info"
    meta = {f"{dist}/METADATA": (f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n".encode(), 0o644),
            f"{dist}/WHEEL": (WHEEL_FILE, 0o644)}
    folder.mkdir(parents=True, exist_ok=True)
    return make_wheel(folder, {**files, **meta}, name=f"{project}-1.0-py3-none-any.whl")


# ---------------------------------------------------------------------------------------------- Wheel-Version


@pytest.mark.parametrize(("wheel_file", "says"), [
    (WHEEL_FILE.replace(b"1.0", b"2.0"), "Wheel-Version 2.0 is not supported (only 1.x wheels are)"),
    (WHEEL_FILE.replace(b"1.0", b"0.9"), "Wheel-Version 0.9 is not supported (only 1.x wheels are)"),
    (WHEEL_FILE.replace(b"1.0", b"one"), "Wheel-Version 'one' is not MAJOR.MINOR"),
    (WHEEL_FILE.replace(b"Wheel-Version: 1.0\n", b""), f"{WHEEL} has no Wheel-Version"),
    (None, f"no {WHEEL} file (a wheel must have one)"),
])
def test_a_wheel_version_other_than_1_x_or_none_is_refused_naming_the_wheel(tmp_path, wheel_file, says):
    wheel = make_wheel(tmp_path, changes={WHEEL: wheel_file})
    assert refused(wheel, tmp_path) == f"{wheel.name}: {says}"


def test_a_later_minor_wheel_version_is_installed(tmp_path):
    wheel = make_wheel(tmp_path, changes={WHEEL: WHEEL_FILE.replace(b"1.0", b"1.9")})
    assert read_wheel(wheel).wheel_version == (1, 9)
    assert f"{SCHEME.purelib}/demo_pkg/core.py" in install(wheel, tmp_path / "l.tar.gz")


# ---------------------------------------------------------------------------------------------- hostile members


def test_a_member_name_twice_in_the_zip_is_refused_before_anything_is_written(tmp_path):
    wheel = make_wheel(tmp_path)
    with warnings.catch_warnings(), zipfile.ZipFile(wheel, "a") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name, and writes it
        archive.writestr("demo_pkg/core.py", b"import os; os.system('evil')\n")
    assert refused(wheel, tmp_path) == f"{wheel.name}: member demo_pkg/core.py is in the zip twice"


def test_a_member_2000_folders_deep_is_one_line_not_a_recursion_error(tmp_path):
    deep = "/".join(["d"] * 2000)
    for name in (f"{deep}/x.txt", f"{deep}/x.py"):  # a .py file is staged for compiling too
        folder = tmp_path / name[-2:]
        folder.mkdir()
        wheel = make_wheel(folder, {**FILES, name: (b"x = 1\n", 0o644)})
        message = refused(wheel, folder)
        assert re.fullmatch(f"{re.escape(wheel.name)}: member 'd/d/d/[d/]+\\.\\.\\.\\(400[45] characters\\)' is 2000 "
                            f"folders deep \\(at most {MAX_DEPTH} are installed\\)", message), message


def test_a_name_longer_than_the_file_system_takes_is_refused(tmp_path):
    wheel = make_wheel(tmp_path, {**FILES, "demo_pkg/" + "n" * 300 + ".py": (b"x = 1\n", 0o644)})
    assert "would be a path of" in refused(wheel, tmp_path)


def test_paths_as_deep_as_real_wheels_go_are_installed(tmp_path):
    name = "/".join(["d"] * 20) + "/x.py"  # the deepest of 967 real wheels: 16 folders
    wheel = make_wheel(tmp_path, {**FILES, name: (b"x = 1\n", 0o644)})
    assert install(wheel, tmp_path / "l.tar.gz")[f"{SCHEME.purelib}/{name}"][0] == b"x = 1\n"


# ---------------------------------------------------------------------------------------------- bounded memory


def test_a_member_inflates_a_mebibyte_at_a_time_whatever_it_expands_to(tmp_path):
    """64 MiB of NULs deflate to 64 kB: one read of its stored bytes inflated at once is the whole member."""
    wheel = make_wheel(tmp_path, {**FILES, "demo_pkg/zeros.bin": (bytes(64 * MIB), 0o644)})
    read = read_wheel(wheel)
    member = read.member("demo_pkg/zeros.bin")
    assert member.stored_size < MIB
    pieces = [len(out) for _, out in member_chunks(wheel, member, exact=True)]
    assert sum(pieces) == 64 * MIB and max(pieces) <= MIB


@pytest.mark.parametrize("name", ["demo_pkg/zeros.bin", "demo_pkg/zeros.py", f"{DIST}.data/scripts/zeros"])
def test_installing_a_big_member_takes_memory_that_does_not_grow_with_it(tmp_path, name):
    """A data file (copied as stored), a .py file (staged for compiling too) and a script that is no #!python one
    (maturin's is a 27 MB binary): none is read whole.  Before, each took 64 MiB and more."""
    wheel = make_wheel(tmp_path, {**FILES, name: (bytes(64 * MIB), 0o755)})
    dest = tmp_path / "l.tar.gz"

    def work() -> None:
        read = read_wheel(wheel)
        with LayerWriter(dest) as out:
            install_wheel(read, SCHEME, out)
        source_files(read, SCHEME, tmp_path / "stage")

    assert peak_mib(work) < 16
    installed = {"demo_pkg/zeros.bin": f"{SCHEME.purelib}/demo_pkg/zeros.bin",
                 "demo_pkg/zeros.py": f"{SCHEME.purelib}/demo_pkg/zeros.py",
                 f"{DIST}.data/scripts/zeros": f"{SCHEME.scripts}/zeros"}[name]
    assert layer_files(dest)[installed] == (bytes(64 * MIB), 0o755)


def test_entry_points_over_the_cap_are_one_line_without_reading_them(tmp_path):
    big = b"[console_scripts]\n" + b"# padding\n" * ((METADATA_CAP // 10) + 1)
    wheel = make_wheel(tmp_path, changes={f"{DIST}.dist-info/entry_points.txt": big})
    message = ""

    def work() -> None:
        nonlocal message
        message = refused(wheel, tmp_path)

    assert peak_mib(work) < 8
    assert message == (f"{wheel.name}: member {DIST}.dist-info/entry_points.txt is {len(big)} bytes, more than the "
                       "4 MiB read of such a file")


def test_a_member_that_inflates_past_the_size_the_zip_says_stops_there(tmp_path):
    """The zip says entry_points.txt is 40 bytes; its stream holds 32 MiB: reading stops a MiB past 40 bytes."""
    entry = f"{DIST}.dist-info/entry_points.txt"
    wheel = make_wheel(tmp_path, changes={entry: b"[console_scripts]\n" + bytes(32 * MIB)})
    _claim_size(wheel, f"{DIST}.dist-info/entry_points.txt", 40)
    message = ""

    def work() -> None:
        nonlocal message
        message = refused(wheel, tmp_path)

    assert peak_mib(work) < 8
    assert message == (f"{wheel.name}: member {DIST}.dist-info/entry_points.txt inflates to more than the 40 bytes the "
                       "zip says")


def test_a_python_script_over_the_cap_is_refused(tmp_path):
    script = b"#!python\n" + b"#" * SCRIPT_CAP
    wheel = make_wheel(tmp_path, {**FILES, f"{DIST}.data/scripts/big": (script, 0o755)})
    assert "more than the 4 MiB read of such a file" in refused(wheel, tmp_path)


def _claim_size(wheel: Path, name: str, size: int) -> None:
    """Make the zip's local header and central directory say member ``name`` inflates to ``size`` bytes."""
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(name)
    data = bytearray(wheel.read_bytes())
    struct.pack_into("<I", data, info.header_offset + 22, size)
    central = data.index(b"PK\x01\x02")
    while True:  # the central directory entry of ``name``
        name_len = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46:central + 46 + name_len] == name.encode():
            struct.pack_into("<I", data, central + 24, size)
            break
        extra, comment = struct.unpack_from("<HH", data, central + 30)
        central += 46 + name_len + extra + comment
    wheel.write_bytes(bytes(data))


# ---------------------------------------------------------------------------------------------- two wheels, one path


def test_two_wheels_installing_different_bytes_at_one_path_are_refused_naming_both(tmp_path):
    one = wheel_of(tmp_path / "a", "alpha", {"shared/__init__.py": (b"A = 1\n", 0o644)})
    other = wheel_of(tmp_path / "b", "beta", {"shared/__init__.py": (b"B = 1\n", 0o644)})
    with pytest.raises(BuildError) as caught:
        LockPaths(SCHEME).add([one, other])
    assert str(caught.value) == (f"{one.name} and {other.name} install different bytes at "
                                 f"{SCHEME.purelib}/shared/__init__.py")


def test_identical_bytes_at_one_path_are_fine_as_nvidia_init_in_each_nvidia_wheel(tmp_path):
    paths = LockPaths(SCHEME)
    projects = ("nvidia_cublas_cu12", "nvidia_cudnn_cu12", "nvidia_nccl_cu12")
    wheels = [wheel_of(tmp_path / p, p, {"nvidia/__init__.py": (b"", 0o644), f"nvidia/{p}/x.so": (p.encode(), 0o755)})
              for p in projects]
    paths.add(wheels[:2])
    paths.add(wheels[2:])  # a later layer
    # a #!python script in two wheels: the same bytes once its first line is rewritten
    paths.add([wheel_of(tmp_path / p, p, {f"{p}-1.0.data/scripts/tool": (b"#!python\nprint('tool')\n", 0o755)})
               for p in ("s_one", "s_two")])


@pytest.mark.parametrize("order", ["file first", "folder first"])
def test_a_file_where_another_wheel_has_a_folder_is_refused_naming_both(tmp_path, order):
    file = wheel_of(tmp_path / "f", "filer", {"pkg/data": (b"a file\n", 0o644)})
    folder = wheel_of(tmp_path / "d", "folderer", {"pkg/data/table.json": (b"{}\n", 0o644)})
    with pytest.raises(BuildError) as caught:
        LockPaths(SCHEME).add([file, folder] if order == "file first" else [folder, file])
    site = SCHEME.purelib
    assert str(caught.value) == {
        "file first": f"{folder.name} installs {site}/pkg/data/table.json in a folder {site}/pkg/data, where "
                      f"{file.name} installs a file",
        "folder first": f"{file.name} installs a file at {site}/pkg/data, where {folder.name} installs a folder "
                        f"(holding {site}/pkg/data/table.json)"}[order]


def test_two_members_of_one_wheel_landing_on_one_path_follow_the_same_rule(tmp_path):
    same = make_wheel(tmp_path, {**FILES, f"{DIST}.data/purelib/demo_mod.py": FILES["demo_mod.py"]})
    LockPaths(SCHEME).add([same])
    (tmp_path / "other").mkdir()
    other = make_wheel(tmp_path / "other", {**FILES, f"{DIST}.data/purelib/demo_mod.py": (b"VALUE = 2\n", 0o644)})
    with pytest.raises(BuildError, match=f"^{other.name}: two of its members install different bytes at "):
        LockPaths(SCHEME).add([other])


def test_one_path_with_two_modes_an_entry_point_of_two_targets_or_a_borrowed_record_is_refused(tmp_path):
    plain = wheel_of(tmp_path / "a", "alpha", {"shared/run": (b"x\n", 0o644)})
    executable = wheel_of(tmp_path / "b", "beta", {"shared/run": (b"x\n", 0o755)})
    with pytest.raises(BuildError, match="install .*/shared/run with different modes \\(644, 755\\)$"):
        LockPaths(SCHEME).add([plain, executable])
    entry = f"{DIST}.dist-info/entry_points.txt"
    one = make_wheel(tmp_path / "a", changes={entry: b"[console_scripts]\nrun = demo_pkg.core:main\n"})
    other = wheel_of(tmp_path / "c", "gamma", {"gamma/__init__.py": (b"", 0o644)})
    with zipfile.ZipFile(other, "a") as archive:
        archive.writestr("gamma-1.0.dist-info/entry_points.txt", "[console_scripts]\nrun = gamma:main\n")
    with pytest.raises(BuildError, match=f"install different bytes at {SCHEME.scripts}/run$"):
        LockPaths(SCHEME).add([one, other])
    borrower = wheel_of(tmp_path / "d", "delta", {"delta/__init__.py": (b"", 0o644)})
    with zipfile.ZipFile(borrower, "a") as archive:  # delta writes demo_pkg's RECORD
        archive.writestr(f"{DIST}.dist-info/RECORD", "demo_pkg/core.py,,\n")
    with pytest.raises(BuildError, match=f"install different bytes at {SCHEME.purelib}/{DIST}.dist-info/RECORD$"):
        LockPaths(SCHEME).add([one, borrower])


def test_a_conflict_across_layers_is_refused_before_the_later_layer_is_written(tmp_path, monkeypatch):
    """_lock_layers downloads layer by layer and checks each layer's wheels against all before (LockPaths) before it
    starts writing that layer: the second layer is never written, and the error comes out of _lock_layers itself,
    which the build waits for before any lock layer is staged or uploaded."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    one = wheel_of(tmp_path / "a", "alpha", {"shared/__init__.py": (b"A = 1\n", 0o644)})
    other = wheel_of(tmp_path / "b", "beta", {"shared/__init__.py": (b"B = 1\n", 0o644)})
    blobs, stage = tmp_path / "blobs", tmp_path / "stage"
    blobs.mkdir()
    stage.mkdir()
    with _serving() as index, ThreadPoolExecutor(max_workers=2) as writers:
        for wheel, project in ((one, "alpha"), (other, "beta")):
            index.files[wheel.name] = wheel.read_bytes()
            index.projects[project] = [wheel.name]
        groups = [LayerGroup(name, f"lock-{n}-{name}.txt", (package(project, "1.0", [index.sha(wheel.name)]),))
                  for n, (name, project, wheel) in enumerate((("cuda", "alpha", one), ("framework", "beta", other)), 1)]
        plan = SimpleNamespace(
            spec=SimpleNamespace(install_lock=SimpleNamespace(header=SimpleNamespace(index=index.url,
                                                                                     platform=PLATFORM))),
            request=SimpleNamespace(profile=SimpleNamespace(python="3.11", framework=SimpleNamespace(
                own_layer_mib=lambda name: 0))),
            files={group.file: b"" for group in groups})
        with pytest.raises(BuildError) as caught:
            _lock_layers(plan, SimpleNamespace(ca_bundle=None), lambda line: None, groups, SCHEME, blobs, stage,
                         writers)
    assert str(caught.value) == (f"{one.name} and {other.name} install different bytes at "
                                 f"{SCHEME.purelib}/shared/__init__.py")
    assert sorted(p.name for p in blobs.iterdir()) == ["lock-1-cuda.tar.gz"]  # the first layer only
