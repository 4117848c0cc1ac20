"""Files imagectl writes stay where they belong and whole (issue 24, item 5): ``render -o`` never writes through a
symbolic link already in the folder, copies a team's ``[paths] context`` files instead of hard-linking them, leaves
nothing behind when the disk fills; ``lock -o`` leaves no temporary file; a configuration file holding credentials
that others can read is warned about."""

from __future__ import annotations

import errno
import os

import pytest

import imagectl.images.context_write
import imagectl.lock.make
import imagectl.lock.store

PROFILE = "torch-2.3-cu121"
SECRET = "Ind3xPassW0rd"


def test_render_refuses_a_symbolic_link_in_the_output_folder(run_cli, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "Dockerfile").symlink_to(outside)
    result = run_cli("render", PROFILE, "-o", str(out))
    assert result.code == 2 and "is a symbolic link" in result.err and len(result.err.splitlines()) == 1
    assert outside.read_text() == "precious\n" and sorted(p.name for p in out.iterdir()) == ["Dockerfile"]


def test_render_never_writes_credentials_through_a_link(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(imagectl.lock.make, "first_layer_as_of", lambda *args: None)  # no index asked (hermetic)
    (tmp_path / "imagectl.toml").write_text(f'[pip]\nindex_url = "https://u:{SECRET}@pypi.example.com/simple"\n')
    os.chmod(tmp_path / "imagectl.toml", 0o600)
    stolen = tmp_path / "stolen"
    out = tmp_path / "out"
    out.mkdir()
    (out / "imagectl-pip.netrc").symlink_to(stolen)
    result = run_cli("render", PROFILE, "-o", str(out))
    assert result.code == 2 and not stolen.exists(), result.err
    assert SECRET not in result.out + result.err


def test_render_refuses_a_linked_folder_for_the_teams_files(run_cli, tmp_path):
    team = tmp_path / "team"
    (team / "wheels").mkdir(parents=True)
    (team / "wheels" / "a.whl").write_bytes(b"wheel")
    (tmp_path / "imagectl.toml").write_text('[paths]\ncontext = ["./team"]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "files").symlink_to(elsewhere, target_is_directory=True)
    result = run_cli("render", PROFILE, "-o", str(out))
    assert result.code == 2 and "files is a symbolic link" in result.err
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in out.iterdir()) == ["files"]


def test_render_copies_the_teams_files(run_cli, tmp_path):
    team = tmp_path / "team"
    team.mkdir()
    source = team / "site.cfg"
    source.write_text("team setting\n")
    (tmp_path / "imagectl.toml").write_text('[paths]\ncontext = ["./team"]\n')
    out = tmp_path / "out"
    assert run_cli("render", PROFILE, "-o", str(out)).code == 0
    copy = out / "files" / "site.cfg"
    assert copy.read_text() == "team setting\n" and copy.stat().st_ino != source.stat().st_ino
    copy.write_text("edited in the rendered context\n")
    assert source.read_text() == "team setting\n"


def test_a_full_disk_leaves_no_partial_context(run_cli, tmp_path, monkeypatch):
    team = tmp_path / "team"
    team.mkdir()
    (team / "big.whl").write_bytes(b"x" * 1000)
    (tmp_path / "imagectl.toml").write_text('[paths]\ncontext = ["./team"]\n')

    def full(source, target, **kwargs):
        with open(target, "wb") as handle:
            handle.write(b"x" * 10)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(imagectl.images.context_write.shutil, "copyfile", full)
    out = tmp_path / "out"
    result = run_cli("render", PROFILE, "-o", str(out))
    assert result.code == 1 and "No space left on device" in result.err
    assert not out.exists()  # the folder it made, and every file in it, removed again

    out.mkdir()
    (out / "keep.txt").write_text("mine\n")
    assert run_cli("render", PROFILE, "-o", str(out)).code == 1
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]  # the user's own file stays, nothing else


def test_lock_output_on_a_full_disk_leaves_no_temporary_file(run_cli, tmp_path, monkeypatch):
    real_fdopen = os.fdopen

    def full(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)
        handle.write = lambda text: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device"))
        return handle

    monkeypatch.setattr(imagectl.lock.store.os, "fdopen", full)
    result = run_cli("lock", PROFILE, "-o", "l.txt")
    assert result.code == 1 and "No space left on device" in result.err, result.err
    assert list(tmp_path.glob(".l.txt.*")) == [] and not (tmp_path / "l.txt").exists()


@pytest.mark.parametrize("mode, warned", [(0o644, True), (0o666, True), (0o640, True), (0o600, False)])
def test_a_readable_configuration_with_credentials_is_warned_about(run_cli, tmp_path, mode, warned):
    config = tmp_path / "imagectl.toml"
    config.write_text(f'[pip]\nindex_url = "https://u:{SECRET}@pypi.example.com/simple"\n')
    os.chmod(config, mode)
    result = run_cli("show", PROFILE)
    assert result.code == 0
    assert ("holds credentials and others can read it" in result.err) == warned, result.err
    assert SECRET not in result.err + result.out


def test_a_readable_configuration_without_credentials_is_not_warned_about(run_cli, tmp_path):
    config = tmp_path / "imagectl.toml"
    config.write_text('[registry]\nnamespace = "team"\n')
    os.chmod(config, 0o644)
    assert "warning" not in run_cli("show", PROFILE).err
