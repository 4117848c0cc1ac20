"""``show`` and ``validate`` answer from the result cache on a repeated run (issue 12's start-up target), and the
cache keys every input: a lock file, a lock directory, the configuration and the matrix directories each
change the answer at once, never a stale one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from imagectl import shipped

PROFILE = "torch-2.3-cu121"


@pytest.fixture(autouse=True)
def cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The result cache on, in a folder of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "imagectl"


def show(run_cli, *args: str) -> dict:
    result = run_cli("show", PROFILE, "--json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_a_repeated_show_is_a_cache_hit_equal_to_an_uncached_one(run_cli, cache_on, monkeypatch):
    first = show(run_cli)
    assert sorted(p.name.split("-")[0] for p in cache_on.glob("show-*.pickle")) == ["show"]
    assert show(run_cli) == first
    monkeypatch.setenv("IMAGECTL_NO_CACHE", "1")
    assert show(run_cli) == first


def test_a_team_lock_written_after_a_cached_show_is_shown_and_its_removal_too(run_cli, tmp_path):
    team = tmp_path / "locks"
    team.mkdir()
    (tmp_path / "imagectl.toml").write_text('[paths]\nlocks = ["./locks"]\n')
    before = show(run_cli)
    assert before["lock"]["origin"] == "shipped"
    shutil.copy(before["lock"]["path"], team / Path(before["lock"]["path"]).name)
    after = show(run_cli)
    assert after["lock"]["origin"] == "team" and after["lock"]["path"] == str(team / Path(before["lock"]["path"]).name)
    (team / Path(before["lock"]["path"]).name).unlink()
    assert show(run_cli)["lock"]["origin"] == "shipped"


def test_an_edited_lock_file_changes_the_shown_lock(run_cli, tmp_path):
    team = tmp_path / "locks"
    team.mkdir()
    (tmp_path / "imagectl.toml").write_text('[paths]\nlocks = ["./locks"]\n')
    shipped_lock = Path(show(run_cli)["lock"]["path"])
    copy = team / shipped_lock.name
    shutil.copy(shipped_lock, copy)
    sha = show(run_cli)["lock"]["sha256"]
    copy.write_text(copy.read_text().replace("# source: ", "# source: edited, "))
    edited = show(run_cli)["lock"]
    assert edited["sha256"] != sha and edited["source"].startswith("edited, ")


def test_the_configuration_is_part_of_the_key(run_cli, tmp_path):
    assert show(run_cli)["image"] == f"localhost/imagectl/{PROFILE}:latest"
    (tmp_path / "imagectl.toml").write_text('[registry]\nurl = "registry.example.com:5000"\nnamespace = "team"\n')
    assert show(run_cli)["image"] == f"registry.example.com:5000/team/{PROFILE}:latest"


def test_a_matrix_file_added_after_a_cached_validate_is_validated(run_cli, tmp_path):
    extra = tmp_path / "my-matrices"
    extra.mkdir()
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["./my-matrices"]\n')
    assert run_cli("validate").code == 0
    assert run_cli("validate").code == 0  # the cached report
    (extra / "broken.toml").write_text("[cuda.\n")
    result = run_cli("validate")
    assert result.code == 2 and "broken.toml" in result.err


def test_a_changed_matrix_file_is_read_again_by_show(run_cli, tmp_path):
    mine = tmp_path / "my-matrices"
    mine.mkdir()
    team_cuda = mine / "cuda.toml"
    text = (shipped.shipped_dir("matrices") / "cuda.toml").read_text()
    team_cuda.write_text(text)
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["./my-matrices"]\n')
    assert show(run_cli)["min_driver"] == "530.30.02"
    floor = 'min_driver = "530.30.02"'
    assert text.count(floor) == 1
    team_cuda.write_text(text.replace(floor, 'min_driver = "535.54.03"'))
    assert show(run_cli)["min_driver"] == "535.54.03"
