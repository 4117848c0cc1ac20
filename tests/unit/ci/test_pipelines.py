"""The example pipelines (.github/workflows/imagectl.yml and the imagectl-build.yml it calls per chunk,
.gitlab-ci.yml) parse and have the jobs the docs describe: validate with JUnit, a matrix of changed profiles, a
fan-out build, a promote after success.  Their schemas are checked in test_schemas.py.
Needs PyYAML, which imagectl does not depend on: the test extra installs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from imagectl.ci.outputs import GITHUB_EMPTY, gitlab_pipeline
from imagectl.matrix.names import list_profiles

REPO = Path(__file__).resolve().parents[3]


def load(path: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / path).read_text(encoding="utf-8"))


def runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in job.get("steps", []))


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    return load(".github/workflows/imagectl.yml")


@pytest.fixture(scope="module")
def called() -> dict[str, Any]:
    return load(".github/workflows/imagectl-build.yml")


@pytest.fixture(scope="module")
def gitlab() -> dict[str, Any]:
    return load(".gitlab-ci.yml")


def test_github_triggers_and_jobs(workflow):
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"pull_request", "push", "schedule"} <= set(triggers)
    assert {"validate", "verify", "matrix", "build", "promote"} <= set(workflow["jobs"])
    assert workflow["permissions"] == {"contents": "read"}


def test_github_validate_and_verify_write_junit(workflow):
    assert "imagectl validate --junit" in runs(workflow["jobs"]["validate"])
    verify = workflow["jobs"]["verify"]
    assert "imagectl matrix verify --junit" in runs(verify) and "imagectl matrix sync --output" in runs(verify)
    assert "schedule" in verify["if"]


def test_github_matrix_job_computes_changed_profiles(workflow):
    job = workflow["jobs"]["matrix"]
    assert job["needs"] == "validate"
    assert set(job["outputs"]) == {"matrix", "any", "python-version", "install"}
    assert job["outputs"]["python-version"] == "${{ env.PYTHON_VERSION }}"
    assert job["outputs"]["install"] == "${{ env.IMAGECTL_INSTALL }}"
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0
    script = runs(job)
    assert "imagectl matrix --format github --changed-since" in script
    assert f"'{GITHUB_EMPTY}'" in script  # the exact string imagectl prints for no profile


CHUNKS = "${{ fromJSON(needs.matrix.outputs.matrix) }}"


def test_github_build_and_promote_call_the_chunk_workflow_per_chunk(workflow):
    build, promote = workflow["jobs"]["build"], workflow["jobs"]["promote"]
    assert build["needs"] == "matrix" and "needs.matrix.outputs.any == 'true'" in build["if"]
    assert "build" in promote["needs"] and "refs/heads/main" in promote["if"]
    assert "needs.matrix.outputs.any == 'true'" in promote["if"]
    for job, task in ((build, "build"), (promote, "promote")):
        assert job["uses"] == "./.github/workflows/imagectl-build.yml" and job["secrets"] == "inherit"
        assert job["strategy"]["matrix"] == CHUNKS and job["strategy"]["fail-fast"] is False
        assert job["with"]["task"] == task and job["with"]["profiles"] == "${{ toJSON(matrix.profiles) }}"
        assert job["with"]["python-version"] == "${{ needs.matrix.outputs.python-version }}"
        assert job["with"]["install"] == "${{ needs.matrix.outputs.install }}"
        assert job["with"]["registry-url"] == "${{ vars.IMAGECTL_REGISTRY_URL }}"
        assert "steps" not in job and "runs-on" not in job


def test_github_chunk_workflow_builds_and_promotes_each_profile(workflow, called):
    triggers = called.get("on", called.get(True))
    assert list(triggers) == ["workflow_call"]
    inputs = triggers["workflow_call"]["inputs"]
    passed = set(workflow["jobs"]["build"]["with"]) | set(workflow["jobs"]["promote"]["with"])
    assert passed == set(inputs)  # every input the caller passes is declared, every required one passed
    assert {name for name, spec in inputs.items() if spec.get("required")} <= set(workflow["jobs"]["build"]["with"])
    build, index, promote = called["jobs"]["build"], called["jobs"]["index"], called["jobs"]["promote"]
    assert build["if"] == "inputs.task == 'build'" and promote["if"] == "inputs.task == 'promote'"
    # the index job: once every platform's build of the chunk succeeded, on a push only
    assert index["needs"] == "build" and index["if"] == "inputs.task == 'build' && github.event_name == 'push'"
    matrices = {"build": "profiles", "index": "indexes", "promote": "indexes"}  # one promote per profile
    for name, job in (("build", build), ("index", index), ("promote", promote)):
        assert job["strategy"]["matrix"] == f"${{{{ fromJSON(inputs.{matrices[name]}) }}}}"
        assert job["strategy"]["fail-fast"] is False
        assert next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python"))["with"] == {
            "python-version": "${{ inputs.python-version }}"}
        login = next(s for s in job["steps"] if s.get("uses", "").startswith("docker/login-action"))
        assert login["with"]["password"] == "${{ secrets.REGISTRY_PASSWORD }}"
    step = next(s for s in build["steps"] if "imagectl build" in s.get("run", ""))
    assert step["env"]["PROFILE"] == "${{ matrix.profile }}" and step["env"]["PLATFORM"] == "${{ matrix.platform }}"
    assert '"$PROFILE" --platform "$PLATFORM" --push' in step["run"]
    qemu = next(s for s in build["steps"] if s.get("uses", "").startswith("docker/setup-qemu-action"))
    assert qemu["if"] == "matrix.platform != 'linux/amd64'" and qemu["with"]["platforms"] == "${{ matrix.platform }}"
    assert 'imagectl index "$PROFILE" --platforms "$PLATFORMS"' in runs(index)
    assert promote["environment"] == "stable"
    assert 'imagectl promote "$PROFILE" --channel stable' in runs(promote)


def test_gitlab_stages_and_parent_jobs(gitlab):
    assert gitlab["stages"] == ["validate", "plan", "build", "index", "promote"]
    validate = gitlab["validate"]
    assert "imagectl validate --junit validate.xml" in validate["script"]
    assert validate["artifacts"]["reports"]["junit"] == "validate.xml"
    assert "imagectl matrix verify --junit verify.xml" in gitlab["verify"]["script"]
    plan = gitlab["plan"]
    assert plan["variables"]["GIT_DEPTH"] == "0" and plan["artifacts"]["paths"] == ["build-pipeline.yml"]
    assert "imagectl matrix --format gitlab --changed-since" in "\n".join(plan["script"])
    build = gitlab["build"]
    assert build["trigger"]["include"] == [{"artifact": "build-pipeline.yml", "job": "plan"}]
    assert build["trigger"]["strategy"] == "depend" and build["needs"] == ["plan"]


def test_gitlab_templates_build_and_promote(gitlab):
    assert 'imagectl build "$PROFILE" --platform "$PLATFORM" --push' in gitlab[".imagectl-build"]["script"][1]
    assert "tonistiigi/binfmt --install" in gitlab[".imagectl-build"]["script"][0]  # QEMU for linux/arm64
    assert gitlab[".imagectl-index"]["script"] == ['imagectl index "$PROFILE" --platforms "$PLATFORMS"']
    assert gitlab[".imagectl-index"]["rules"] == [{"if": '$IMAGECTL_PUBLISH == "true"'}]
    assert gitlab[".imagectl-promote"]["script"] == ['imagectl promote "$PROFILE" --channel stable']
    assert gitlab[".imagectl-promote"]["rules"] == [{"if": '$IMAGECTL_PUBLISH == "true"'}]
    assert "CI_REGISTRY_PASSWORD" in "\n".join(gitlab[".imagectl-registry"]["before_script"])


def _rules(document: dict[str, Any], job: dict[str, Any]) -> list[dict[str, Any]]:
    """A job's rules, its own or those of the first template it extends that has some."""
    if "rules" in job:
        return job["rules"]
    parents = job.get("extends", [])
    for parent in [parents] if isinstance(parents, str) else parents:
        rules = _rules(document, document[parent])
        if rules:
            return rules
    return []


NOT_IN_CHILD = {"if": '$CI_PIPELINE_SOURCE == "parent_pipeline"', "when": "never"}


def test_generated_child_pipeline_fits_the_example(gitlab, matrix):
    child = yaml.safe_load(gitlab_pipeline(list_profiles(matrix)))
    assert child["include"] == [{"local": ".gitlab-ci.yml"}] and "stages" not in child
    for name in ("imagectl-build", "imagectl-index", "imagectl-promote"):
        assert child[name]["extends"] in gitlab and child[name]["stage"] in gitlab["stages"]
        assert NOT_IN_CHILD not in _rules(gitlab, gitlab[child[name]["extends"]])
    # the child pipeline includes .gitlab-ci.yml: each of its visible jobs must stay out of the child
    for name, job in gitlab.items():
        if isinstance(job, dict) and "stage" in job and not name.startswith("."):
            rules = _rules(gitlab, job)
            assert rules and (rules[0] == NOT_IN_CHILD or all("schedule" in r.get("if", "") for r in rules)), name
    assert {"if": '$CI_PIPELINE_SOURCE == "parent_pipeline"'} in gitlab["workflow"]["rules"]


def test_gitlab_jobs_that_need_each_other_run_together(gitlab):
    """A job whose `needs` names a job that its rules let be absent makes GitLab refuse the pipeline."""
    for source in ("schedule", "merge_request_event", "push"):
        for name, job in gitlab.items():
            if not isinstance(job, dict) or name.startswith(".") or not job.get("needs"):
                continue
            if _runs_on(gitlab, job, source):
                for needed in job["needs"]:
                    assert _runs_on(gitlab, gitlab[needed], source), f"{name} needs {needed} on {source}"


def _runs_on(document: dict[str, Any], job: dict[str, Any], source: str) -> bool:
    """Whether the first matching rule lets ``job`` run for CI_PIPELINE_SOURCE ``source`` on the default
    branch (a rule on another variable counts as matching)."""
    for rule in _rules(document, job):
        condition = rule.get("if", "")
        if "CI_PIPELINE_SOURCE" in condition and f'"{source}"' not in condition:
            continue
        return rule.get("when") != "never"
    return not _rules(document, job)
