"""The expected size and the size budget (issue 37 item 3): the budget's grammar and where it is set (``[build]
size_budget``, ``[framework] size_budget``), the pure size computation and verdicts (images/size.py), where its
inputs come from (images/size_facts.py: a wheel's central directory, the wheel cache, the ``wheel-size`` cache entries,
an index's PEP 700 size and Range reads, one that refuses Range) and the text views.  The end to end runs (a real
registry and engine) are tests/integration/test_size_budget.py."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import zipfile
from functools import partial
from pathlib import Path

import pytest

from imagectl.cache import cached, peek
from imagectl.cli.size_views import report_dict, report_text, size_dict, size_text
from imagectl.config import load_config
from imagectl.errors import ConfigError, ValidationError
from imagectl.grammar import check_byte_size
from imagectl.images.image_facts import GroupSize
from imagectl.images.size import (
    PYC_COMPRESSED,
    PYC_PER_FILE,
    PYC_PER_PY,
    STORED_ENTRY_BYTES,
    BaseLayers,
    Budget,
    SizeInputs,
    WheelSize,
    budget_of,
    expected_size,
    over_budget,
    real_over_budget,
)
from imagectl.images.size_facts import WHEEL_SIZE, known_wheel, local_wheel_size, members_size, remote_wheel_size
from imagectl.images.size_gate import SizeReport
from imagectl.lock.lockfile import LockedPackage
from imagectl.pypi.simple import parse_json_page
from imagectl.pypi.transport import DEFAULT_SETTINGS, new_session
from tests.integration.support.wheels import make_wheel, start_simple_index

X86 = "x86_64-manylinux_2_28"


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch):
    """The cache and its secret under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)


# --- the budget: grammar, configuration, matrix ----------------------------------------------------------------------


@pytest.mark.parametrize("value, size", [
    ("8GB", 8 * 10**9), ("8gb", 8 * 10**9), ("7.5 GiB", int(7.5 * 2**30)), ("500MB", 500 * 10**6), ("1kB", 1000),
    ("12", 12), (8_000_000_000, 8 * 10**9), ("1PB", None), ("1000TB", 10**15),
])
def test_sizes_are_read_in_decimal_and_binary_units(value, size):
    if size is None:
        with pytest.raises(ValidationError):
            check_byte_size(value, "budget")
        return
    assert check_byte_size(value, "budget") == size


@pytest.mark.parametrize("value", ["0", 0, -1, "-1GB", "8XB", "8 G", "1.5B", "1e9", "", "GB", True, 1.5, [8],
                                   "8GB; rm -rf /", 10**15 + 1])
def test_a_bad_size_is_one_line_naming_where_it_came_from(value):
    with pytest.raises(ValidationError) as error:
        check_byte_size(value, "[framework] size_budget")
    message = str(error.value)
    assert message.startswith("[framework] size_budget: ") and "\n" not in message
    assert 'is not a size such as "8GB"' in message


def test_build_size_budget_is_a_validated_config_key(tmp_path):
    config = tmp_path / "imagectl.toml"
    config.write_text('[build]\nsize_budget = "8GB"\n')
    assert load_config(str(config)).build_size_budget == 8 * 10**9
    assert load_config(None, env={"IMAGECTL_BUILD_SIZE_BUDGET": "2GiB"}, cwd=tmp_path).build_size_budget == 2**31
    (tmp_path / "elsewhere").mkdir()
    assert load_config(None, env={}, cwd=tmp_path / "elsewhere").build_size_budget is None
    config.write_text('[build]\nsize_budget = "8 gigs"\n')
    with pytest.raises(ConfigError) as error:
        load_config(str(config))
    assert str(error.value).startswith(f"{config}: [build] size_budget: '8 gigs' is not a size such as")


def test_framework_size_budget_is_loaded_and_a_bad_one_names_file_and_line(matrix_copy):
    assert matrix_copy.load().frameworks["torch"].size_budget is None
    path = matrix_copy.edit("torch.toml", 'check = "torch"', 'check = "torch"\nsize_budget = "9GB"')
    assert matrix_copy.load().frameworks["torch"].size_budget == 9 * 10**9
    path.write_text(path.read_text().replace('size_budget = "9GB"', 'size_budget = "nine"'))
    error = matrix_copy.refused(r"\[framework\] size_budget: 'nine' is not a size")
    assert str(error).startswith(f"{path}:{matrix_copy.line_of('torch.toml', 'size_budget')}: ")


def test_the_smaller_budget_applies_and_says_where_it_is_set():
    assert budget_of(None, None, "torch.toml") is None
    assert budget_of(8, None, "torch.toml") == Budget(8, "[build] size_budget")
    assert budget_of(None, 9, "torch.toml") == Budget(9, "[framework] size_budget of torch.toml")
    assert budget_of(10, 9, "torch.toml") == Budget(9, "[framework] size_budget of torch.toml")
    assert budget_of(9, 10, "torch.toml") == Budget(9, "[build] size_budget")


# --- the expected size (pure) ----------------------------------------------------------------------------------------


def pkg(name: str, version: str = "1.0") -> LockedPackage:
    return LockedPackage(name, version, (hashlib.sha256(name.encode()).hexdigest(),))


CUDA = (pkg("nvidia-cudnn-cu12", "8.9"), pkg("nvidia-nccl-cu12", "2.20"))
FRAMEWORK = (pkg("torch", "2.3.1"),)
REST = (pkg("numpy", "1.26"), pkg("filelock", "3.15"))
WHEELS = {
    "nvidia-cudnn-cu12": WheelSize("nvidia_cudnn_cu12-8.9-py3-none-manylinux1_x86_64.whl", 700, 1000, 10, 1),
    "nvidia-nccl-cu12": WheelSize("nvidia_nccl_cu12-2.20-py3-none-manylinux1_x86_64.whl", 200, 300, 0, 0),
    "torch": WheelSize("torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", 800, 2000, 400, 20),
    "numpy": WheelSize("numpy-1.26-cp311-cp311-manylinux_2_17_x86_64.whl", 100, 250, 50, 5),
    "filelock": WheelSize("filelock-3.15-py3-none-any.whl", 10, 30, 20, 2),
}
BASE = BaseLayers("registry.example.com/hub/nvidia/cuda:12.1.1-base-ubuntu22.04", "sha256:" + "a" * 64, (60, 40))
FILES = {"lock.txt": b"torch==2.3.1\n" * 10, "imagectl-check.py": b"print('ok')\n"}


def inputs(**changes) -> SizeInputs:
    base = dict(lock_groups=(("cuda", CUDA), ("framework", FRAMEWORK), ("rest", REST)), wheels=WHEELS, base=BASE,
                files=FILES)
    return SizeInputs(**{**base, **changes})


def test_each_lock_layer_weighs_its_wheels_and_the_system_group_its_base_and_an_unknown():
    size = expected_size(inputs())
    groups = {g.group: g for g in size.groups}
    assert list(groups) == ["system", "cuda", "framework", "rest", "imagectl"]  # diff's groups, in image order
    assert (groups["cuda"].compressed, groups["cuda"].unpacked, groups["cuda"].complete) == (900, 1300, True)
    assert [p.name for p in groups["cuda"].parts] == ["nvidia-cudnn-cu12==8.9", "nvidia-nccl-cu12==2.20"]
    assert all(p.how == "wheel" for p in groups["cuda"].parts)
    base, engine = groups["system"].parts
    assert (base.compressed, base.unpacked, base.how) == (100, None, "manifest")
    assert base.name == f"base {BASE.reference}@{'a' * 12}"
    assert base.note == "2 layers; a manifest gives no unpacked size"
    zstd = BaseLayers(BASE.reference, BASE.digest, BASE.layers, "this build pushes them again as zstd")
    assert expected_size(inputs(base=zstd)).groups[0].parts[0].note.endswith("; this build pushes them again as zstd")
    assert (engine.compressed, engine.how) == (None, "unknown")
    assert groups["system"].compressed == 100 and not groups["system"].complete
    assert not size.complete and not size.unpacked_complete  # the engine's layers, the base's unpacked size
    assert size.compressed == sum(g.compressed for g in size.groups)


def test_the_pyc_estimate_is_stored_in_an_assembled_gzip_layer_and_compressed_otherwise():
    py, files = 10 + 0 + 400 + 50 + 20, 1 + 0 + 20 + 5 + 2
    stored = {g.group: g for g in expected_size(inputs()).groups}["imagectl"]
    pyc, rendered = stored.parts
    assert pyc.name == ".pyc" and pyc.how == "estimate"
    assert pyc.unpacked == round(py * PYC_PER_PY) + files * PYC_PER_FILE
    assert pyc.compressed == pyc.unpacked + files * STORED_ENTRY_BYTES
    assert rendered.unpacked == sum(map(len, FILES.values()))
    assert rendered.compressed == rendered.unpacked + len(FILES) * STORED_ENTRY_BYTES
    zstd = {g.group: g for g in expected_size(inputs(kind="compressed")).groups}["imagectl"]
    assert zstd.parts[0].compressed == round((round(py * PYC_PER_PY) + files * PYC_PER_FILE) * PYC_COMPRESSED)
    assert zstd.parts[1].compressed < rendered.compressed  # deflated, not stored


def test_pip_puts_the_pyc_files_in_each_lock_layer():
    groups = {g.group: g for g in expected_size(inputs(kind="compressed", pyc_layer=False)).groups}
    assert [p.name for p in groups["imagectl"].parts] == ["/opt/imagectl files"]
    assert groups["framework"].parts[-1].name == ".pyc of the framework layer"
    pyc = round(400 * PYC_PER_PY) + 20 * PYC_PER_FILE
    assert groups["framework"].parts[-1].unpacked == pyc
    assert groups["framework"].compressed == 800 + round(pyc * PYC_COMPRESSED)


def test_what_is_not_fetched_is_unknown_with_why_never_a_guess():
    wheels = {k: v for k, v in WHEELS.items() if k != "torch"}
    size = expected_size(inputs(wheels=wheels, wheel_note="not fetched: show reads no index", base=None,
                                base_note="not fetched: show reads no registry", files=None))
    groups = {g.group: g for g in size.groups}
    [torch] = groups["framework"].parts
    assert (torch.compressed, torch.unpacked, torch.how, torch.note) == (
        None, None, "unknown", "not fetched: show reads no index")
    assert groups["framework"].compressed == 0 and not groups["framework"].complete
    assert groups["system"].parts[0].note == "not fetched: show reads no registry"
    pyc, files = groups["imagectl"].parts
    assert pyc.compressed is None and "central directory" in pyc.note  # no .py sizes for torch: no estimate
    assert files.compressed is None and files.how == "unknown"
    only_size = WheelSize("torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", 800)  # an index that refuses Range
    [torch] = {g.group: g for g in expected_size(inputs(wheels={**WHEELS, "torch": only_size})).groups}[
        "framework"].parts
    assert (torch.compressed, torch.unpacked, torch.how) == (800, None, "wheel")
    assert torch.note.endswith(": central directory not read")


def test_over_budget_names_the_five_largest_contributors_largest_first():
    size = expected_size(inputs())
    assert over_budget(size, Budget(10**6, "[build] size_budget")) is None
    refusal = over_budget(size, Budget(1000, "[build] size_budget"))
    assert refusal is not None and refusal.startswith("expected size at least ")  # a floor: the system layers
    assert "over the size budget 1.0 kB ([build] size_budget), before anything is built or pushed" in refusal
    named = refusal.split("the largest: ")[1].split(", ")
    assert [n.rsplit(" ", 2)[0] for n in named] == [".pyc", "torch==2.3.1", "nvidia-cudnn-cu12==8.9",
                                                     "/opt/imagectl files", "nvidia-nccl-cu12==2.20"]
    assert named[0] == ".pyc 11.9 kB" and named[1] == "torch==2.3.1 800 B"


def test_a_floor_over_the_budget_is_over_it():
    size = expected_size(inputs(wheels={}, base=BASE))  # only the base is known: 100 bytes
    assert over_budget(size, Budget(99, "[build] size_budget")) is not None
    assert over_budget(size, Budget(100 + 2 * STORED_ENTRY_BYTES + 200, "[build] size_budget")) is None


def test_the_built_image_is_judged_by_its_manifest_with_its_largest_groups():
    groups = [GroupSize("system", 3, 500), GroupSize("cuda", 2, 900), GroupSize("libs", 1, 50),
              GroupSize("framework", 4, 800), GroupSize("rest", 1, 40), GroupSize("imagectl", 2, 60)]
    total = sum(g.size for g in groups)
    assert real_over_budget(groups, total, Budget(total, "[build] size_budget")) is None
    refusal = real_over_budget(groups, total, Budget(2000, "[framework] size_budget of torch.toml"))
    assert refusal == ("built image is 2.4 kB compressed, over the size budget 2.0 kB ([framework] size_budget of "
                       "torch.toml); no tag names it; the largest: cuda 900 B (2 layers), framework 800 B (4 layers), "
                       "system 500 B (3 layers), imagectl 60 B (2 layers), libs 50 B (1 layer)")


# --- where the inputs come from ---------------------------------------------------------------------------------------


def write_wheel(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("torch/", b"")
        for name, data in members.items():
            archive.writestr(name, data)
    return path


MEMBERS = {"torch/__init__.py": b"x = 1\n" * 100, "torch/lib/libtorch.so": b"\x7fELF" + b"\0" * 5000,
           "torch-2.3.1.data/scripts/torchrun.py": b"#!python\n", "torch-2.3.1.dist-info/setup.py": b"# no\n",
           "torch-2.3.1.dist-info/RECORD": b""}


def test_a_wheels_sizes_are_read_from_its_central_directory(tmp_path):
    path = write_wheel(tmp_path / "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", MEMBERS)
    size = local_wheel_size(path)
    assert size == WheelSize(path.name, path.stat().st_size, sum(map(len, MEMBERS.values())), 600, 1)
    assert local_wheel_size(tmp_path / "missing.whl") is None
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    assert local_wheel_size(tmp_path / "broken.whl") is None
    with zipfile.ZipFile(path) as archive:
        assert members_size("w.whl", 1, archive.infolist()).py_files == 1  # scripts and dist-info are not compiled


def test_the_wheel_cache_answers_with_the_file_the_platform_takes(tmp_path):
    x86, arm = "1" * 64, "2" * 64
    package = LockedPackage("torch", "2.3.1", (arm, x86))
    wheels = tmp_path / "wheels"
    write_wheel(wheels / arm / "torch-2.3.1-cp311-cp311-manylinux_2_28_aarch64.whl", {"torch/a.py": b"a" * 10})
    write_wheel(wheels / x86 / "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl", MEMBERS)
    found = known_wheel(package, "3.11", X86, wheels)
    assert found is not None and found.filename == "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl"
    assert known_wheel(package, "3.11", "aarch64-manylinux_2_28", wheels).filename.endswith("_aarch64.whl")
    assert known_wheel(LockedPackage("torch", "2.3.1", ("3" * 64,)), "3.11", X86, wheels) is None


def test_show_reads_the_sizes_a_plan_cached_and_computes_nothing(tmp_path):
    package = LockedPackage("numpy", "1.26", ("4" * 64, "5" * 64))
    assert peek(WHEEL_SIZE, [{"sha256": "4" * 64}, {"sha256": "5" * 64}]) == [None, None]
    assert known_wheel(package, "3.11", X86, tmp_path / "wheels") is None
    stored = WheelSize("numpy-1.26-cp311-cp311-manylinux_2_17_x86_64.whl", 100, 250, 50, 5)
    assert cached(WHEEL_SIZE, {"sha256": "5" * 64}, lambda: stored) == stored
    assert peek(WHEEL_SIZE, [{"sha256": "4" * 64}, {"sha256": "5" * 64}]) == [None, stored]
    assert known_wheel(package, "3.11", X86, tmp_path / "wheels") == stored


@pytest.fixture
def standin_index(tmp_path):
    folder = tmp_path / "index-wheels"
    path = make_wheel(folder, "team-lib", "1.0", {"team_lib/__init__.py": "x = 1\n" * 50,
                                                    "team_lib/core.py": "y = 2\n" * 20}, payload_bytes=400_000)
    with start_simple_index(folder) as index:
        yield index, path


def test_the_index_gives_the_size_and_range_reads_the_members_then_the_cache_does(standin_index):
    index, path = standin_index
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    package = LockedPackage("team-lib", "1.0", (digest,))
    from imagectl.assemble.fetch import supported_tags

    with new_session(DEFAULT_SETTINGS) as session:
        got = remote_wheel_size(session, index.url, package, supported_tags("3.11", X86), DEFAULT_SETTINGS)
    with zipfile.ZipFile(path) as archive:
        assert got == members_size(path.name, path.stat().st_size, archive.infolist())
    assert got.py_files == 2 and got.unpacked > 400_000
    assert index.full_downloads() == {}  # Range reads only, never the whole file
    assert any(r.range for r in index.requests())
    assert peek(WHEEL_SIZE, [{"sha256": digest}]) == [got]


def test_an_index_that_refuses_range_reads_leaves_the_members_unknown(tmp_path):
    """A static folder served by Python's http.server: PEP 503 HTML (no size), and every Range answered 200."""
    path = make_wheel(tmp_path / "root" / "files", "team-lib", "1.0", {"team_lib/__init__.py": "x = 1\n"})
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    page = tmp_path / "root" / "simple" / "team-lib"
    page.mkdir(parents=True)
    (page / "index.html").write_text(f'<a href="../../files/{path.name}#sha256={digest}">{path.name}</a>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(tmp_path / "root")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        from imagectl.assemble.fetch import supported_tags

        with new_session(DEFAULT_SETTINGS) as session:
            got = remote_wheel_size(session, f"http://127.0.0.1:{server.server_port}/simple",
                                    LockedPackage("team-lib", "1.0", (digest,)), supported_tags("3.11", X86),
                                    DEFAULT_SETTINGS)
    finally:
        server.shutdown()
        server.server_close()
    assert got == WheelSize(path.name, None)  # HTML gives no size, and the file was not downloaded to learn it
    assert peek(WHEEL_SIZE, [{"sha256": digest}]) == [None]  # a failure is not cached


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_a_json_page_carries_pep_700_sizes_and_ignores_one_that_is_no_count():
    page = {"meta": {"api-version": "1.1"}, "files": [
        {"filename": "a-1.0-py3-none-any.whl", "url": "a.whl", "hashes": {}, "size": 1234},
        {"filename": "b-1.0-py3-none-any.whl", "url": "b.whl", "hashes": {}, "size": "1234"},
        {"filename": "c-1.0-py3-none-any.whl", "url": "c.whl", "hashes": {}, "size": -1},
        {"filename": "d-1.0-py3-none-any.whl", "url": "d.whl", "hashes": {}}]}
    assert [f.size for f in parse_json_page("https://x.example/simple/a/", json.dumps(page))] == [1234, None, None,
                                                                                                   None]


# --- views -----------------------------------------------------------------------------------------------------------


def test_the_text_says_what_is_a_floor_and_where_each_number_comes_from():
    data = size_dict(expected_size(inputs()))
    assert json.loads(json.dumps(data)) == data
    text = size_text(data)
    lines = text.splitlines()
    assert lines[0].startswith(">= ") and lines[0].endswith("unpacked (expected, before the build)")
    rows = {line.split()[0]: line for line in lines[2:]}
    assert rows["system"].split()[1:3] == [">=", "100"]
    assert "base registry.example.com/hub/nvidia/cuda:12.1.1-base-ubuntu22.04@aaaaaaaaaaaa (manifest)" in rows["system"]
    assert "system layers (Python, venv, JIT packages): unknown, built by the engine" in rows["system"]
    assert rows["cuda"].split()[1:5] == ["900", "B", "1.3", "kB"] and rows["cuda"].endswith("2 wheels")
    assert ".pyc (estimate)" in rows["imagectl"] and "/opt/imagectl files (rendered)" in rows["imagectl"]
    assert size_text(None).startswith("unknown: no lock applies")


def test_a_report_carries_the_budget_and_the_refusal_redacted():
    size = expected_size(inputs())
    report = SizeReport(Budget(1000, "[build] size_budget"), {"linux/amd64": size},
                        "over it: https://user:hunter2@index.example/simple")
    data = report_dict(report, ("hunter2",))
    assert data["budget"] == {"bytes": 1000, "source": "[build] size_budget"}
    assert "hunter2" not in json.dumps(data) and data["over_budget"].startswith("over it: ")
    text = report_text("torch-2.3-cu121", data)
    assert text.splitlines()[0].startswith("torch-2.3-cu121 linux/amd64: >= ")
    assert text.splitlines()[-1].startswith("torch-2.3-cu121: size budget 1.0 kB ([build] size_budget): over it: ")
    fits = report_text("p", report_dict(SizeReport(Budget(10**9, "[build] size_budget"), {"linux/amd64": size})))
    assert fits.endswith("within it, as far as is known")
    assert "size budget" not in report_text("p", report_dict(SizeReport(None, {"linux/amd64": size})))


@pytest.mark.parametrize("changes", [
    {}, {"build_engine": "docker"}, {"build_install": "pip"}, {"pip_extra_index_urls": ("https://extra.example/s",)},
    {"pip_index_url": "https://user:pw@index.example/simple"}, {"pip_index_url": "https://index.example/simple"},
])
def test_show_decides_assembled_as_rendering_does_without_loading_it(matrix, changes, monkeypatch):
    """show's rule (size_facts.own_image_assembled) and the build's (render.context.assembled) agree."""
    import imagectl.engine.features
    from imagectl.config import Config
    from imagectl.image_spec import ImageSpec, placeholder_lock
    from imagectl.images.size_facts import own_image_assembled
    from imagectl.matrix.names import resolve_profile
    from imagectl.render.context import NETRC_FILE, assembled, pip_netrc

    monkeypatch.setattr(imagectl.engine.features, "_installed", lambda program: f"/usr/bin/{program}")
    profile = resolve_profile("torch-2.3-cu121", matrix)
    config = Config(**changes)
    lock = placeholder_lock(profile)
    netrc = NETRC_FILE if pip_netrc(profile, config) else ""
    assert own_image_assembled(profile, lock, config) == assembled(ImageSpec(profile, lock=lock), config, netrc)
