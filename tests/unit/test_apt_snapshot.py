"""[apt] snapshot: validated, and rendered into the apt steps only (their sources point at snapshot.debian.org /
snapshot.ubuntu.com for the step, then the image's own sources are put back)."""

from __future__ import annotations

import subprocess

import pytest

from imagectl.config import Config, load_config
from imagectl.errors import ConfigError
from imagectl.image_spec import ImageSpec
from imagectl.matrix.names import resolve_profile
from imagectl.render.dockerfile import context_files

SNAPSHOT = "20240601T000000Z"


@pytest.mark.parametrize("value", ["2024-06-01", "20240601", "20241301T000000Z", "20240601T000000", "x", "1"])
def test_a_snapshot_that_is_no_utc_time_is_a_config_error(tmp_path, value):
    (tmp_path / "imagectl.toml").write_text(f'[apt]\nsnapshot = "{value}"\n')
    with pytest.raises(ConfigError, match=r"\[apt\] snapshot: expected a UTC time YYYYMMDDTHHMMSSZ"):
        load_config(cwd=tmp_path, env={})


def test_the_snapshot_comes_from_the_file_or_the_environment(tmp_path):
    (tmp_path / "imagectl.toml").write_text(f'[apt]\nsnapshot = "{SNAPSHOT}"\n')
    assert load_config(cwd=tmp_path, env={}).apt_snapshot == SNAPSHOT
    assert load_config(cwd=tmp_path, env={"IMAGECTL_APT_SNAPSHOT": "20250101T120000Z"}).apt_snapshot == \
        "20250101T120000Z"


def python_step(matrix, config: Config) -> str:
    text = context_files(ImageSpec(resolve_profile("torch-2.3-cu121", matrix)), config)["Dockerfile"].decode()
    return text.split("# Python 3.10", 1)[1].split("\nENV VIRTUAL_ENV", 1)[0]


def test_the_apt_step_reads_the_snapshot_and_puts_the_sources_back(matrix):
    step = python_step(matrix, Config(apt_snapshot=SNAPSHOT, apt_mirror="http://apt.example.com/ubuntu"))
    assert f"(snapshot {SNAPSHOT})" in step and "apt.example.com" not in step  # the snapshot replaces the mirror
    assert step.index("tar -C / -cf /tmp/imagectl-apt-etc.tar etc/apt") < step.index("sed -i -E") \
        < step.index("apt-get -o Acquire::Check-Valid-Until=false update") \
        < step.index("tar -C / -xpf /tmp/imagectl-apt-etc.tar && rm -f /tmp/imagectl-apt-etc.tar")


def rewrite(matrix, line: str) -> str:
    """``line`` after the snapshot's sed expressions, run by the real sed."""
    step = python_step(matrix, Config(apt_snapshot=SNAPSHOT))
    expressions = [part.split("'", 2)[1] for part in step.split(" -e ")[1:]]
    argv = ["sed", "-E", *[arg for e in expressions for arg in ("-e", e)]]
    return subprocess.run(argv, input=line, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("line, expected", [
    ("deb http://archive.ubuntu.com/ubuntu/ jammy main\n",
     f"deb http://snapshot.ubuntu.com/ubuntu/{SNAPSHOT}/ jammy main\n"),
    ("deb http://security.ubuntu.com/ubuntu jammy-security main\n",
     f"deb http://snapshot.ubuntu.com/ubuntu/{SNAPSHOT} jammy-security main\n"),
    ("URIs: http://deb.debian.org/debian\n", f"URIs: http://snapshot.debian.org/archive/debian/{SNAPSHOT}\n"),
    ("URIs: http://deb.debian.org/debian-security\n",
     f"URIs: http://snapshot.debian.org/archive/debian-security/{SNAPSHOT}\n"),
    ("deb http://security.debian.org/debian-security bullseye-security main\n",
     f"deb http://snapshot.debian.org/archive/debian-security/{SNAPSHOT} bullseye-security main\n"),
    ("deb https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64 /\n",
     "deb https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64 /\n"),  # not an archive
])
def test_the_archives_become_their_snapshots(matrix, line, expected):
    assert rewrite(matrix, line) == expected


def test_without_a_snapshot_nothing_changes(matrix):
    step = python_step(matrix, Config())
    assert "snapshot" not in step and "Check-Valid-Until" not in step
