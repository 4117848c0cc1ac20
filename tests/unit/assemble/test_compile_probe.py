"""imagectl.assemble.probe.compile_probe, the program that runs in the system image, imported and exercised here
(tests/unit/assemble/test_install.py runs it as a file by a venv's Python, as the build does), and its host side in
imagectl.assemble.compile (probe_folder, probe_argv)."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import marshal
import os
import signal
import subprocess
import sys
import threading
import time
from importlib.metadata import Distribution
from pathlib import Path

import pytest

from imagectl.assemble.compile import PROBE_DIR, STAGE, probe_argv, probe_folder, write_sources
from imagectl.assemble.probe import compile_probe
from imagectl.assemble.probe.compile_probe import (PROBE_FILE, SOURCES_FILE, VENV_FILE, compile_one,
                                                   compile_sources, exit_when_stdin_ends, installed, main,
                                                   metadata_folder, venv_facts, wait_for_sources, write_json)

GOOD = "def answer():\n    raise ValueError('from the installed path')\n"


def site_with(tmp_path: Path, name: str, version: str, record: list[str] | None) -> Distribution:
    """A site folder holding one distribution's ``.dist-info`` (METADATA, and RECORD with ``record``'s rows unless
    None); the distribution, as importlib.metadata reads it from there."""
    site = tmp_path / "site"
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if record is not None:
        (info / "RECORD").write_text("".join(f"{row},,\n" for row in record))
    return Distribution.at(info)


def stage_file(stage: Path, path: str, text: str) -> None:
    target = stage / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def test_the_metadata_folder_comes_from_the_files_a_dist_lists_not_its_private_path(tmp_path):
    dist = site_with(tmp_path, "demo_pkg", "1.0", ["demo_pkg/__init__.py", "../../bin/demo",
                                                   "demo_pkg-1.0.dist-info/METADATA", "demo_pkg-1.0.dist-info/RECORD"])
    assert metadata_folder(dist) == str(tmp_path / "site" / "demo_pkg-1.0.dist-info")
    tree = ast.parse(Path(compile_probe.__file__).read_text())
    private = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr.startswith("_")
               and not node.attr.startswith("__")]
    assert private == []  # dist._path was the old way


def test_a_dist_without_files_in_a_metadata_folder_has_none(tmp_path):
    assert metadata_folder(site_with(tmp_path / "a", "bare", "2.0", None)) == ""  # no RECORD
    assert metadata_folder(site_with(tmp_path / "b", "odd", "3.0", ["odd/__init__.py"])) == ""


def test_installed_lists_name_version_folder_and_absolute_files(tmp_path):
    dist = site_with(tmp_path, "Demo_Pkg", "1.0", ["demo_pkg/__init__.py", "../bin/demo",
                                                   "Demo_Pkg-1.0.dist-info/RECORD"])
    site = tmp_path / "site"
    assert installed([dist]) == [{"name": "Demo_Pkg", "version": "1.0", "path": str(site / "Demo_Pkg-1.0.dist-info"),
                                  "files": [str(site / "demo_pkg/__init__.py"), str(tmp_path / "bin/demo"),
                                            str(site / "Demo_Pkg-1.0.dist-info/RECORD")]}]


def test_venv_facts_are_this_pythons(tmp_path):
    facts = venv_facts()
    assert facts["prefix"] == sys.prefix and facts["python"] == "%d.%d" % sys.version_info[:2]
    assert {"pytest", "packaging"} <= {str(d["name"]).lower() for d in facts["dists"]}
    assert all(d["path"].endswith((".dist-info", ".egg-info")) for d in facts["dists"] if d["path"])


def test_write_json_leaves_no_part_file(tmp_path):
    write_json(str(tmp_path), VENV_FILE, {"a": [1]})
    assert json.loads((tmp_path / VENV_FILE).read_text()) == {"a": [1]}
    assert [p.name for p in tmp_path.iterdir()] == [VENV_FILE]


def test_wait_for_sources_reads_the_list_or_none_and_gives_up_in_time(tmp_path):
    with pytest.raises(TimeoutError, match="no sources.json in time"):
        wait_for_sources(str(tmp_path), 0.1, poll=0.01)
    write_sources(tmp_path, ["/b.py", "/a.py"])  # the host side writes what the probe reads
    assert wait_for_sources(str(tmp_path), 1) == ["/a.py", "/b.py"]
    write_sources(tmp_path, None)
    assert wait_for_sources(str(tmp_path), 1) is None


def test_compile_one_writes_a_checked_hash_pyc_named_after_the_installed_path(tmp_path):
    stage, path = str(tmp_path), "/opt/venv/lib/site/demo/core.py"
    stage_file(tmp_path, path, GOOD)
    cached = compile_one(stage, path)
    assert cached == importlib.util.cache_from_source(path)
    data = (tmp_path / cached.lstrip("/")).read_bytes()
    assert int.from_bytes(data[4:8], "little") == 0b11  # PEP 552: hash-based, checked
    assert marshal.loads(data[16:]).co_filename == path
    stage_file(tmp_path, "/opt/bad.py", "def (:\n")
    assert compile_one(stage, "/opt/bad.py") is None and compile_one(stage, "/opt/missing.py") is None


def test_compile_sources_keeps_the_order_and_skips_what_does_not_compile(tmp_path):
    paths = [f"/opt/p/m{n}.py" for n in range(5)]
    for path in paths:
        stage_file(tmp_path, path, GOOD)
    stage_file(tmp_path, "/opt/p/bad.py", "return return\n")
    made = compile_sources(str(tmp_path), [paths[0], "/opt/p/bad.py", *paths[1:]], workers=2)
    assert made == [importlib.util.cache_from_source(p) for p in paths]


def test_main_writes_the_venv_facts_then_the_pyc_files(tmp_path, monkeypatch):
    site_with(tmp_path, "demo", "1.0", ["demo/__init__.py", "demo-1.0.dist-info/RECORD"])
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])  # the dists it finds: this one alone
    stage_file(tmp_path, "/opt/p/m.py", GOOD)
    write_sources(tmp_path, ["/opt/p/m.py"])
    assert main([str(tmp_path), "5"]) == 0
    probe = json.loads((tmp_path / PROBE_FILE).read_text())
    assert probe["pyc"] == [importlib.util.cache_from_source("/opt/p/m.py")]
    assert {k: v for k, v in probe.items() if k != "pyc"} == json.loads((tmp_path / VENV_FILE).read_text())
    assert [(d["name"], d["path"]) for d in probe["dists"]] == [("demo", str(tmp_path / "site/demo-1.0.dist-info"))]


def test_main_compiles_nothing_when_the_build_stopped_and_exits_1_when_no_sources_come(tmp_path, capsys,
                                                                                       monkeypatch):
    monkeypatch.setattr(sys, "path", [])
    write_sources(tmp_path, None)
    assert main([str(tmp_path), "5"]) == 0
    assert (tmp_path / VENV_FILE).exists() and not (tmp_path / PROBE_FILE).exists()
    (tmp_path / SOURCES_FILE).unlink()
    assert main([str(tmp_path), "0.1"]) == 1
    assert "imagectl probe: no sources.json in time (0.1 s)" in capsys.readouterr().err


def test_the_probe_is_package_data_run_as_a_file_from_a_folder_of_its_own(tmp_path):
    folder = probe_folder(tmp_path / "probe")
    assert [p.name for p in folder.iterdir()] == ["compile_probe.py"]
    assert (folder / "compile_probe.py").read_bytes() == Path(compile_probe.__file__).read_bytes()
    argv, mounts = probe_argv("/opt/venv/bin/python", folder, tmp_path / "stage", 3600)
    assert argv == ["/opt/venv/bin/python", f"{PROBE_DIR}/compile_probe.py", STAGE, "3600", "stdin"]
    assert mounts == {tmp_path / "stage": STAGE, folder: PROBE_DIR}


def test_the_probe_imports_nothing_but_the_standard_library():
    tree = ast.parse(Path(compile_probe.__file__).read_text())
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names - set(sys.stdlib_module_names)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _poll(condition, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_the_probe_ends_when_its_stdin_does_instead_of_waiting_for_sources(tmp_path):
    probe = subprocess.Popen([sys.executable, compile_probe.__file__, str(tmp_path), "600", "stdin"],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _poll(lambda: (tmp_path / VENV_FILE).exists())  # it runs, and waits for the sources
    assert probe.poll() is None
    probe.stdin.close()  # what the engine's end of the pipe does when imagectl is gone
    assert probe.wait(60) == -signal.SIGKILL  # with its compile workers, whatever they were doing
    assert "imagectl is gone (stdin ended)" in probe.stderr.read()
    assert not (tmp_path / PROBE_FILE).exists()


PARENT = """
import subprocess, sys, time
probe = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], "600", "stdin"], stdin=subprocess.PIPE)
print(probe.pid, flush=True)
time.sleep(600)
"""


def test_the_probe_outlives_no_parent_killed_with_sigkill(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, compile_probe.__file__, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    assert _poll(lambda: (tmp_path / VENV_FILE).exists()) and not _gone(pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _poll(lambda: _gone(pid))  # its stdin ended with its parent: it ended too (60 s allowed, not an hour)


def test_a_stdin_that_ends_calls_the_end(tmp_path):
    ended = threading.Event()
    read, write = os.pipe()
    try:
        watcher = exit_when_stdin_ends(read, ended.set)
        os.write(write, b"anything the host might write\n")
        assert not ended.wait(0.5)
        os.close(write)
        watcher.join(10)
        assert ended.is_set()
    finally:
        os.close(read)


def test_the_probe_compiles_with_its_worker_processes_while_it_watches_its_stdin(tmp_path, monkeypatch):
    """A worker forked while the watcher waits in its read must not hang (it closes sys.stdin first)."""
    stage_file(tmp_path, "/opt/p/m.py", GOOD)
    write_sources(tmp_path, ["/opt/p/m.py"])
    probe = subprocess.Popen([sys.executable, compile_probe.__file__, str(tmp_path), "60", "stdin"],
                             stdin=subprocess.PIPE)
    try:
        assert probe.wait(120) == 0
    finally:
        probe.kill()
        probe.stdin.close()
    assert json.loads((tmp_path / PROBE_FILE).read_text())["pyc"] == [importlib.util.cache_from_source("/opt/p/m.py")]


WORKER_PARENT = """
import os, subprocess, sys, time
code = ("import os, sys, time; sys.path.insert(0, sys.argv[1]); import compile_probe; "
        "compile_probe.end_with_parent(int(sys.argv[2]), 0.1); time.sleep(600)")
worker = subprocess.Popen([sys.executable, "-c", code, sys.argv[1], str(os.getpid())])  # as the pool's initargs
print(worker.pid, flush=True)
time.sleep(600)
"""


def test_a_compile_worker_ends_when_the_probe_is_killed():
    folder = str(Path(compile_probe.__file__).parent)
    probe = subprocess.Popen([sys.executable, "-c", WORKER_PARENT, folder], stdout=subprocess.PIPE, text=True)
    worker = int(probe.stdout.readline())
    try:
        time.sleep(0.5)
        assert not _gone(worker)
        probe.send_signal(signal.SIGKILL)
        probe.wait()
        assert _poll(lambda: _gone(worker))  # not left waiting for work forever
    finally:
        probe.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
