"""Locking for real: uv against a local stand-in index (PEP 658 metadata, PEP 700 upload times, yanked flags),
through the library and the ``imagectl lock`` command.  No Docker; the network is 127.0.0.1 only."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from imagectl.config import Config
from imagectl.errors import InputError
from imagectl.lock.extras import lock_extras
from imagectl.lock.make import lock_for_build, make_lock
from imagectl.lock.target import target_for
from imagectl.matrix.names import resolve_profile
from tests.integration.support.wheels import (make_standin_dependency_wheels, make_standin_framework_wheels,
                                              make_wheel, start_simple_index)

pytestmark = pytest.mark.real_resolver
NAME = "torch-2.3-cu121"
RELEASED = datetime(2024, 6, 5, 16, 0, tzinfo=timezone.utc)
LATER = datetime(2024, 6, 16, 12, 0, tzinfo=timezone.utc)  # numpy 2.0.0's day: after the release + 7 days


@pytest.fixture
def index(tmp_path, matrix):
    """A stand-in index of the test matrix's torch-2.3-cu121 pins and their dependency tree, uploaded on
    RELEASED; yields (server, wheel directory)."""
    pins = dict(resolve_profile(NAME, matrix).packages)
    wheels = tmp_path / "wheels"
    make_standin_framework_wheels(wheels, pins, {"cuda": "12.1", "cudnn": None, "nccl": "2.20.5"},
                                  upload_time=RELEASED)
    make_standin_dependency_wheels(wheels, upload_time=RELEASED)
    server = start_simple_index(wheels)
    yield server, wheels
    server.stop()


@pytest.fixture
def uv_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))


def test_a_lock_is_the_whole_closure_made_from_metadata_alone(matrix, index, uv_cache):
    server, _ = index
    profile = resolve_profile(NAME, matrix)
    config = Config(pip_index_url=server.url)
    lock = make_lock(profile, config)
    names = set(lock.versions)
    assert {"torch", "triton", "torchvision", "numpy", "pillow", "sympy", "mpmath", "jinja2", "markupsafe"} <= names
    assert all(len(p.hashes) == 1 for p in lock.packages)
    assert lock.header.as_of == "2024-06-12" and "uploaded 2024-06-05, plus 7 days" in lock.header.as_of_note
    assert lock.header.index == server.url and lock.header.python == "3.10"
    assert server.full_downloads() == {}  # no wheel was downloaded to lock
    assert make_lock(profile, config).text == lock.text  # deterministic


def test_the_release_policy_keeps_a_later_transitive_release_out(matrix, index, uv_cache):
    server, wheels = index
    profile = resolve_profile(NAME, matrix)
    make_standin_dependency_wheels(wheels, upload_time=LATER, overrides={"numpy": "2.0.0"})
    config = Config(pip_index_url=server.url)
    assert make_lock(profile, config).versions["numpy"] == "1.26.4"
    assert make_lock(profile, config, "latest").versions["numpy"] == "2.0.0"
    assert make_lock(profile, Config(pip_index_url=server.url, lock_grace_days=30)).versions["numpy"] == "2.0.0"


def test_extras_are_resolved_on_the_lock(matrix, index, uv_cache):
    server, wheels = index
    make_wheel(wheels, "team-extra", "1.0", {"team_extra/__init__.py": ""}, ["numpy>=1.20"], upload_time=RELEASED)
    make_wheel(wheels, "team-numpy2", "1.0", {"team_numpy2/__init__.py": ""}, ["numpy>=2"], upload_time=RELEASED)
    make_standin_dependency_wheels(wheels, upload_time=LATER, overrides={"numpy": "2.0.0"})
    profile = resolve_profile(NAME, matrix)
    config = Config(pip_index_url=server.url)
    lock = make_lock(profile, config)
    closure = lock_extras(['team-extra==1.0; python_version >= "3.8"'], lock, target_for(profile, config))
    assert {p.name: p.version for p in closure} == {"team-extra": "1.0", "numpy": "1.26.4"}  # numpy stays locked
    with pytest.raises(InputError, match="cannot be installed with the lock of torch-2.3.1-cu121-py3.10"):
        lock_extras(["team-numpy2==1.0"], lock, target_for(profile, config))
    with pytest.raises(InputError, match=r"'torch==2.4.0' conflicts with the lock .*: torch==2\.3\.1"):
        lock_extras(["torch==2.4.0"], lock, target_for(profile, config))


def test_an_index_without_the_framework_names_the_index_and_the_setting(matrix, tmp_path, uv_cache):
    empty = start_simple_index(tmp_path / "nothing")
    try:
        from imagectl.errors import OperationError

        with pytest.raises(OperationError) as caught:
            lock_for_build(resolve_profile(NAME, matrix), Config(pip_index_url=empty.url))
        assert empty.url in str(caught.value) and "[pip] index_url" in str(caught.value)
    finally:
        empty.stop()


def write_config(tmp_path: Path, url: str) -> None:
    (tmp_path / "locks").mkdir(exist_ok=True)
    (tmp_path / "imagectl.toml").write_text(f'[pip]\nindex_url = "{url}"\n\n[paths]\nlocks = ["locks"]\n')


def test_the_lock_command_writes_keeps_and_upgrades(run_cli, use_matrix, test_matrix_dir, tmp_path, index, uv_cache):
    use_matrix(test_matrix_dir)
    server, wheels = index
    write_config(tmp_path, server.url)
    made = run_cli("lock", NAME)
    assert made.code == 0, made.err
    path = tmp_path / "locks" / "torch-2.3.1-cu121-py3.10.txt"
    first = path.read_bytes()
    assert "written to" in made.err and first.startswith(b"# imagectl lock: torch 2.3.1 (cu121), Python 3.10\n")
    kept = run_cli("lock", NAME)
    assert kept.code == 0 and "up to date" in kept.err and path.read_bytes() == first
    make_standin_dependency_wheels(wheels, upload_time=datetime.now(timezone.utc), overrides={"numpy": "2.0.0"})
    assert run_cli("lock", NAME, "--as-of", "latest").code == 0
    assert b"numpy==1.26.4" in path.read_bytes()  # the existing lock's versions are kept where they fit
    assert run_cli("lock", NAME, "--as-of", "latest", "--upgrade").code == 0
    assert b"numpy==2.0.0" in path.read_bytes()
    shown = run_cli("show", NAME, "--json")
    assert '"origin": "team"' in shown.out and '"numpy": "2.0.0"' in shown.out
    listed = run_cli("list")
    row = next(line for line in listed.out.splitlines() if line.startswith(f"{NAME} "))
    assert row.split()[-1] == "team"


def test_lock_check_finds_drift_and_yanked_files(run_cli, use_matrix, test_matrix_dir, tmp_path, index, uv_cache):
    use_matrix(test_matrix_dir)
    server, wheels = index
    write_config(tmp_path, server.url)
    assert run_cli("lock", NAME).code == 0
    clean = run_cli("lock", "--check", "--framework", "torch")
    assert clean.code == 0, clean.err
    yanked = next(wheels.glob("filelock-*.whl"))
    yanked.with_name(yanked.name + ".yanked").write_text("broken on 3.10\n")
    found = run_cli("lock", "--check", "--framework", "torch")
    assert found.code == 1
    assert "filelock==3.15.1: filelock-3.15.1-py3-none-any.whl is yanked (broken on 3.10)" in found.err
    path = tmp_path / "locks" / "torch-2.3.1-cu121-py3.10.txt"
    path.write_text(path.read_text().replace("\ntriton==", "\ntriton==9", 1))
    drift = run_cli("lock", "--check", "--framework", "torch")
    assert drift.code == 1 and "triton: the matrix pins" in drift.err


def test_profiles_with_the_same_cuda_pins_lock_the_same_cuda_layer(matrix, tmp_path, uv_cache):
    """The CUDA layer's unpinned dependencies are locked as of the CUDA pins' own upload day, so two torch patch
    releases with the same pins lock the same nvidia-nvjitlink (the real case: nvidia-cusolver-cu12 requires it
    without a version; locked as of each release's day, 2.3.0 took 12.4.127 and 2.3.1 12.5.40)."""
    from dataclasses import replace

    day = lambda text: datetime.fromisoformat(text).replace(tzinfo=timezone.utc)  # noqa: E731
    b = resolve_profile(NAME, matrix)
    layered = replace(b.framework, layers=(("cuda", ("nvidia-*",)), ("framework", ("torch", "triton")),
                                           ("rest", ("*",))))
    b = replace(b, framework=layered)
    a = replace(b, release=replace(b.release, version="2.3.0",
                                   companions=(("torchaudio", "2.3.0"), ("torchvision", "0.18.0"))),
                variant=replace(b.variant, pins=tuple((n, "2.3.0" if n == "triton" else v) for n, v in b.variant.pins)))
    wheels = tmp_path / "wheels"
    facts = {"cuda": "12.1", "cudnn": None, "nccl": "2.20.5"}
    make_standin_framework_wheels(wheels, dict(a.packages), facts, upload_time=day("2024-04-24"))
    make_standin_framework_wheels(wheels, dict(b.packages), facts, upload_time=day("2024-06-05"))
    make_standin_dependency_wheels(wheels, upload_time=day("2024-01-10"))
    pins_day = day("2024-03-01")
    for name, version in b.variant.pins:
        if name.startswith("nvidia-"):
            requires = ["nvidia-nvjitlink-cu12"] if name == "nvidia-cudnn-cu12" else []
            make_wheel(wheels, name, version, {f"{name.replace('-', '_')}/__init__.py": ""}, requires,
                       upload_time=pins_day)
    for version, uploaded in (("12.4.99", "2024-03-06"), ("12.5.40", "2024-05-21")):
        make_wheel(wheels, "nvidia-nvjitlink-cu12", version, {"nvidia_nvjitlink/__init__.py": ""},
                   upload_time=day(uploaded))
    server = start_simple_index(wheels)
    try:
        config = Config(pip_index_url=server.url)
        lock_a, lock_b = make_lock(a, config), make_lock(b, config)
        assert lock_a.versions["nvidia-nvjitlink-cu12"] == lock_b.versions["nvidia-nvjitlink-cu12"] == "12.4.99"
        assert "cuda layer as of 2024-03-08: its pins' upload, plus 7 days" in lock_b.header.as_of_note
        one_layer = replace(b, framework=replace(layered, layers=(("packages", ("*",)),)))
        assert make_lock(one_layer, config).versions["nvidia-nvjitlink-cu12"] == "12.5.40"  # as of 2.3.1's day
    finally:
        server.stop()


def test_a_security_floor_lifts_one_package_past_the_as_of_date_and_nothing_else(matrix, index, uv_cache):
    """Issue 21, item 4: a floor is applied after --as-of.  As of the release (2024-06-12) the closure has
    markupsafe 2.1.5; with a floor markupsafe>=2.1.6 (uploaded 2024-07-01) the lock takes 2.1.6, as of that day (not
    2.1.7, uploaded later), every other package as before, and its header says which floor lifted what."""
    from dataclasses import replace

    from imagectl.matrix.model import LockFloor

    server, wheels = index
    make_standin_dependency_wheels(wheels, upload_time=datetime(2024, 7, 1, 9, tzinfo=timezone.utc),
                                   overrides={"markupsafe": "2.1.6"})
    make_standin_dependency_wheels(wheels, upload_time=datetime(2024, 8, 1, 9, tzinfo=timezone.utc),
                                   overrides={"markupsafe": "2.1.7"})
    profile = resolve_profile(NAME, matrix)
    config = Config(pip_index_url=server.url)
    plain = make_lock(profile, config)
    floor = LockFloor("markupsafe", "2.1.6", "2024-07-01", "CVE-TEST-1: a test advisory")
    floored = replace(profile, framework=replace(profile.framework, lock_floors=(floor,)))
    lock = make_lock(floored, config)
    assert plain.versions["markupsafe"] == "2.1.5" and lock.versions["markupsafe"] == "2.1.6"
    assert {k: v for k, v in lock.versions.items() if k != "markupsafe"} == {
        k: v for k, v in plain.versions.items() if k != "markupsafe"}
    assert lock.header.as_of == plain.header.as_of == "2024-06-12"
    assert lock.header.floors == "markupsafe 2.1.5 -> 2.1.6 (CVE-TEST-1: a test advisory)"
    assert "# floors: markupsafe 2.1.5 -> 2.1.6 (CVE-TEST-1: a test advisory)\n" in lock.text
    met = replace(profile, framework=replace(profile.framework, lock_floors=(replace(floor, version="2.1.5"),)))
    assert make_lock(met, config).text == plain.text  # a floor the lock meets changes nothing
