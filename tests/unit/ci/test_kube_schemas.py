"""What ``imagectl matrix --format tekton|argo`` generates for 1, 256, 257 and 450 profiles (a team's matrix read
by the real loader, through the CLI) against the upstream schemas kept in tests/fixtures/schemas (Tekton's v1
Task and Pipeline CRDs, Argo's api/jsonschema/schema.json; SOURCE names their commits) and the rules of Tekton's
webhook and Argo's validator that a schema cannot state (kube_schemas.py); and that those checks fail where
they should."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.unit.ci.kube_schemas import (
    argo_problems,
    argo_schema_problems,
    schema_errors,
    tekton_problems,
    tekton_schema_problems,
)
from tests.unit.ci.team_matrix import write_team_matrix

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@pytest.fixture
def team(tmp_path, use_matrix):
    def install(count: int) -> None:
        use_matrix(write_team_matrix(tmp_path / f"team-{count}", count))

    return install


def test_the_kept_schemas_are_valid_json_schemas():
    assert schema_errors() == []


@pytest.mark.parametrize(("count", "sizes"), [(1, [1]), (256, [256]), (257, [256, 1]), (450, [256, 194])])
def test_generated_tekton_is_valid_and_within_the_matrix_limit(run_cli, team, count, sizes):
    team(count)
    r = run_cli("matrix", "--format", "tekton")
    assert r.code == 0, r.err
    docs = list(yaml.load_all(r.out, LOADER))
    assert tekton_schema_problems(docs) == [] and tekton_problems(docs) == []
    tasks = docs[-1]["spec"]["tasks"]
    for kind in ("build", "index", "promote"):
        assert [len(t["matrix"]["include"]) for t in tasks if t["name"].split("-")[0] == kind] == sizes
    names = [p["value"] for t in tasks if t["name"].startswith("build") for e in t["matrix"]["include"]
             for p in e["params"] if p["name"] == "profile"]
    assert len(names) == len(set(names)) == count


@pytest.mark.parametrize("count", [1, 450])
def test_generated_argo_is_valid(run_cli, team, count):
    team(count)
    r = run_cli("matrix", "--format", "argo")
    assert r.code == 0, r.err
    document = yaml.load(r.out, LOADER)
    assert argo_schema_problems(document, strict=True) == [] and argo_problems(document) == []
    (builds,) = [p for p in document["spec"]["arguments"]["parameters"] if p["name"] == "builds"]
    assert len(json.loads(builds["value"])) == count


@pytest.mark.parametrize("fmt", ["tekton", "argo"])
def test_the_shipped_matrix_is_valid(run_cli, fmt):
    """Every shipped profile: more than one chunk of build combinations, profiles with two platforms."""
    r = run_cli("matrix", "--format", fmt)
    assert r.code == 0, r.err
    docs = list(yaml.load_all(r.out, LOADER))
    if fmt == "tekton":
        assert tekton_schema_problems(docs) == [] and tekton_problems(docs) == []
        assert len([t for t in docs[-1]["spec"]["tasks"] if t["name"].startswith("build")]) > 1
    else:
        assert argo_schema_problems(docs[0], strict=True) == [] and argo_problems(docs[0]) == []
    assert "linux/arm64" in r.out


# --- the checks can fail --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tekton_docs(tmp_path_factory):
    from imagectl.ci.tekton import tekton_pipeline
    from imagectl.matrix.load import load_matrix
    from imagectl.matrix.names import list_profiles

    profiles = list_profiles(load_matrix([write_team_matrix(tmp_path_factory.mktemp("team"), 3)]))
    return list(yaml.safe_load_all(tekton_pipeline(profiles)))


def _changed(docs, change):
    docs = copy.deepcopy(docs)
    change({d["metadata"]["name"]: d for d in docs})
    return docs


@pytest.mark.parametrize(("change", "found"), [
    (lambda d: d["imagectl"]["spec"]["tasks"][1].update(runafter=["build"]), "Additional properties"),
    (lambda d: d["imagectl-build"]["spec"]["steps"][0].update(scripts="x"), "Additional properties"),
    (lambda d: d["imagectl-build"]["spec"]["workspaces"][0].update(optional="yes"), "is not of type 'boolean'"),
    (lambda d: d["imagectl"]["spec"].update(tasks="build"), "is not of type 'array'"),
    (lambda d: d["imagectl-build"]["spec"]["volumes"][0].update(emptyDri={}), "volumes[0]"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0]["params"][0].update(value=["a"]), "is not a string"),
])
def test_tekton_schemas_refuse_what_the_api_server_would(tekton_docs, change, found):
    assert tekton_schema_problems(tekton_docs) == []
    problems = tekton_schema_problems(_changed(tekton_docs, change))
    assert problems and found in "\n".join(problems), problems


@pytest.mark.parametrize(("change", "found"), [
    (lambda d: d["imagectl"]["spec"]["tasks"][0]["matrix"]["include"].extend(
        d["imagectl"]["spec"]["tasks"][0]["matrix"]["include"] * 90), "combinations, above the limit 256"),
    (lambda d: d["imagectl"]["spec"]["tasks"][1].update(runAfter=["built"]), "runAfter built names no task"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0].update(runAfter=["index"]), "a cycle"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0].update(name="Build"), "not a DNS-1123 label"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0]["taskRef"].update(name="imagectl-built"), "names no Task"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0]["matrix"]["include"][0]["params"].pop(), "required params"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0]["params"][0].update(value="$(params.imag)"), "not a Pipeline param"),
    (lambda d: d["imagectl-build"]["spec"]["steps"][0]["env"][0].update(value="$(params.profil)"), "names nothing"),
    (lambda d: d["imagectl-build"]["spec"]["steps"][0].update(script="echo $(params.profile)"), "a $( in its script"),
    (lambda d: d["imagectl"]["spec"]["tasks"][0].update(displayName="build $(params.profil)"), "displayName's"),
])
def test_tekton_rules_refuse_what_the_webhook_would(tekton_docs, change, found):
    assert tekton_problems(tekton_docs) == []
    problems = tekton_problems(_changed(tekton_docs, change))
    assert problems and found in "\n".join(problems), problems


@pytest.fixture(scope="module")
def argo_doc():
    from imagectl.ci.argo import argo_workflow
    from tests.conftest import FIXTURES
    from imagectl.matrix.load import load_matrix
    from imagectl.matrix.names import list_profiles

    return yaml.safe_load(argo_workflow(list_profiles(load_matrix([FIXTURES / "matrices"]))))


def test_argo_strict_schema_refuses_a_misspelt_field_the_published_one_lets_through(argo_doc):
    changed = copy.deepcopy(argo_doc)
    changed["spec"]["templates"][1]["container"]["imagePullPolicyy"] = "Always"
    assert argo_schema_problems(changed, strict=False) == []  # the published schema allows any extra field
    assert "imagePullPolicyy" in "\n".join(argo_schema_problems(changed, strict=True))
    changed["spec"]["parallelism"] = "8"
    assert "is not of type 'integer'" in "\n".join(argo_schema_problems(changed, strict=False))


@pytest.mark.parametrize(("change", "found"), [
    (lambda s: s["templates"][0]["steps"][0][0].update(template="imagectl-built"), "does not exist"),
    (lambda s: s["templates"][0]["steps"][0][0]["arguments"]["parameters"].pop(), "the template takes"),
    (lambda s: s["templates"][0]["steps"][0][0]["arguments"]["parameters"][0].update(value="{{item.profil}}"),
     "a row has no profil"),
    (lambda s: s["templates"][0]["steps"][0][0].update(withParam="{{workflow.parameters.build}}"), "withParam"),
    (lambda s: s["templates"][1]["container"]["env"][0].update(value="{{inputs.parameters.profil}}"),
     "is not in scope"),
    (lambda s: s["templates"][1]["container"]["volumeMounts"][0].update(name="registri"), "names no volume"),
    (lambda s: s["templates"][1]["container"]["args"].append("echo {{inputs.parameters.profile}}"), "a {{ in"),
    (lambda s: s["templates"][0]["outputs"]["parameters"][0]["valueFrom"].update(
        parameter="{{steps.promote.outputs.parameters}}"), "refers to no earlier step"),
    (lambda s: s.update(parallelism=0), "parallelism"),
])
def test_argo_rules_refuse_what_the_validator_would(argo_doc, change, found):
    assert argo_problems(argo_doc) == []
    changed = copy.deepcopy(argo_doc)
    change(changed["spec"])
    problems = argo_problems(changed)
    assert problems and found in "\n".join(problems), problems
