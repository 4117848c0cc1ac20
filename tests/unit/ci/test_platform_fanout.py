"""``imagectl matrix --format github|gitlab`` fans out per platform (issue 20, item 7): one build job per profile and
platform its build has CUDA wheels for (matrices/platforms.toml: jax 0.10 .. 0.12 and torch 2.11 .. 2.15 have
linux/arm64), and one index job per profile that waits for all of them; checked on the shipped matrix, through the
CLI, against GitHub's and GitLab's schemas (check-jsonschema, offline) and by counting jobs.
"""

from __future__ import annotations

import json

import pytest
import yaml

from imagectl.ci.outputs import github_chunks, gitlab_pipeline
from imagectl.errors import InputError
from imagectl.matrix.names import list_profiles
from tests.unit.ci.schemas import gitlab_jobs, schema_problems
from tests.unit.ci.test_outputs import check_github_matrix, check_gitlab_pipeline
from tests.unit.ci.test_schemas import github_files

pytest.importorskip("check_jsonschema", reason="the test extra installs check-jsonschema")

BOTH = "linux/amd64,linux/arm64"


def test_github_builds_each_platform_and_indexes_each_profile_once(run_cli, tmp_path, shipped_matrix):
    r = run_cli("matrix", "--format", "github", "--framework", "jax")
    assert r.code == 0, r.err
    builds = check_github_matrix(r.out)
    profiles = list_profiles(shipped_matrix, "jax")
    assert [(e["profile"], e["platform"]) for e in builds] == [(p.name, pl) for p in profiles for pl in p.platforms]
    assert {e["platforms"] for e in builds} == {BOTH}  # every jax build has aarch64 CUDA wheels on PyPI
    indexes = [e for c in json.loads(r.out)["include"] for e in c["indexes"]["include"]]
    assert indexes == [{"profile": p.name, "platforms": BOTH} for p in profiles]
    assert schema_problems("github", github_files(r.out, tmp_path)) == ""


def test_github_amd64_only_profiles_get_one_build_job(shipped_matrix):
    profiles = [p for p in list_profiles(shipped_matrix, "torch") if p.release.version == "2.10.0"]
    chunk = github_chunks(profiles)["include"][0]
    assert {e["platform"] for e in chunk["profiles"]["include"]} == {"linux/amd64"}  # aarch64 torch 2.10 is CPU-only
    assert len(chunk["profiles"]["include"]) == len(chunk["indexes"]["include"]) == len(profiles)


def test_github_chunks_never_split_a_profiles_platforms(run_cli, tmp_path, shipped_matrix):
    r = run_cli("matrix", "--format", "github", "--framework", "jax", "--max-jobs", "11")
    assert r.code == 0, r.err
    chunks = json.loads(r.out)["include"]
    # 24 profiles of two platforms each: 11 jobs hold 5 profiles (10 jobs), never 5 and a half
    assert [len(c["profiles"]["include"]) for c in chunks] == [10, 10, 10, 10, 8]
    check_github_matrix(r.out, max_jobs=11)  # each chunk's index entries name every platform built in that chunk
    assert schema_problems("github", github_files(r.out, tmp_path)) == ""


def test_github_max_jobs_below_a_profiles_platforms_is_refused(run_cli, shipped_matrix):
    r = run_cli("matrix", "--format", "github", "--framework", "jax", "--max-jobs", "1")
    assert r.code == 2 and r.out == "" and len(r.err.splitlines()) == 1
    assert "--max-jobs 1: a profile builds for 2 platforms, one job each, and they share a chunk" in r.err
    with pytest.raises(InputError):
        github_chunks(list_profiles(shipped_matrix, "jax"), max_jobs=1)


def test_gitlab_builds_each_platform_then_indexes_then_promotes(run_cli, tmp_path, shipped_matrix):
    r = run_cli("matrix", "--format", "gitlab")
    assert r.code == 0, r.err
    promoted = check_gitlab_pipeline(r.out)
    profiles = list_profiles(shipped_matrix)
    assert promoted == [p.name for p in profiles]
    document = yaml.safe_load(r.out)
    builds = sum(gitlab_jobs(job) for name, job in document.items() if name.startswith("imagectl-build"))
    assert builds == sum(len(p.platforms) for p in profiles) > len(profiles)
    assert max(gitlab_jobs(job) for name, job in document.items() if name.startswith("imagectl-")) <= 200
    path = tmp_path / "child.yml"
    path.write_text(r.out, encoding="utf-8")
    assert schema_problems("gitlab", [path]) == ""


def test_gitlab_index_jobs_carry_each_profiles_platforms(shipped_matrix):
    profiles = [p for p in list_profiles(shipped_matrix) if p.name in ("torch-2.15-cu132", "torch-2.10-cu128")]
    document = yaml.safe_load(gitlab_pipeline(profiles))
    assert document["imagectl-build"]["parallel"]["matrix"] == [
        {"PLATFORM": "linux/amd64", "PROFILE": ["torch-2.15-cu132", "torch-2.10-cu128"]},
        {"PLATFORM": "linux/arm64", "PROFILE": ["torch-2.15-cu132"]}]
    assert document["imagectl-index"]["parallel"]["matrix"] == [
        {"PLATFORMS": BOTH, "PROFILE": ["torch-2.15-cu132"]},
        {"PLATFORMS": "linux/amd64", "PROFILE": ["torch-2.10-cu128"]}]
    assert document["imagectl-promote"]["parallel"]["matrix"] == [{"PROFILE": ["torch-2.15-cu132", "torch-2.10-cu128"]}]
