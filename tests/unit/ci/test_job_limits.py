"""No generated matrix exceeds its CI system's job limit, at any profile count and any ``--max-jobs``: the
GitHub chunks and the matrix over them, every GitLab ``parallel:matrix`` job and every Tekton PipelineTask's
``matrix``, counted from the output (parsed, not from the generator's own arithmetic); the profiles come through
in order, each once.  Profiles
are the first N of a team matrix of 1,100 read by the real loader."""

from __future__ import annotations

import json

import pytest
import yaml

from imagectl.ci.outputs import GITHUB_MAX_JOBS, GITLAB_MAX_JOBS, MAX_JOBS, github_matrix, gitlab_pipeline
from imagectl.ci.tekton import TEKTON_MAX_COMBINATIONS, tekton_pipeline
from imagectl.errors import InputError
from imagectl.matrix.load import load_matrix
from imagectl.matrix.names import list_profiles
from tests.unit.ci.schemas import github_jobs, gitlab_jobs
from tests.unit.ci.team_matrix import write_team_matrix

COUNTS = (0, 1, 2, 3, 4, 5, 9, 10, 199, 200, 201, 255, 256, 257, 400, 401, 450, 511, 512, 513, 696, 1000, 1100)
LIMITS = (None, 1, 2, 3, 7, 100, 199, 200, 255, 256)
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it: thousands of jobs to read


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    root = write_team_matrix(tmp_path_factory.mktemp("team"), 1100)
    found = list_profiles(load_matrix([root]))
    assert len(found) == 1100
    return found


def test_the_documented_limits():
    assert MAX_JOBS == {"github": GITHUB_MAX_JOBS, "gitlab": GITLAB_MAX_JOBS, "tekton": TEKTON_MAX_COMBINATIONS} == {
        "github": 256, "gitlab": 200, "tekton": 256}


@pytest.mark.parametrize("limit", LIMITS)
def test_github_matrices_stay_within_the_limit(profiles, limit):
    most = GITHUB_MAX_JOBS if limit is None else limit
    for count in COUNTS:
        chosen = profiles[:count]
        if count > most * most:  # more chunks than one matrix can run: refused, never an oversized matrix
            with pytest.raises(InputError, match=f"{count} profiles need"):
                github_matrix(chosen, **({} if limit is None else {"max_jobs": limit}))
            continue
        text = github_matrix(chosen, **({} if limit is None else {"max_jobs": limit}))
        chunks = json.loads(text)
        assert github_jobs(chunks) <= most, (count, limit)
        assert all(1 <= github_jobs(c["profiles"]) <= most for c in chunks["include"]), (count, limit)
        names = [e["profile"] for c in chunks["include"] for e in c["profiles"]["include"]]
        assert names == [p.name for p in chosen], (count, limit)


@pytest.mark.parametrize("limit", LIMITS)
def test_gitlab_jobs_stay_within_the_limit(profiles, limit):
    most = GITLAB_MAX_JOBS if limit is None else limit
    for count in COUNTS:
        chosen = profiles[:count]
        document = yaml.load(gitlab_pipeline(chosen, **({} if limit is None else {"max_jobs": limit})), LOADER)
        jobs = {name: job for name, job in document.items() if isinstance(job, dict) and "stage" in job}
        assert all(gitlab_jobs(job) <= most for job in jobs.values()), (count, limit)
        for prefix in ("imagectl-build", "imagectl-promote"):
            names = [p for name, job in jobs.items() if name.startswith(prefix)
                     for p in job["parallel"]["matrix"][0]["PROFILE"]]
            assert names == [p.name for p in chosen], (count, limit, prefix)
        if count == 0:
            assert list(jobs) == ["imagectl-nothing-to-build"]


# Tekton's output repeats each PipelineTask's params: a limit of 1 or 2 over 1,100 profiles is 30 MB of YAML to read
@pytest.mark.parametrize("limit", (None, 7, 100, 255, 256))
def test_tekton_matrices_stay_within_the_limit(profiles, limit):
    most = TEKTON_MAX_COMBINATIONS if limit is None else limit
    for count in COUNTS:
        chosen = profiles[:count]
        text = tekton_pipeline(chosen, **({} if limit is None else {"max_jobs": limit}))
        tasks = list(yaml.load_all(text, LOADER))[-1]["spec"]["tasks"]
        if count == 0:
            assert [t["name"] for t in tasks] == ["nothing-to-build"]
            continue
        assert all(1 <= len(t["matrix"]["include"]) <= most for t in tasks), (count, limit)
        for kind in ("build", "index", "promote"):
            names = [p["value"] for t in tasks if t["name"].split("-")[0] == kind for e in t["matrix"]["include"]
                     for p in e["params"] if p["name"] == "profile"]
            assert names == [p.name for p in chosen], (count, limit, kind)
