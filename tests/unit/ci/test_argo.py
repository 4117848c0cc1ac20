"""``imagectl matrix --format argo``: a Workflow whose build step fans out with withParam over the JSON rows (one per
profile and platform), bounded by parallelism, each build with its digest as an output parameter, then the index and
promote steps; checked against Argo's published schema, strictly, and its validator's rules (kube_schemas.py), and
a golden file."""

from __future__ import annotations

import json
from typing import Any

import yaml

from imagectl.ci.argo import ARGO_PARALLELISM, argo_workflow
from imagectl.ci.outputs import GITHUB_KEYS
from imagectl.matrix.names import list_profiles
from tests.unit.ci.kube_schemas import argo_problems, argo_schema_problems

from tests.unit.ci.test_tekton import BOTH, check_golden


def workflow(text: str) -> dict[str, Any]:
    """The one document, after checking it against the schema (as published and strict) and the validator's rules."""
    (document,) = list(yaml.safe_load_all(text))
    assert argo_schema_problems(document, strict=False) == []
    assert argo_schema_problems(document, strict=True) == []
    assert argo_problems(document) == []
    return document


def rows(document: dict[str, Any], name: str) -> list[dict[str, Any]]:
    (parameter,) = [p for p in document["spec"]["arguments"]["parameters"] if p["name"] == name]
    return json.loads(parameter["value"])


def test_the_test_matrix_through_the_cli_is_the_golden_file(run_cli, use_matrix, test_matrix_dir):
    use_matrix(test_matrix_dir)
    r = run_cli("matrix", "--format", "argo")
    assert r.code == 0 and r.err == "", r.err
    workflow(r.out)
    check_golden("argo.yaml", r.out)
    assert run_cli("matrix", "--format", "argo").out == r.out


def test_build_fans_out_over_the_rows_then_index_then_promote(matrix):
    profiles = list_profiles(matrix)
    document = workflow(argo_workflow(profiles))
    spec = document["spec"]
    assert document["apiVersion"] == "argoproj.io/v1alpha1" and document["kind"] == "Workflow"
    assert spec["parallelism"] == ARGO_PARALLELISM == 8
    builds = rows(document, "builds")
    assert [(r["profile"], r["platform"]) for r in builds] == [(p.name, pl) for p in profiles for pl in p.platforms]
    assert all(tuple(r) == GITHUB_KEYS for r in builds)  # the rows of the github format
    assert rows(document, "indexes") == [{"profile": p.name, "platforms": ",".join(p.platforms)} for p in profiles]
    (entry,) = [t for t in spec["templates"] if t["name"] == spec["entrypoint"]]
    assert [[(s["name"], s["withParam"]) for s in group] for group in entry["steps"]] == [
        [("build", "{{workflow.parameters.builds}}")], [("index", "{{workflow.parameters.indexes}}")],
        [("promote", "{{workflow.parameters.indexes}}")]]  # step groups run in order, each after the last succeeded
    assert entry["outputs"]["parameters"] == [
        {"name": "builds", "valueFrom": {"parameter": "{{steps.build.outputs.parameters}}", "default": "[]"}},
        {"name": "indexes", "valueFrom": {"parameter": "{{steps.index.outputs.parameters}}", "default": "[]"}}]


def test_each_build_outputs_its_digest_and_runs_on_buildah(matrix):
    templates = {t["name"]: t for t in workflow(argo_workflow(list_profiles(matrix)))["spec"]["templates"]}
    for name in ("imagectl-build", "imagectl-index"):
        template = templates[name]
        outputs = {p["name"]: p["valueFrom"]["path"] for p in template["outputs"]["parameters"]}
        env = {e["name"]: e["value"] for e in template["container"]["env"]}
        assert outputs == {"image-url": env["IMAGE_URL_FILE"], "image-digest": env["IMAGE_DIGEST_FILE"]}
        assert template["container"]["securityContext"] == {"privileged": True}
        assert {"name": "containers", "mountPath": "/var/lib/containers"} in template["container"]["volumeMounts"]
        assert template["container"]["command"] == ["sh", "-c"]
        assert "export IMAGECTL_BUILD_ENGINE=buildah" in template["container"]["args"][0]
        assert env["PROFILE"] == "{{inputs.parameters.profile}}"
        assert env["REGISTRY_URL"] == "{{workflow.parameters.registry-url}}"
    build = templates["imagectl-build"]["container"]["args"][0]
    assert 'imagectl build "$PROFILE" --platform "$PLATFORM" --push' in build
    promote = templates["imagectl-promote"]
    assert "outputs" not in promote and "securityContext" not in promote["container"]


def test_each_profile_is_built_per_platform(run_cli, shipped_matrix):
    r = run_cli("matrix", "--format", "argo", "--framework", "jax")
    assert r.code == 0, r.err
    document = workflow(r.out)
    profiles = list_profiles(shipped_matrix, "jax")
    assert [(b["profile"], b["platform"]) for b in rows(document, "builds")] == [
        (p.name, pl) for p in profiles for pl in p.platforms]
    assert {i["platforms"] for i in rows(document, "indexes")} == {BOTH}


def test_no_profile_is_empty_rows():
    document = workflow(argo_workflow([]))
    assert rows(document, "builds") == [] and rows(document, "indexes") == []  # Argo skips a step of no items
