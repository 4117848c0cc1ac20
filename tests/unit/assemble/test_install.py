"""imagectl.assemble.install against real pip: a wheel made here is installed by pip into a temporary venv and by
install_wheel into a layer; the files, their contents, modes and RECORD rows must agree.  Also the refusals
(entry points that are not ``module:attr``, members that climb out), source_files, and the compile probe
(imagectl.assemble.probe.compile_probe, run as a file) run by the venv's own Python."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import marshal
import os
import posixpath
import subprocess
import time
import sys
import tarfile
import zipfile
from importlib.metadata import PathDistribution
from pathlib import Path

import pip
import pytest

from imagectl.assemble.compile import VENV_FILE, read_probe, write_sources
from imagectl.assemble.probe import compile_probe
from imagectl.assemble.install import Scheme, install_wheel, record_text, source_files, venv_scheme
from imagectl.assemble.layer import EXEC_MODE, FILE_MODE, FileDigest, LayerWriter
from imagectl.assemble.wheel import read_wheel
from imagectl.errors import BuildError

PY = "%d.%d" % sys.version_info[:2]
PROBE = compile_probe.__file__  # run as the build runs it: a file, by the venv's Python
DIST = "demo_pkg-1.0"
WHEEL_NAME = "demo_pkg-1.0-py3-none-any.whl"
CORE = b"""\
def main():
    print("cli")
    return 0


def gui():
    return 0


class App:
    @staticmethod
    def run():
        return 0
"""
ENTRY_POINTS = b"""\
[console_scripts]
demo-cli = demo_pkg.core:main
demo-app = demo_pkg.core:App.run

[gui_scripts]
demo-gui = demo_pkg.core:gui
"""
WHEEL_FILE = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
FILES: dict[str, tuple[bytes, int]] = {  # member: (content, mode in the zip)
    "demo_pkg/__init__.py": (b"from .core import main\n", 0o644),
    "demo_pkg/core.py": (CORE, 0o644),
    "demo_pkg/data/table.json": (b'{"a": 1}\n', 0o644),
    "demo_pkg/bin/helper.sh": (b"#!/bin/sh\necho helper\n", 0o755),
    "demo_mod.py": (b"VALUE = 1\n", 0o644),
    f"{DIST}.data/scripts/tool": (b"#!python\nimport demo_pkg\nprint('tool')\n", 0o755),
    f"{DIST}.data/scripts/plain.sh": (b"#!/bin/sh\necho plain\n", 0o755),
    f"{DIST}.data/scripts/helper.py": (b"print('helper')\n", 0o755),
    f"{DIST}.data/data/share/x.txt": (b"shared\n", 0o644),
    f"{DIST}.data/data/share/y.py": (b"print('data')\n", 0o644),
    f"{DIST}.data/headers/h.h": (b"#define DEMO 1\n", 0o644),
    f"{DIST}.data/purelib/demo_extra.py": (b"EXTRA = 1\n", 0o644),
    f"{DIST}.dist-info/METADATA": (b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n", 0o644),
    f"{DIST}.dist-info/WHEEL": (WHEEL_FILE, 0o644),
    f"{DIST}.dist-info/entry_points.txt": (ENTRY_POINTS, 0o644),
}
PIP_ENV = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           "PIP_NO_CACHE_DIR": "1", "PIP_NO_WARN_SCRIPT_LOCATION": "1"}


def make_wheel(folder: Path, files: dict[str, tuple[bytes, int]] = FILES, name: str = WHEEL_NAME,
               changes: dict[str, bytes | None] | None = None) -> Path:
    """A wheel of ``files`` (``changes``: member name -> content, None to leave a member out) with its RECORD."""
    files = {**files}
    for member, data in (changes or {}).items():
        if data is None:
            files.pop(member, None)
        else:
            files[member] = (data, 0o644)
    dist_info = next(m.split("/", 1)[0] for m in files if m.split("/", 1)[0].endswith(".dist-info"))
    path = folder / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        record = io.StringIO()
        rows = csv.writer(record, lineterminator="\n")
        for member, (data, mode) in files.items():
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, (0o100000 | mode) << 16
            archive.writestr(info, data)
            digest = FileDigest.of(data)
            rows.writerow([member, digest.sha256, digest.size])
        rows.writerow([f"{dist_info}/RECORD", "", ""])
        archive.writestr(f"{dist_info}/RECORD", record.getvalue())
    return path


def files_under(root: Path) -> set[str]:
    return {str(Path(folder, name).relative_to(root)) for folder, _, names in os.walk(root) for name in names}


def pip_install(root: Path, wheel: Path) -> tuple[Path, set[str]]:
    """A venv at ``root/venv`` with ``wheel`` installed by real pip: (the venv, the files pip wrote, relative to it,
    without __pycache__ and direct_url.json)."""
    venv = root / "venv"
    modern = tuple(int(part) for part in pip.__version__.split(".")[:2]) >= (22, 3)  # pip --python
    subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if modern else []), str(venv)], check=True,
                   capture_output=True)
    before = files_under(venv)
    python = str(venv / "bin" / "python")
    command = [sys.executable, "-m", "pip", "--python", python] if modern else [python, "-m", "pip"]
    done = subprocess.run([*command, "install", "--no-deps", "--no-index", "--no-compile", str(wheel)],
                          env={**os.environ, **PIP_ENV}, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = {path for path in files_under(venv) - before
                 if "__pycache__" not in Path(path).parts and not path.endswith(f"{DIST}.dist-info/direct_url.json")}
    return venv, installed


def layer_files(blob: Path) -> dict[str, tuple[bytes, int]]:
    """The regular files of a layer: absolute path -> (content, mode)."""
    with tarfile.open(blob, "r:gz") as tar:
        return {"/" + info.name: (tar.extractfile(info).read(), info.mode) for info in tar.getmembers()
                if info.isreg()}


def read_record(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode())))


class Installed:
    """The module's wheel installed by pip (``venv``, ``pip``: relative paths) and by install_wheel (``ours``)."""

    def __init__(self, root: Path, files: dict[str, tuple[bytes, int]] = FILES) -> None:
        self.root = root
        self.wheel = make_wheel(root, files)
        self.venv, self.pip = pip_install(root, self.wheel)
        self.scheme = venv_scheme(str(self.venv), PY)
        self.site = self.scheme.purelib
        with LayerWriter(root / "layer.tar.gz") as out:
            self.paths = install_wheel(read_wheel(self.wheel), self.scheme, out)
        self.ours = layer_files(out.close().path)

    def relative(self, path: str) -> str:
        return str(Path(path).relative_to(self.venv))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    return Installed(tmp_path_factory.mktemp("pip").resolve())


def _rel(name: str) -> str:
    return f"lib/python{PY}/site-packages/{name}"


# ---------------------------------------------------------------------------------------------- against pip


def test_install_wheel_writes_the_files_pip_installs(installed):
    ours = {installed.relative(path) for path in installed.ours}
    assert ours == installed.pip
    assert {_rel("demo_pkg/core.py"), _rel("demo_mod.py"), _rel("demo_extra.py"), "bin/tool", "bin/demo-cli",
            "bin/demo-gui", "bin/demo-app", "share/x.txt", f"include/site/python{PY}/demo-pkg/h.h",
            _rel(f"{DIST}.dist-info/INSTALLER"), _rel(f"{DIST}.dist-info/REQUESTED")} <= ours
    assert sorted(installed.paths) == sorted(installed.ours)
    assert installed.paths[-1] == f"{installed.site}/{DIST}.dist-info/RECORD"


def test_each_file_has_pips_content_scripts_and_launchers_included(installed):
    differ = []
    for path, (data, _) in installed.ours.items():
        relative = installed.relative(path)
        if relative.endswith(("/INSTALLER", "/RECORD")):
            continue
        if (installed.venv / relative).read_bytes() != data:
            differ.append(relative)
    assert differ == []
    tool = installed.ours[f"{installed.venv}/bin/tool"][0]
    assert tool == f"#!{installed.venv}/bin/python\nimport demo_pkg\nprint('tool')\n".encode()
    assert installed.scheme.python == f"{installed.venv}/bin/python"
    assert installed.ours[f"{installed.venv}/bin/plain.sh"][0] == b"#!/bin/sh\necho plain\n"
    launcher = installed.ours[f"{installed.venv}/bin/demo-app"][0].decode()
    assert launcher.startswith(f"#!{installed.venv}/bin/python\n")
    assert "from demo_pkg.core import App\n" in launcher and "sys.exit(App.run())" in launcher


def test_the_launchers_run_in_the_venv(installed):
    for name in ("demo-cli", "tool"):
        done = subprocess.run([str(installed.venv / "bin" / name)], capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, "cli\n" if name == "demo-cli" else "tool\n"), done.stderr


def test_exec_bits_are_pips(installed):
    for path, (_, mode) in installed.ours.items():
        relative = installed.relative(path)
        pip_exec = bool((installed.venv / relative).stat().st_mode & 0o111)
        assert bool(mode & 0o111) == pip_exec, relative
        assert mode == (EXEC_MODE if pip_exec else FILE_MODE), relative
    assert installed.ours[f"{installed.site}/demo_pkg/bin/helper.sh"][1] == EXEC_MODE
    assert installed.ours[f"{installed.site}/demo_pkg/core.py"][1] == FILE_MODE


def test_record_lists_every_file_with_its_hash_and_size_as_pip_does(installed):
    record = f"{installed.site}/{DIST}.dist-info/RECORD"
    rows = read_record(installed.ours[record][0])
    assert all(len(row) == 3 for row in rows)
    assert rows[-1] == [f"{DIST}.dist-info/RECORD", "", ""]
    listed = {posixpath.normpath(posixpath.join(installed.site, path)): (sha, size) for path, sha, size in rows}
    assert set(listed) == set(installed.ours)
    for path, (sha, size) in listed.items():
        if path != record:
            assert (sha, size) == (FileDigest.of(installed.ours[path][0]).sha256, str(len(installed.ours[path][0])))
    pip_rows = read_record((installed.venv / _rel(f"{DIST}.dist-info/RECORD")).read_bytes())
    skip = (f"{DIST}.dist-info/INSTALLER", f"{DIST}.dist-info/direct_url.json")
    assert sorted(r for r in rows if r[0] not in skip) == sorted(r for r in pip_rows if r[0] not in skip)
    assert ["../../../bin/tool", FileDigest.of(installed.ours[f"{installed.venv}/bin/tool"][0]).sha256,
            str(len(installed.ours[f"{installed.venv}/bin/tool"][0]))] in rows
    assert installed.ours[f"{installed.site}/{DIST}.dist-info/INSTALLER"][0] == b"imagectl\n"
    assert installed.ours[f"{installed.site}/{DIST}.dist-info/REQUESTED"][0] == b""


def test_venv_scheme_is_the_folders_of_a_real_venv(installed):
    python = str(installed.venv / "bin" / "python")
    paths = json.loads(subprocess.run([python, "-c", "import json, sys, sysconfig; "
                                       "print(json.dumps({**sysconfig.get_paths(), 'prefix': sys.prefix}))"],
                                      check=True, capture_output=True, text=True).stdout)
    scheme = installed.scheme
    assert (scheme.prefix, scheme.purelib, scheme.platlib, scheme.scripts) == (
        paths["prefix"], paths["purelib"], paths["platlib"], paths["scripts"])


def test_the_probe_compiles_the_staged_sources_in_the_venv_and_reads_back(installed, tmp_path):
    stage = tmp_path / "stage"
    count = source_files(read_wheel(installed.wheel), installed.scheme, stage)
    sources = sorted("/" + str(p.relative_to(stage)) for p in stage.rglob("*.py"))
    assert count == len(sources) == 4
    # started before the sources are there (as right after the system image is built): the venv's facts first
    running = subprocess.Popen([str(installed.venv / "bin" / "python"), PROBE, str(stage), "120"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (stage / VENV_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    venv = read_probe(stage, installed.scheme, VENV_FILE)
    assert venv.pyc == () and "demo-pkg" in {d.name for d in venv.dists}
    time.sleep(0.3)
    assert running.poll() is None and not (stage / "probe.json").exists()  # waiting for the sources
    write_sources(stage, sources)
    assert json.loads((stage / "sources.json").read_text()) == sources
    _, err = running.communicate(timeout=120)
    assert running.returncode == 0, err
    probe = read_probe(stage, installed.scheme)
    assert probe.pyc == tuple(sorted(importlib.util.cache_from_source(path) for path in sources))
    for source in sources:
        data = (stage / importlib.util.cache_from_source(source).lstrip("/")).read_bytes()
        assert int.from_bytes(data[4:8], "little") == 0b11  # PEP 552: hash-based, checked
        assert marshal.loads(data[16:]).co_filename == source  # the installed path, not the stage's
    demo = [d for d in probe.dists if d.name == "demo-pkg"]
    assert [(d.version, d.path) for d in demo] == [("1.0", f"{installed.site}/{DIST}.dist-info")]
    assert {f"{installed.site}/demo_pkg/core.py", f"{installed.venv}/bin/tool"} <= set(demo[0].files)


# ---------------------------------------------------------------------------------------------- pip quirks


@pytest.fixture(scope="module")
def quirks(tmp_path_factory) -> Installed:
    """The wheel with a file name holding a comma and a script whose first line is ``#!python3``."""
    root = tmp_path_factory.mktemp("quirks").resolve()
    files = {**FILES, "demo_pkg/a,b.txt": (b"comma\n", 0o644),
             f"{DIST}.data/scripts/tool3": (b"#!python3\nprint('tool3')\n", 0o755)}
    return Installed(root, files)


def test_record_quotes_a_path_holding_a_comma_as_pip_does(quirks):
    """RECORD is a CSV file: pip writes ``"demo_pkg/a,b.txt",sha256=...,6``; a row of four fields breaks
    importlib.metadata's ``files()`` and pip's uninstall."""
    ours = read_record(quirks.ours[f"{quirks.site}/{DIST}.dist-info/RECORD"][0])
    pip_rows = read_record((quirks.venv / _rel(f"{DIST}.dist-info/RECORD")).read_bytes())
    assert ["demo_pkg/a,b.txt", FileDigest.of(b"comma\n").sha256, "6"] in pip_rows
    assert [row for row in ours if len(row) != 3] == []
    assert ["demo_pkg/a,b.txt", FileDigest.of(b"comma\n").sha256, "6"] in ours
    site = quirks.root / "ours-site"
    record = site / f"{DIST}.dist-info" / "RECORD"
    record.parent.mkdir(parents=True)
    record.write_bytes(quirks.ours[f"{quirks.site}/{DIST}.dist-info/RECORD"][0])
    assert "demo_pkg/a,b.txt" in [str(f) for f in PathDistribution(record.parent).files]


def test_a_script_starting_with_python3_gets_the_venvs_interpreter_as_pip_gives_it(quirks):
    """pip rewrites a first line that starts with ``#!python``, ``#!python3`` included; left as it is, ``#!python3``
    names no interpreter the kernel can run."""
    pip_tool = (quirks.venv / "bin" / "tool3").read_bytes()
    assert pip_tool == f"#!{quirks.venv}/bin/python\nprint('tool3')\n".encode()
    assert quirks.ours[f"{quirks.venv}/bin/tool3"][0] == pip_tool


# ---------------------------------------------------------------------------------------------- refusals


SCHEME = venv_scheme("/opt/venv", "3.11")


def _install(wheel: Path, dest: Path, scheme: Scheme = SCHEME, **kwargs) -> tuple[list[str], dict]:
    with LayerWriter(dest) as out:
        paths = install_wheel(read_wheel(wheel), scheme, out, **kwargs)
    return paths, layer_files(dest)


@pytest.mark.parametrize("entry_points", [
    b"[console_scripts]\nx = os:system; rm -rf /\n",
    b"[console_scripts]\nx = os:system(1)\n",
    b"[console_scripts]\nx = demo_pkg.core\n",
    b"[console_scripts]\nx = demo_pkg.core:main\n  import os\n",  # a continuation line: a value of two lines
    b"[console_scripts]\na/b = demo_pkg.core:main\n",
    b"[gui_scripts]\n../../etc/cron.d/x = demo_pkg.core:main\n",
    b"[console_scripts]\n.hidden = demo_pkg.core:main\n",
    b"[gui_scripts]\nx y = demo_pkg.core:main\n",
])
def test_an_entry_point_that_is_not_a_name_and_module_attr_is_refused(tmp_path, entry_points):
    wheel = make_wheel(tmp_path, changes={f"{DIST}.dist-info/entry_points.txt": entry_points})
    with pytest.raises(BuildError, match="entry point"):
        _install(wheel, tmp_path / "l.tar.gz")
    assert not (tmp_path / "l.tar.gz").exists()


def test_entry_points_that_do_not_parse_are_refused(tmp_path):
    wheel = make_wheel(tmp_path, changes={f"{DIST}.dist-info/entry_points.txt": b"[console_scripts\nx = a:b\n"})
    with pytest.raises(BuildError, match="entry_points.txt does not parse"):
        _install(wheel, tmp_path / "l.tar.gz")


@pytest.mark.parametrize("member", [
    "demo_pkg/../../../../escape.py",
    "../escape.py",
    f"{DIST}.data/scripts/../../../../bin/evil",
    f"{DIST}.data/data/../../etc/passwd",
    f"{DIST}.data/nosuchscheme/x",
    f"{DIST}.data/scripts",
])
def test_a_member_that_would_land_outside_its_folder_is_refused(tmp_path, member):
    files = {**FILES, member: (b"#!python\nx\n", 0o644)}
    wheel = make_wheel(tmp_path, files)
    with pytest.raises(BuildError, match="outside|no install scheme|scheme folder"):
        _install(wheel, tmp_path / "l.tar.gz")
    assert not (tmp_path / "l.tar.gz").exists()
    if member.endswith(".py"):
        with pytest.raises(BuildError, match="outside"):
            source_files(read_wheel(wheel), SCHEME, tmp_path / "stage")
    else:  # source_files looks at .py members only
        assert source_files(read_wheel(wheel), SCHEME, tmp_path / "stage") == 4
    assert not any(tmp_path.rglob("escape.py")) and not any(tmp_path.rglob("evil"))


# ---------------------------------------------------------------------------------------------- the rest


def test_source_files_stages_only_the_py_files_of_site_packages_at_their_absolute_paths(tmp_path):
    wheel = make_wheel(tmp_path)
    stage = tmp_path / "stage"
    count = source_files(read_wheel(wheel), SCHEME, stage)
    site = "opt/venv/lib/python3.11/site-packages"
    expected = {f"{site}/demo_pkg/__init__.py", f"{site}/demo_pkg/core.py", f"{site}/demo_mod.py",
                f"{site}/demo_extra.py"}
    assert {str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file()} == expected
    assert count == 4
    assert (stage / site / "demo_pkg/core.py").read_bytes() == CORE


def test_a_wheel_whose_root_is_not_purelib_goes_to_platlib(tmp_path):
    wheel = make_wheel(tmp_path, changes={f"{DIST}.dist-info/WHEEL": WHEEL_FILE.replace(b"true", b"false")})
    scheme = Scheme("/v", "/v/pure", "/v/plat", "/v/bin", "/v/include", "/v/bin/python3")
    paths, files = _install(wheel, tmp_path / "l.tar.gz", scheme)
    assert "/v/plat/demo_pkg/core.py" in files and "/v/pure/demo_extra.py" in files
    assert not any(path.startswith("/v/pure/demo_pkg") for path in files)
    assert files["/v/bin/tool"][0].startswith(b"#!/v/bin/python3\n")
    assert "/v/include/demo-pkg/h.h" in files and "/v/share/x.txt" in files
    rows = read_record(files[f"/v/plat/{DIST}.dist-info/RECORD"][0])
    assert ["../pure/demo_extra.py", FileDigest.of(b"EXTRA = 1\n").sha256, "10"] in rows
    staged = tmp_path / "stage"
    assert source_files(read_wheel(wheel), scheme, staged) == 4
    assert (staged / "v/plat/demo_pkg/core.py").is_file() and (staged / "v/pure/demo_extra.py").is_file()


def test_skipped_paths_are_neither_written_nor_listed(tmp_path):
    wheel = make_wheel(tmp_path)
    site = SCHEME.purelib
    skipped = {f"{site}/demo_pkg/core.py", f"{SCHEME.scripts}/tool"}
    paths, files = _install(wheel, tmp_path / "l.tar.gz", skip=skipped.__contains__)
    assert not skipped & set(files) and not skipped & set(paths)
    record = files[f"{site}/{DIST}.dist-info/RECORD"][0].decode()
    assert "demo_pkg/core.py" not in record and "bin/tool" not in record
    assert f"{site}/demo_pkg/__init__.py" in files


def test_pythonw_is_the_venvs_python_and_other_first_lines_stay(tmp_path):
    wheel = make_wheel(tmp_path, changes={f"{DIST}.data/scripts/b": b"#!pythonw\nprint(2)\n",
                                           f"{DIST}.data/scripts/c": b"# no shebang\n#!python\n"})
    _, files = _install(wheel, tmp_path / "l.tar.gz")
    assert files["/opt/venv/bin/b"] == (b"#!/opt/venv/bin/python\nprint(2)\n", EXEC_MODE)
    assert files["/opt/venv/bin/c"] == (b"# no shebang\n#!python\n", EXEC_MODE)


def test_record_text_is_sorted_relative_to_site_with_record_last():
    site = "/opt/venv/lib/python3.11/site-packages"
    rows = {f"{site}/b.py": FileDigest("sha256=B", 2), "/opt/venv/bin/x": FileDigest("sha256=X", 3),
            f"{site}/a/__init__.py": FileDigest("sha256=A", 1)}
    assert record_text(rows, site, f"{site}/a-1.dist-info/RECORD") == (
        "../../../bin/x,sha256=X,3\na/__init__.py,sha256=A,1\nb.py,sha256=B,2\na-1.dist-info/RECORD,,\n")


def test_venv_scheme_layout():
    scheme = venv_scheme("/opt/venv", "3.12")
    assert scheme == Scheme("/opt/venv", "/opt/venv/lib/python3.12/site-packages",
                            "/opt/venv/lib/python3.12/site-packages", "/opt/venv/bin",
                            "/opt/venv/include/site/python3.12", "/opt/venv/bin/python")


def test_the_probe_exits_without_compiling_when_the_build_stopped(installed, tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    write_sources(stage, None)
    done = subprocess.run([str(installed.venv / "bin" / "python"), PROBE, str(stage), "30"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (stage / VENV_FILE).exists() and not (stage / "probe.json").exists()


def test_the_probe_gives_up_waiting_for_sources_that_never_come(installed, tmp_path):
    stage = tmp_path / "stage"
    stage.mkdir()
    done = subprocess.run([str(installed.venv / "bin" / "python"), PROBE, str(stage), "0.5"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "no sources.json in time" in done.stderr
