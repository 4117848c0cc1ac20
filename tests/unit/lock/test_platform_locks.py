"""Locks per platform (issue 20, item 2): ``imagectl lock NAME --platform linux/arm64`` resolves with real uv for
``aarch64-manylinux_2_28`` against a local stand-in index whose torch wheel is tagged ``manylinux_2_28_aarch64``
only; the lock's id, title and platform line say the platform, the store finds it by profile and platform, and
:func:`imagectl.lock.make.lock_for` is what a build of that platform installs.  No Docker; 127.0.0.1 only."""

from __future__ import annotations

import hashlib
import zipfile
from datetime import datetime, timezone
from email.parser import HeaderParser

import pytest

from imagectl.config import Config
from imagectl.errors import InputError
from imagectl.lock.make import lock_for
from imagectl.lock.store import find_lock
from imagectl.matrix.names import resolve_profile
from tests.integration.support.wheels import (make_standin_dependency_wheels, make_standin_framework_wheels,
                                              make_wheel, start_simple_index)

pytestmark = pytest.mark.real_resolver
NAME = "torch-2.3-cu121"
RELEASED = datetime(2024, 6, 5, 16, 0, tzinfo=timezone.utc)
ARM64_TAG = "py3-none-manylinux_2_28_aarch64"
PLATFORMS = '''[platforms]
source = "stand-in: the test's index has an aarch64 torch wheel only"
read = "2024-06-05"

[platforms.torch."2.3.1"."12.1"]
platforms = ["linux/amd64", "linux/arm64"]
evidence = { "linux/arm64" = "torch-2.3.1-py3-none-manylinux_2_28_aarch64.whl (stand-in)" }
'''


@pytest.fixture
def arm64_index(tmp_path, matrix):
    """The stand-in index of torch-2.3-cu121 with its torch wheel re-tagged ``manylinux_2_28_aarch64`` (the only
    torch file), requiring ``grace-helper`` where ``platform_machine == "aarch64"``; yields (server, torch wheel)."""
    pins = dict(resolve_profile(NAME, matrix).packages)
    wheels = tmp_path / "wheels"
    make_standin_framework_wheels(wheels, pins, {"cuda": "12.1", "cudnn": None, "nccl": "2.20.5"},
                                  upload_time=RELEASED)
    make_standin_dependency_wheels(wheels, upload_time=RELEASED)
    anywhere = next(wheels.glob("torch-*-py3-none-any.whl"))
    with zipfile.ZipFile(anywhere) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = HeaderParser().parsestr(archive.read(meta).decode()).get_all("Requires-Dist") or []
    anywhere.unlink()
    torch = make_wheel(wheels, "torch", pins["torch"], {"torch/__init__.py": "__version__ = '2.3.1'\n"},
                       [*requires, 'grace-helper==1.0; platform_machine == "aarch64"'], upload_time=RELEASED,
                       tag=ARM64_TAG)
    make_wheel(wheels, "grace-helper", "1.0", {"grace_helper/__init__.py": ""}, upload_time=RELEASED)
    server = start_simple_index(wheels)
    yield server, torch
    server.stop()


@pytest.fixture
def arm64_matrix(matrix_copy, use_matrix):
    matrix_copy.write("platforms.toml", PLATFORMS)
    use_matrix(matrix_copy.root)
    return matrix_copy


def write_config(tmp_path, url: str) -> None:
    (tmp_path / "locks").mkdir(exist_ok=True)
    (tmp_path / "imagectl.toml").write_text(f'[pip]\nindex_url = "{url}"\n\n[paths]\nlocks = ["locks"]\n')


def test_lock_platform_resolves_for_aarch64(run_cli, arm64_matrix, arm64_index, tmp_path, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    server, torch = arm64_index
    write_config(tmp_path, server.url)
    made = run_cli("lock", NAME, "--platform", "linux/arm64")
    assert made.code == 0, made.err
    path = tmp_path / "locks" / "torch-2.3.1-cu121-py3.10-aarch64.txt"
    text = path.read_text()
    assert text.startswith("# imagectl lock: torch 2.3.1 (cu121), Python 3.10, linux/arm64\n"
                           f"# index: {server.url}\n# platform: aarch64-manylinux_2_28\n")
    assert "remake: imagectl lock torch-2.3.1-cu121-py3.10 --platform linux/arm64" in text
    assert "grace-helper==1.0" in text  # the aarch64 marker held: uv resolved for aarch64
    assert hashlib.sha256(torch.read_bytes()).hexdigest() in text  # the aarch64 wheel's hash
    assert server.full_downloads() == {}
    # the same profile for linux/amd64: no x86_64 torch on this index, so uv finds no solution (the platform reached
    # uv), and nothing is written under the amd64 lock's name
    amd64 = run_cli("lock", NAME)
    assert amd64.code == 1 and "torch" in amd64.err and len(amd64.err.splitlines()) == 1
    assert not (tmp_path / "locks" / "torch-2.3.1-cu121-py3.10.txt").exists()
    kept = run_cli("lock", NAME, "--platform", "arm64")  # arm64 and aarch64 name the same platform
    assert kept.code == 0 and "up to date" in kept.err


def test_lock_for_finds_the_platforms_lock_and_only_it(run_cli, arm64_matrix, arm64_index, tmp_path, monkeypatch):
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    server, _ = arm64_index
    write_config(tmp_path, server.url)
    assert run_cli("lock", NAME, "--platform", "linux/arm64").code == 0
    profile = resolve_profile(NAME, arm64_matrix.load())
    config = Config(pip_index_url=server.url, lock_dirs=(tmp_path / "locks",))
    found = find_lock(profile, config, server.url, "linux/arm64")
    assert found is not None and found.lock.header.platform == "aarch64-manylinux_2_28"
    assert find_lock(profile, config, server.url) is None  # the amd64 lock is another file
    lines: list[str] = []
    chosen = lock_for(profile, "linux/arm64", config, lines.append)
    assert chosen.origin == "team" and chosen.lock.text == found.lock.text
    assert lines == [f"lock torch-2.3.1-cu121-py3.10-aarch64 (team: {found.path}, sha256 {found.lock.sha256[:12]})"]


def test_a_platform_the_build_lacks_is_refused(run_cli, use_matrix, test_matrix_dir, matrix):
    use_matrix(test_matrix_dir)  # no platforms.toml: every build is linux/amd64 only
    r = run_cli("lock", NAME, "--platform", "linux/arm64")
    assert r.code == 2 and len(r.err.splitlines()) == 1
    assert "torch-2.3-cu121 has no CUDA wheels for linux/arm64 on its index (its platforms: linux/amd64)" in r.err
    with pytest.raises(InputError, match="no CUDA wheels for linux/arm64"):
        lock_for(resolve_profile(NAME, matrix), "linux/arm64", Config())
    bad = run_cli("lock", NAME, "--platform", "linux/s390x")
    assert bad.code == 2 and "--platform 'linux/s390x': not a platform imagectl builds" in bad.err
