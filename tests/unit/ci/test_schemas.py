"""The example pipelines and what ``imagectl matrix --format github|gitlab`` generates for 1, 200 and 450
profiles (a team's matrix read by the real loader, through the CLI), checked against GitHub's workflow schema
and GitLab's CI schema as check-jsonschema vendors them (offline), plus the job counts the schemas leave out.

The GitHub output is the JSON a workflow's ``fromJSON`` reads, so what is checked is the workflow as GitHub
evaluates it: ``.github/workflows/imagectl.yml`` with the chunk list in place of
``${{ fromJSON(needs.matrix.outputs.matrix) }}``, and ``.github/workflows/imagectl-build.yml`` with each chunk's
profiles in place of ``${{ fromJSON(inputs.profiles) }}``.  The GitLab output is a pipeline file, checked as is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.unit.ci.schemas import github_jobs, gitlab_jobs, inline, schema_problems
from tests.unit.ci.team_matrix import write_team_matrix

pytest.importorskip("check_jsonschema", reason="the test extra installs check-jsonschema")

REPO = Path(__file__).resolve().parents[3]
CALLER = REPO / ".github" / "workflows" / "imagectl.yml"
CALLED = REPO / ".github" / "workflows" / "imagectl-build.yml"
CHUNKS = "${{ fromJSON(needs.matrix.outputs.matrix) }}"
PROFILES = "${{ fromJSON(inputs.profiles) }}"
INDEXES = "${{ fromJSON(inputs.indexes) }}"


def github_files(output: str, where: Path) -> list[Path]:
    """The example workflows with ``output`` (``imagectl matrix --format github``) inlined: the caller with
    the chunk list, and the called workflow once per chunk with that chunk's build jobs and index jobs."""
    chunks = json.loads(output)
    files = [where / "caller.yml"]
    files[0].write_text(inline(CALLER.read_text(encoding="utf-8"), CHUNKS, chunks), encoding="utf-8")
    called = CALLED.read_text(encoding="utf-8")
    for chunk in chunks["include"]:
        files.append(where / f"called-{chunk['chunk']}.yml")
        with_profiles = inline(called, PROFILES, chunk["profiles"])
        files[-1].write_text(inline(with_profiles, INDEXES, chunk["indexes"]), encoding="utf-8")
    return files


def test_example_pipelines_are_valid():
    assert schema_problems("github", [CALLER, CALLED]) == ""
    assert schema_problems("gitlab", [REPO / ".gitlab-ci.yml"]) == ""


@pytest.fixture
def team(tmp_path, use_matrix):
    """``team(count)``: the CLI reads a team matrix of exactly ``count`` profiles in place of the shipped one."""

    def install(count: int) -> Path:
        return use_matrix(write_team_matrix(tmp_path / f"team-{count}", count))

    return install


@pytest.mark.parametrize(("count", "sizes"), [(1, [1]), (200, [200]), (450, [256, 194])])
def test_generated_github_matrix_is_valid_and_within_the_limit(run_cli, team, tmp_path, count, sizes):
    team(count)
    r = run_cli("matrix", "--format", "github")
    assert r.code == 0, r.err
    chunks = json.loads(r.out)
    assert github_jobs(chunks) == len(sizes) <= 256
    assert [github_jobs(c["profiles"]) for c in chunks["include"]] == sizes and max(sizes) <= 256
    names = [e["profile"] for c in chunks["include"] for e in c["profiles"]["include"]]
    assert len(set(names)) == len(names) == count
    files = github_files(r.out, tmp_path)
    assert len(files) == 1 + len(sizes)
    assert schema_problems("github", files) == ""


@pytest.mark.parametrize(("count", "sizes"), [(1, [1]), (200, [200]), (450, [200, 200, 50])])
def test_generated_gitlab_pipeline_is_valid_and_within_the_limit(run_cli, team, tmp_path, count, sizes):
    team(count)
    r = run_cli("matrix", "--format", "gitlab")
    assert r.code == 0, r.err
    pipeline = tmp_path / "build-pipeline.yml"
    pipeline.write_text(r.out, encoding="utf-8")
    assert schema_problems("gitlab", [pipeline]) == ""
    jobs = {name: job for name, job in yaml.safe_load(r.out).items() if name.startswith("imagectl-")}
    assert [gitlab_jobs(job) for name, job in jobs.items() if name.startswith("imagectl-build")] == sizes
    assert [gitlab_jobs(job) for name, job in jobs.items() if name.startswith("imagectl-promote")] == sizes
    assert max(gitlab_jobs(job) for job in jobs.values()) <= 200


def test_generated_output_with_max_jobs_is_valid(run_cli, team, tmp_path):
    team(450)
    github = run_cli("matrix", "--format", "github", "--max-jobs", "100")
    chunks = json.loads(github.out)
    assert [github_jobs(c["profiles"]) for c in chunks["include"]] == [100, 100, 100, 100, 50]
    assert schema_problems("github", github_files(github.out, tmp_path)) == ""
    gitlab = run_cli("matrix", "--format", "gitlab", "--max-jobs", "100")
    (tmp_path / "child.yml").write_text(gitlab.out, encoding="utf-8")
    assert schema_problems("gitlab", [tmp_path / "child.yml"]) == ""
    assert {gitlab_jobs(job) for name, job in yaml.safe_load(gitlab.out).items() if name.startswith("imagectl-")} == {
        100, 50}


# --- the checks can fail: what the schemas refuse ------------------------------------------------------------


def test_github_schema_refuses_an_empty_matrix_which_is_why_the_workflow_skips_it(tmp_path):
    """``{"include":[]}`` inlined is refused (GitHub rejects a matrix without entries): the example workflow
    compares the output with that string and skips the build and promote jobs instead."""
    path = tmp_path / "empty.yml"
    path.write_text(inline(CALLER.read_text(encoding="utf-8"), CHUNKS, {"include": []}), encoding="utf-8")
    assert "include" in schema_problems("github", [path])


def test_github_schema_refuses_a_null_matrix_value_which_is_why_unverified_is_a_string(tmp_path):
    path = tmp_path / "null.yml"
    entry = {"profile": "torch-2.3-cu121", "verified": True, "unverified": None}
    path.write_text(inline(CALLED.read_text(encoding="utf-8"), PROFILES, {"include": [entry]}), encoding="utf-8")
    assert "unverified" in schema_problems("github", [path])


def test_gitlab_schema_refuses_more_than_200_matrix_entries_but_not_a_longer_list(tmp_path):
    """The schema caps ``parallel:matrix`` entries at 200, not the jobs one entry's list makes: the job count
    of the generated pipeline (one PROFILE list per job) is checked by counting, above."""
    entries = tmp_path / "entries.yml"
    entries.write_text(yaml.safe_dump({"build": {"script": ["true"], "parallel": {"matrix": [
        {"PROFILE": f"p{n}"} for n in range(201)]}}}), encoding="utf-8")
    assert "parallel" in schema_problems("gitlab", [entries])
    one_list = tmp_path / "one-list.yml"
    one_list.write_text(yaml.safe_dump({"build": {"script": ["true"], "parallel": {"matrix": [
        {"PROFILE": [f"p{n}" for n in range(201)]}]}}}), encoding="utf-8")
    assert schema_problems("gitlab", [one_list]) == ""
    assert gitlab_jobs(yaml.safe_load(one_list.read_text())["build"]) == 201
