"""``imagectl matrix --format tekton``: Tasks and a Pipeline whose build fans out with a matrix over every profile
and platform, index and promote after, the build and index Tasks emitting IMAGE_URL and IMAGE_DIGEST for Tekton
Chains; checked against Tekton's v1 CRD schemas and the webhook's rules (kube_schemas.py), and a golden file."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from imagectl.ci.outputs import render
from imagectl.ci.tekton import TEKTON_MAX_COMBINATIONS, tekton_pipeline
from imagectl.errors import InputError
from imagectl.matrix.names import list_profiles
from tests.unit.ci.kube_schemas import tekton_before, tekton_problems, tekton_schema_problems

GOLDEN = Path(__file__).parent / "golden"
UPDATE = bool(os.environ.get("IMAGECTL_UPDATE_GOLDEN"))  # read here: run_cli clears IMAGECTL_* while a test runs
BOTH = "linux/amd64,linux/arm64"


def documents(text: str) -> dict[str, dict[str, Any]]:
    """The four documents by name, after checking them against the schemas and the webhook's rules."""
    docs = list(yaml.safe_load_all(text))
    assert tekton_schema_problems(docs) == []
    assert tekton_problems(docs) == []
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Task", "imagectl-build"), ("Task", "imagectl-index"), ("Task", "imagectl-promote"), ("Pipeline", "imagectl")]
    return {d["metadata"]["name"]: d for d in docs}


def combinations(pipeline: dict[str, Any], prefix: str) -> list[list[tuple[str, str]]]:
    """Per PipelineTask named ``prefix``, ``prefix-2``, ...: its matrix's combinations as (name, value) pairs."""
    return [[tuple((p["name"], p["value"]) for p in entry["params"]) for entry in task["matrix"]["include"]]
            for task in pipeline["spec"]["tasks"] if task["name"].split("-")[0] == prefix]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (IMAGECTL_UPDATE_GOLDEN=1 rewrites it)"


def test_the_test_matrix_through_the_cli_is_the_golden_file(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "--format", "tekton")
    assert r.code == 0 and r.err == "", r.err
    documents(r.out)
    check_golden("tekton.yaml", r.out)
    assert run_cli("matrix", "--format", "tekton").out == r.out  # the same inputs, the same text


def test_every_profile_and_platform_is_built_once_then_indexed_then_promoted(matrix):
    profiles = list_profiles(matrix)
    docs = documents(tekton_pipeline(profiles, max_jobs=5))
    tasks = docs["imagectl"]["spec"]["tasks"]
    assert [t["name"] for t in tasks] == ["build", "build-2", "build-3", "index", "index-2", "index-3",
                                          "promote", "promote-2", "promote-3"]
    builds = combinations(docs["imagectl"], "build")
    assert [len(c) for c in builds] == [5, 5, 2]
    assert [pair for chunk in builds for pair in chunk] == [
        (("profile", p.name), ("platform", pl)) for p in profiles for pl in p.platforms]
    indexes = combinations(docs["imagectl"], "index")
    assert [pair for chunk in indexes for pair in chunk] == [
        (("profile", p.name), ("platforms", ",".join(p.platforms))) for p in profiles]
    assert [pair for chunk in combinations(docs["imagectl"], "promote") for pair in chunk] == [
        (("profile", p.name),) for p in profiles]
    by_name = {t["name"]: t for t in tasks}
    assert [by_name[n]["runAfter"] for n in ("index", "index-2", "index-3")] == [["build"], ["build-2"], ["build-3"]]
    for name in ("promote", "promote-2", "promote-3"):  # after every build succeeded, through every index
        assert tekton_before(tasks, name) == {"build", "build-2", "build-3", "index", "index-2", "index-3"}
    assert {t["taskRef"]["name"] for t in tasks} == {"imagectl-build", "imagectl-index", "imagectl-promote"}


def test_the_build_task_runs_imagectl_on_buildah_and_emits_chains_results(matrix):
    docs = documents(tekton_pipeline(list_profiles(matrix)))
    for name in ("imagectl-build", "imagectl-index"):
        spec = docs[name]["spec"]
        assert spec["results"] == [
            {"name": "IMAGE_URL", "type": "string", "description": spec["results"][0]["description"]},
            {"name": "IMAGE_DIGEST", "type": "string", "description": spec["results"][1]["description"]}]
        (step,) = spec["steps"]
        env = {e["name"]: e["value"] for e in step["env"]}
        assert env["IMAGE_URL_FILE"] == "$(results.IMAGE_URL.path)"
        assert env["IMAGE_DIGEST_FILE"] == "$(results.IMAGE_DIGEST.path)"
        assert env["PROFILE"] == "$(params.profile)" and env["DOCKER_CONFIG_DIR"] == "$(workspaces.dockerconfig.path)"
        assert step["securityContext"] == {"privileged": True} and step["image"] == "$(params.image)"
        assert step["volumeMounts"] == [{"name": "containers", "mountPath": "/var/lib/containers"}]
        assert "export IMAGECTL_BUILD_ENGINE=buildah" in step["script"]
        assert "python3 -m imagectl.ci.image_results" in step["script"]
    build = docs["imagectl-build"]["spec"]["steps"][0]
    assert 'imagectl build "$PROFILE" --platform "$PLATFORM" --push' in build["script"]
    promote = docs["imagectl-promote"]["spec"]
    assert "results" not in promote and "securityContext" not in promote["steps"][0]
    assert 'imagectl promote "$PROFILE" --channel stable' in promote["steps"][0]["script"]
    params = {p["name"]: p for p in docs["imagectl"]["spec"]["params"]}
    assert "default" not in params["image"] and params["registry-url"]["default"] == ""


def test_each_profile_is_built_per_platform_and_indexed_with_all_of_them(run_cli, shipped_matrix):
    r = run_cli("matrix", "--format", "tekton", "--framework", "jax")
    assert r.code == 0, r.err
    docs = documents(r.out)
    profiles = list_profiles(shipped_matrix, "jax")
    builds = [pair for chunk in combinations(docs["imagectl"], "build") for pair in chunk]
    assert builds == [(("profile", p.name), ("platform", pl)) for p in profiles for pl in p.platforms]
    assert {p.platforms for p in profiles} == {tuple(BOTH.split(","))}
    indexes = [pair for chunk in combinations(docs["imagectl"], "index") for pair in chunk]
    assert indexes == [(("profile", p.name), ("platforms", BOTH)) for p in profiles]
    (build,) = [t for t in docs["imagectl"]["spec"]["tasks"] if t["name"] == "build"]  # TaskRuns' names, shown
    assert [e["name"] for e in build["matrix"]["include"][:2]] == [f"{profiles[0].name}-linux-amd64",
                                                                  f"{profiles[0].name}-linux-arm64"]


def test_a_profiles_platforms_share_a_chunk(shipped_matrix):
    profiles = list_profiles(shipped_matrix, "jax")[:3]  # two platforms each
    docs = documents(tekton_pipeline(profiles, max_jobs=3))
    assert [len(c) for c in combinations(docs["imagectl"], "build")] == [2, 2, 2]
    with pytest.raises(InputError, match="--max-jobs 1: a profile builds for 2 platforms"):
        tekton_pipeline(profiles, max_jobs=1)


def test_no_profile_is_one_task_that_says_so():
    docs = documents(tekton_pipeline([]))
    (task,) = docs["imagectl"]["spec"]["tasks"]
    assert task["name"] == "nothing-to-build" and "nothing to build" in task["taskSpec"]["steps"][0]["script"]


@pytest.mark.parametrize(("field", "value"), [("name", "torch-$(params.image)"), ("name", "{{workflow.name}}"),
                                              ("name", "a\nb")])
def test_a_name_tekton_or_argo_would_substitute_is_refused(matrix, field, value):
    profile = dataclasses.replace(list_profiles(matrix)[0], **{field: value})
    for fmt in ("tekton", "argo"):
        with pytest.raises(InputError, match="profile name .* would not keep it as written"):
            render([profile], fmt)


def test_an_unverified_reason_is_one_comment_line(matrix_copy):
    matrix_copy.edit("torch.toml", 'cuda = "11.8"\n', 'cuda = "11.8"\n  unverified = """no source\n  for its pins"""\n')
    profiles = [p for p in list_profiles(matrix_copy.load()) if p.variant.unverified]
    assert len(profiles) == 3
    text = tekton_pipeline(profiles)
    documents(text)
    comments = [line for line in text.splitlines() if line.startswith("# unverified: ")]
    assert comments == [f"# unverified: {p.name}: no source for its pins" for p in profiles]


def test_max_jobs_through_the_cli(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "--format", "tekton", "--max-jobs", "4")
    assert r.code == 0 and [len(c) for c in combinations(documents(r.out)["imagectl"], "build")] == [4, 4, 4]
    above = run_cli("matrix", "--format", "tekton", "--max-jobs", "300")
    assert above.code == 0 and above.err == (
        f"warning: --max-jobs 300 is above tekton's documented {TEKTON_MAX_COMBINATIONS} jobs per matrix\n")
    argo = run_cli("matrix", "--format", "argo", "--max-jobs", "4")
    assert argo.code == 2 and argo.err.startswith("imagectl: --max-jobs applies to --format github, gitlab, tekton")
