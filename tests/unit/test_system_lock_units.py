"""The system lock (imagectl/lock/system.py): its file format, apt's simulation output, the grammar every package
passes before a Dockerfile, where it is found, and how the apt steps render with one."""

from __future__ import annotations

import pytest

from imagectl.config import Config
from imagectl.errors import InputError, ValidationError
from imagectl.image_spec import ImageSpec
from imagectl.lock.system import (AptPackage, SystemLock, SystemLockHeader, apt_package, check_deb_version,
                                  format_system_lock, parse_simulation, parse_system_lock, system_lock_id)
from imagectl.lock.system_store import find_system_lock, profile_system_lock_id, write_system_lock
from imagectl.matrix.names import resolve_profile
from imagectl.render.dockerfile import context_files
from tests.unit.render.test_render import check_golden

DIGEST = "sha256:" + "ab" * 32
# what apt-get install --simulate printed in the stand-in base (Debian bookworm), cut down; and an upgrade line
SIMULATION = """NOTE: This is only a simulation!
      apt-get needs root privileges for real execution.
Inst libc6 [2.36-9+deb12u3] (2.36-9+deb12u4 Debian:12.5/stable, Debian-Security:12/stable-security [amd64]) []
Inst binutils-common (2.40-2 Debian:12.5/stable [amd64])
Inst cpp-12 (12.2.0-14 Debian:12.5/stable [amd64])
Inst cuda-compat-12-1 (530.30.02-1 NVIDIA CUDA:/ [amd64])
Conf binutils-common (2.40-2 Debian:12.5/stable [amd64])
"""


def a_lock(python=(), jit=(), base="nvidia/cuda:12.1.1-base-ubuntu22.04", python_version="3.10") -> SystemLock:
    header = SystemLockHeader("torch", base, DIGEST, python_version, asked="2026-12-02",
                              source="imagectl lock torch-2.3.1-cu121-py3.10 --system (buildah)")
    return SystemLock(header, (("python", tuple(python), "" if python else "the base has Python 3.10 with venv"),
                               ("jit", tuple(jit), "" if jit else "the base has every package of this step")))


GCC = AptPackage("gcc-12", "12.2.0-14", "Ubuntu:22.04/jammy", "amd64")
PY = AptPackage("python3.10", "3.10.12-1~22.04.3", "Ubuntu:22.04/jammy-updates,Ubuntu:22.04/jammy-security", "amd64")


def test_apt_simulation_gives_every_installed_package_with_its_archive():
    packages = parse_simulation(SIMULATION)
    assert [p.line for p in packages] == [
        "binutils-common=2.40-2 Debian:12.5/stable amd64",
        "cpp-12=12.2.0-14 Debian:12.5/stable amd64",
        "cuda-compat-12-1=530.30.02-1 NVIDIA_CUDA:/ amd64",
        "libc6=2.36-9+deb12u4 Debian:12.5/stable,Debian-Security:12/stable-security amd64",
    ]


def test_a_system_lock_file_reads_back_as_written():
    lock = a_lock(python=[PY], jit=[GCC])
    text = format_system_lock(lock)
    assert text.splitlines()[:3] == [
        "# imagectl system lock: torch on nvidia/cuda:12.1.1-base-ubuntu22.04, Python 3.10",
        f"# base: nvidia/cuda:12.1.1-base-ubuntu22.04@{DIGEST}", "# platform: linux/amd64"]
    assert ("[python]\npython3.10=3.10.12-1~22.04.3 Ubuntu:22.04/jammy-updates,Ubuntu:22.04/jammy-security "
            "amd64\n") in text
    assert parse_system_lock(text, "f") == lock
    assert lock.header.lock_id == "torch-12.1.1-base-ubuntu22.04-py3.10"


def test_a_step_without_packages_says_why():
    lock = a_lock(jit=[GCC])
    text = lock.text
    assert "[python]\n# none: the base has Python 3.10 with venv\n[jit]\n" in text
    back = parse_system_lock(text, "f")
    assert back.packages("python") == () and back.note("python") == "the base has Python 3.10 with venv"


@pytest.mark.parametrize("version", ["4:11.2.0-1ubuntu1", "3.11.0~rc1-1~22.04", "2.36-9+deb12u4", "1.0", "12.2.0-14"])
def test_debian_versions_pass(version):
    assert check_deb_version(version) == version


@pytest.mark.parametrize("version", ["", "1.0;rm -rf /", "$(id)", "1.0 2", "a1.0", "1.0'", "x" * 200, None, "-1"])
def test_anything_else_is_no_version(version):
    with pytest.raises(ValidationError):
        check_deb_version(version)


@pytest.mark.parametrize("name, version, archive, arch", [
    ("gcc;id", "1.0", "Debian:12/stable", "amd64"),
    ("gcc", "1.0`id`", "Debian:12/stable", "amd64"),
    ("gcc", "1.0", "Debian 12", "amd64"),
    ("gcc", "1.0", "Debian:12/stable", "amd 64"),
    ("Gcc", "1.0", "Debian:12/stable", "amd64"),
])
def test_a_package_line_that_fails_the_grammar_is_refused(name, version, archive, arch):
    with pytest.raises(ValidationError):
        apt_package(name, version, archive, arch)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("gcc-12=12.2.0-14", "gcc-12=12.2.0-14;id"), "not a Debian version"),
    (lambda t: t.replace("[jit]\n", ""), "expected the sections [python], [jit]"),
    (lambda t: t.replace("# platform: linux/amd64\n", ""), "the header lacks '# platform: ...'"),
    (lambda t: t.replace("# imagectl system lock", "# a lock"), "not an imagectl system lock"),
    (lambda t: t.replace("@sha256:", "@md5:"), "expected '# base:"),
    (lambda t: t + "stray line\n", "expected 'name=version ARCHIVE ARCH'"),
])
def test_a_broken_file_is_one_input_error(edit, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_system_lock(edit(a_lock(jit=[GCC]).text), "x.apt.lock")


def test_an_inst_line_apt_writes_otherwise_is_refused():
    with pytest.raises(ValidationError, match="cannot read apt's line"):
        parse_simulation("Inst gcc (1.0 Debian:12/stable amd64)")


def test_the_id_names_framework_base_tag_python_and_platform():
    assert system_lock_id("jax", "nvidia/cuda:12.6.3-base-ubuntu22.04", "3.11") == "jax-12.6.3-base-ubuntu22.04-py3.11"
    assert system_lock_id("torch", "nvidia/cuda:12.8.1-base-ubuntu24.04", "3.12", "linux/arm64") == \
        "torch-12.8.1-base-ubuntu24.04-py3.12-aarch64"


def test_it_is_found_beside_the_locks_and_must_be_the_profiles(matrix, tmp_path):
    profile = resolve_profile("torch-2.3-cu121", matrix)
    config = Config(lock_dirs=(tmp_path,))
    assert find_system_lock(profile, config) is None
    lock = a_lock(jit=[GCC], base=profile.base_image.familiar, python_version=profile.python)
    path = tmp_path / f"{profile_system_lock_id(profile)}.apt.lock"
    write_system_lock(lock, path)
    found = find_system_lock(profile, config)
    assert found is not None and found.lock == lock and found.origin == "team"
    path.write_text(lock.text.replace(f"Python {profile.python}", "Python 3.9"))
    with pytest.raises(InputError, match="made for torch on .*Python 3.9"):
        find_system_lock(profile, config)


def render(matrix, lock: SystemLock | None, config: Config = Config()) -> str:
    profile = resolve_profile("torch-2.3-cu121", matrix)
    spec = ImageSpec(profile, system_lock=lock, system_lock_file=lock.header.lock_id + ".apt.lock" if lock else "")
    return context_files(spec, config)["Dockerfile"].decode()


def test_the_apt_steps_install_exactly_the_locked_versions(matrix):
    lock = a_lock(python=[PY], jit=[GCC])
    text = render(matrix, lock)
    check_golden("torch-2.3-cu121.system-lock.Dockerfile", text)
    assert "apt-get install -y --no-install-recommends python3.10=3.10.12-1~22.04.3; \\\n" in text
    assert "apt-get install -y --no-install-recommends gcc-12=12.2.0-14; \\\n" in text
    assert "if ! python3.10" not in text and "missing=" not in text  # nothing decided at build time
    assert ("imagectl: the archive no longer serves $p of the system lock torch-12.1.1-base-ubuntu22.04-py3.10"
            ".apt.lock: set [apt] snapshot") in text


def test_a_lock_that_found_python_in_the_base_installs_none(matrix):
    text = render(matrix, a_lock())
    python_step = text.split("# Python 3.10", 1)[1].split("\nENV VIRTUAL_ENV", 1)[0]
    assert "apt-get" not in python_step and "python3.10 -m venv /opt/venv" in python_step
    assert "says the base has Python 3.10 with venv; it has not" in python_step
    assert "the base image has them all" in text and "missing=" not in text


def test_without_a_system_lock_the_steps_stay_as_they_were(matrix):
    text = render(matrix, None)
    assert "apt-get install -y --no-install-recommends $missing" in text and "no longer serves" not in text
