"""``--changed-since``: the pure comparison, and the git plumbing against a scratch repository."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from imagectl.ci.changes import changed_profiles, fingerprint
from imagectl.config import Config
from imagectl.matrix.names import list_profiles


def _with_nccl(matrix, version: str, cuda: str, nccl: str):
    fw = matrix.frameworks["torch"]
    releases = tuple(
        replace(r, variants=tuple(replace(v, nccl=nccl) if v.cuda == cuda else v for v in r.variants))
        if r.version == version else r
        for r in fw.releases
    )
    return replace(matrix, frameworks={**matrix.frameworks, "torch": replace(fw, releases=releases)})


def test_nothing_changed(matrix):
    profiles = list_profiles(matrix)
    assert changed_profiles(profiles, profiles, Config(), templates_changed=False) == []


def test_a_changed_variant_changes_only_its_profiles(matrix):
    new = _with_nccl(matrix, "2.3.1", "12.1", "2.21.5")
    changed = changed_profiles(list_profiles(new), list_profiles(matrix), Config(), templates_changed=False)
    assert [p.name for p in changed] == ["torch-2.3-cu121", "torch-2.3-cu121-devel", "torch-2.3-cu121-base"]


def test_templates_or_unreadable_old_matrix_change_everything(matrix):
    profiles = list_profiles(matrix)
    assert changed_profiles(profiles, profiles, Config(), templates_changed=True) == profiles
    assert changed_profiles(profiles, None, Config(), templates_changed=False) == profiles


def test_new_profiles_are_changed(matrix):
    profiles = list_profiles(matrix)
    assert changed_profiles(profiles, profiles[2:], Config(), templates_changed=False) == profiles[:2]


def test_fingerprint_ignores_where_the_framework_was_read(matrix):
    profile = list_profiles(matrix)[0]
    moved = replace(profile, framework=replace(profile.framework, source=Path("/elsewhere.toml")))
    assert fingerprint(profile, Config()) == fingerprint(moved, Config())


# --- against a git repository ---------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path, use_matrix, copy_matrix, git_in):
    """tmp_path as a git repository holding the test matrix (loaded in place of the shipped one) and a
    template directory named by imagectl.toml; everything committed."""
    use_matrix(copy_matrix(tmp_path / "m"))
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "extra.j2").write_text("# nothing\n")
    (tmp_path / "imagectl.toml").write_text('[paths]\ntemplates = ["t"]\n')
    git_in(tmp_path, "init", "-q", "-b", "main")
    git_in(tmp_path, "add", "-A")
    git_in(tmp_path, "commit", "-q", "-m", "start")
    return tmp_path


def _changed(run_cli, ref: str = "HEAD") -> list[str]:
    r = run_cli("matrix", "--format", "github", "--changed-since", ref)
    assert r.code == 0, r.err
    return [e["profile"] for chunk in json.loads(r.out)["include"] for e in chunk["profiles"]["include"]]


def test_unchanged_tree_gives_the_empty_matrix(run_cli, repo):
    r = run_cli("matrix", "--format", "github", "--changed-since", "HEAD")
    assert r.code == 0 and r.out.strip() == '{"include":[]}'
    assert "0 profiles changed since HEAD" in r.err


def test_comment_only_edit_changes_nothing(run_cli, repo):
    path = repo / "m" / "torch.toml"
    path.write_text(path.read_text().replace('version = "2.7.1"', 'version = "2.7.1"   # a comment'))
    assert _changed(run_cli) == []


def test_edited_release_changes_its_profiles(run_cli, repo):
    path = repo / "m" / "torch.toml"
    path.write_text(path.read_text().replace('nccl = "2.26.2"', 'nccl = "2.26.5"'))
    assert _changed(run_cli) == [
        "torch-2.7-cu128", "torch-2.7-cu128-devel", "torch-2.7-cu128-base",
        "torch-2.7-cu128-ubuntu24.04", "torch-2.7-cu128-ubuntu24.04-devel", "torch-2.7-cu128-ubuntu24.04-base",
    ]


def test_edited_cuda_table_changes_its_profiles_and_committed_changes_count(run_cli, repo, git_in):
    path = repo / "m" / "cuda.toml"
    path.write_text(path.read_text().replace('min_driver = "520.61.05"', 'min_driver = "520.61.06"'))
    git_in(repo, "commit", "-q", "-am", "driver")
    assert _changed(run_cli, "HEAD~1") == ["torch-2.3-cu118", "torch-2.3-cu118-devel", "torch-2.3-cu118-base"]
    assert _changed(run_cli, "HEAD") == []


def test_template_change_changes_every_profile(run_cli, repo):
    (repo / "t" / "extra.j2").write_text("# something\n")
    assert len(_changed(run_cli)) == 12


def test_new_template_file_counts_too(run_cli, repo):
    (repo / "t" / "new.j2").write_text("# new\n")
    assert len(_changed(run_cli)) == 12


def test_framework_filter_and_markdown(run_cli, repo):
    path = repo / "m" / "torch.toml"
    path.write_text(path.read_text().replace('nccl = "2.26.2"', 'nccl = "2.26.5"'))
    r = run_cli("matrix", "--format", "markdown", "--framework", "torch", "--changed-since", "HEAD")
    assert r.code == 0 and r.out.count("| PyTorch |") == 1 and "2.26.5" in r.out


def test_unknown_ref_is_one_line_exit_2(run_cli, repo):
    r = run_cli("matrix", "--changed-since", "no-such-branch")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert r.err.startswith("imagectl: --changed-since 'no-such-branch': no such commit")
    r = run_cli("matrix", "--changed-since", "-x")
    assert r.code == 2 and "not a git ref" in r.err


def test_outside_a_git_repository_is_one_line_exit_2(run_cli, tmp_path, use_matrix, test_matrix_dir, monkeypatch):
    use_matrix(test_matrix_dir)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    r = run_cli("matrix", "--changed-since", "HEAD")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "is not inside a git repository" in r.err and "Traceback" not in r.err


def test_a_changed_lock_file_changes_the_profiles_that_install_it(tmp_path):
    from imagectl.ci.changes import changed_locks
    from imagectl.config import Config

    team = tmp_path / "locks"
    team.mkdir()
    paths = {team / "torch-2.3.1-cu121-py3.10.txt", team / "README.md", tmp_path / "other" / "x-1-cu1-py3.1.txt"}
    assert changed_locks(paths, Config(lock_dirs=(team,))) == {"torch-2.3.1-cu121-py3.10"}


ARM64_FACTS = '''[platforms]
source = "a test"
read = "2024-06-05"

[platforms.torch."2.7.1"."12.8"]
platforms = ["linux/amd64", "linux/arm64"]
evidence = { "linux/arm64" = "a stand-in aarch64 wheel" }
'''
TORCH_27 = ["torch-2.7-cu128", "torch-2.7-cu128-devel", "torch-2.7-cu128-base", "torch-2.7-cu128-ubuntu24.04",
            "torch-2.7-cu128-ubuntu24.04-devel", "torch-2.7-cu128-ubuntu24.04-base"]


def test_new_platform_facts_change_the_builds_profiles_and_fan_out(run_cli, repo):
    """A build that gains linux/arm64 (matrices/platforms.toml) is a changed build: its profiles are selected, each
    with a job per platform."""
    (repo / "m" / "platforms.toml").write_text(ARM64_FACTS)
    r = run_cli("matrix", "--format", "github", "--changed-since", "HEAD")
    entries = [(e["profile"], e["platform"]) for c in json.loads(r.out)["include"] for e in c["profiles"]["include"]]
    assert entries == [(name, platform) for name in TORCH_27 for platform in ("linux/amd64", "linux/arm64")]


def test_a_changed_arm64_lock_selects_its_profiles(run_cli, repo, git_in):
    from imagectl.lock.target import profile_lock_id
    from imagectl.matrix.load import load_matrix
    from imagectl.matrix.names import list_profiles

    (repo / "m" / "platforms.toml").write_text(ARM64_FACTS)
    (repo / "m" / "locks").mkdir()
    git_in(repo, "add", "-A")
    git_in(repo, "commit", "-q", "-m", "arm64")
    assert _changed(run_cli) == []
    lock = "torch-2.7.1-cu128-py3.10-aarch64"
    (repo / "m" / "locks" / f"{lock}.txt").write_text("# a lock changed\n")
    expected = [p.name for p in list_profiles(load_matrix([repo / "m"]))
                if "linux/arm64" in p.platforms and profile_lock_id(p, "linux/arm64") == lock]
    assert expected and list(dict.fromkeys(_changed(run_cli))) == expected  # each once per platform in the output
