"""The bad inputs that gave tracebacks in issue 24's sweep (item 7), added to the bad-input corpus of
tests/unit/test_bad_input.py and run the same way: a port above 65535 in a registry, a mirror, an ``import``
reference or ``--base``; a file that cannot be read (EACCES, EIO) as ``--config``, ``ca_bundle``, a template or a
lock; a release with ``python = []``; a 300-character framework name.

EACCES comes from a file of mode 000 for an ordinary user, and for root (the tests run as root in CI) from a
write-only sysfs attribute (``/sys/bus/*/drivers_probe``, mode 0200), which not even root may read; EIO from
``/proc/self/mem``.
"""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

import pytest

from tests.unit.test_bad_input import (  # noqa: F401 (the fixtures are used by name)
    COMMANDS,
    LOCK_ID,
    PROFILE,
    Case,
    World,
    answer_problem,
    bad_input_run,
    closed_address,
    framework,
    with_config,
)



def _unreadable() -> str:
    """A file this user cannot read (EACCES), or "" when there is none."""
    if os.geteuid() != 0:
        path = Path(tempfile.mkdtemp(prefix="imagectl-unreadable-")) / "unreadable"
        path.write_text("x")
        path.chmod(0)
        return str(path)
    for candidate in sorted(glob.glob("/sys/bus/*/drivers_probe")) + sorted(glob.glob("/sys/bus/*/rescan")):
        try:
            Path(candidate).read_bytes()
        except PermissionError:
            return candidate
        except OSError:
            continue
    return ""


UNREADABLE = _unreadable()

BAD_WORLDS: dict[str, World] = {
    "config-registry-port-too-big": with_config("[registry]\nurl = '127.0.0.1:99999'\n"),
    "env-registry-port-too-big": World(env={"IMAGECTL_REGISTRY_URL": "127.0.0.1:99999"}),
    "config-mirror-port-too-big": with_config('[mirrors]\n"docker.io" = "127.0.0.1:99999/hub"\n'),
    "config-index-port-too-big": with_config("[pip]\nindex_url = 'http://127.0.0.1:99999/simple'\n"),
    "config-ca-bundle-eio": with_config("[build]\nca_bundle = '/proc/self/mem'\n"),
    "config-ca-bundle-eacces": with_config(f"[build]\nca_bundle = '{UNREADABLE}'\n"),
    "config-flag-eacces": World(before=("--config", UNREADABLE)),
    "release-python-empty": framework('python = ["3.10"]', "python = []"),
    "framework-name-too-long": framework('name = "evil"', f'name = "{"e" * 300}"'),
}

CASES: dict[str, Case] = {
    "import-port-too-big": Case(("import", "127.0.0.1:99999/team/torch:1", "--name", PROFILE, "--no-check"), code=2),
    "build-base-port-too-big": Case(("build", PROFILE, "--extra", "einops", "--base", "127.0.0.1:99999/x:1"), code=2),
    "test-port-too-big": Case(("test", "127.0.0.1:99999/team/torch:1"), code=2),
}


def test_the_unreadable_file_is_unreadable_for_this_user():
    # the EACCES cases mean what they say only where the file exists and cannot be read, even by root
    assert UNREADABLE, "no file here that this user cannot read (no write-only sysfs attribute)"
    with pytest.raises(PermissionError):
        Path(UNREADABLE).read_bytes()


@pytest.mark.parametrize("world", list(BAD_WORLDS))
def test_every_command_refuses_the_world_with_exit_2_and_one_line(bad_input_run, world):
    problems = [answer_problem(bad_input_run, f"{world}/{command}", Case(args, BAD_WORLDS[world], code=2))
                for command, args in COMMANDS.items()]
    found = [p for p in problems if p]
    assert not found, f"{len(found)} of {len(COMMANDS)} commands:\n" + "\n".join(found)


@pytest.mark.parametrize("name", list(CASES))
def test_the_case_is_one_line_and_its_exit_status(bad_input_run, name):
    problem = answer_problem(bad_input_run, name, CASES[name])
    assert problem is None, problem


@pytest.mark.parametrize("command", ["render", "show", "build", "lock"])
def test_an_unreadable_template_or_lock_is_one_line(bad_input_run, tmp_path, command):
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "Dockerfile.j2").symlink_to(UNREADABLE)
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / f"{LOCK_ID}.txt").symlink_to(UNREADABLE)
    world = World({"imagectl.toml": '[paths]\ntemplates = ["tpl"]\nlocks = ["locks"]\n'})
    case = Case(dict(COMMANDS)[command], world, code=None, progress=command == "build")
    problem = answer_problem(bad_input_run, f"unreadable/{command}", case)
    assert problem is None, problem
    assert os.path.islink(tmp_path / "locks" / f"{LOCK_ID}.txt")
