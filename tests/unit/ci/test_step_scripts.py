"""The shell of the Tekton and Argo steps (imagectl/ci/steps/*.sh), run by ``sh`` as a pod runs it: it checks out
the repository (a real git repository here), sets imagectl's engine and registry from the environment, passes
every value as one argument whatever it holds, and writes IMAGE_URL and IMAGE_DIGEST from the document imagectl
wrote.  ``imagectl`` itself is a stand-in on PATH that records how it was called and writes the document the real
command writes (made by build_document / IndexResult.as_dict): what is tested is the shell between them; the real
commands are tested on their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from imagectl.ci.kube_steps import STEP_KINDS, step_script
from imagectl.cli.build_views import build_document
from imagectl.images.builder import BuildResult
from imagectl.images.index_assembly import IndexResult

REPO = Path(__file__).resolve().parents[3]
DIGEST = "sha256:" + "cd" * 32
HOSTILE = ['x"; touch pwned; echo "', "$(touch pwned)", "`touch pwned`", "a b", "-v", "*"]

STAND_IN = """#!{python}
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
env = {{k: os.environ.get(k) for k in ("IMAGECTL_BUILD_ENGINE", "IMAGECTL_REGISTRY_URL",
                                     "IMAGECTL_REGISTRY_NAMESPACE", "DOCKER_CONFIG")}}
Path(os.environ["CALLS"]).open("a").write(json.dumps({{"args": args, "env": env, "cwd": os.getcwd(),
                                                      "files": sorted(os.listdir("."))}}) + "\\n")
if os.environ.get("FAIL"):
    sys.exit(1)
documents = json.loads(os.environ["DOCUMENTS"])
if args[0] == "build":
    Path(args[args.index("--metadata-file") + 1]).write_text(json.dumps(documents["build"]))
elif args[0] == "index":
    print(json.dumps(documents["index"]))
"""


@pytest.fixture
def pod(tmp_path):
    """``pod(kind, **env)``: run the ``kind`` step's script with ``env`` and a stand-in ``imagectl``; returns
    (the finished process, the stand-in's calls, the result files' contents)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "imagectl").write_text(STAND_IN.format(python=sys.executable), encoding="utf-8")
    (bin_dir / "imagectl").chmod(0o755)
    (bin_dir / "python3").symlink_to(sys.executable)  # the interpreter with imagectl, as the step's image has
    build = build_document([BuildResult("p", "built", "1.0-k0123", DIGEST, repository="registry.example.com/t/p")])
    index = IndexResult("p", "registry.example.com/t/p", "1.0-k0123-index", DIGEST, "assembled").as_dict()

    def run(kind, **env):
        calls, work = tmp_path / "calls.jsonl", tmp_path / "work"
        for old in (calls, tmp_path / "IMAGE_URL", tmp_path / "IMAGE_DIGEST"):
            old.unlink(missing_ok=True)
        work.mkdir(exist_ok=True)
        full = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "TMPDIR": str(work),
                "PYTHONPATH": str(REPO), "CALLS": str(calls), "DOCUMENTS": json.dumps({"build": build, "index": index}),
                "SOURCE_DIR": str(tmp_path / "source"), "IMAGE_URL_FILE": str(tmp_path / "IMAGE_URL"),
                "IMAGE_DIGEST_FILE": str(tmp_path / "IMAGE_DIGEST"), "GIT_URL": "", "GIT_REVISION": "HEAD",
                "REGISTRY_URL": "", "REGISTRY_NAMESPACE": "", "DOCKER_CONFIG_DIR": "", **env}
        done = subprocess.run(["sh", "-c", step_script(kind)], env=full, cwd=work, capture_output=True, text=True,
                              timeout=120)
        logged = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
        results = {name: (tmp_path / name).read_text() for name in ("IMAGE_URL", "IMAGE_DIGEST")
                   if (tmp_path / name).exists()}
        return done, logged, results

    return run


@pytest.fixture
def repository(tmp_path):
    """A git repository with two commits (matrices/team.toml changes); returns (its path, the first commit)."""
    repo = tmp_path / "repo"
    (repo / "matrices").mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "matrices" / "team.toml").write_text("first\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    first = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (repo / "matrices" / "team.toml").write_text("second\n")
    subprocess.run([*git, "commit", "-q", "-am", "second"], check=True)
    return repo, first


@pytest.mark.parametrize("kind", STEP_KINDS)
def test_each_script_is_valid_shell_with_no_substitution_marks(kind):
    script = step_script(kind)
    assert script.startswith("#!/bin/sh\n") and "set -eu" in script
    assert "$(" not in script and "{{" not in script  # Tekton, Argo would substitute into the shell
    assert subprocess.run(["sh", "-n", "-c", script], capture_output=True, timeout=30).returncode == 0


def test_build_passes_values_as_single_arguments_and_writes_the_results(pod, tmp_path):
    for value in HOSTILE:
        done, calls, results = pod("build", PROFILE=value, PLATFORM=value)
        assert done.returncode == 0, done.stderr
        (call,) = calls
        metadata = str(tmp_path / "work" / "imagectl-build.json")
        assert call["args"] == ["build", value, "--platform", value, "--push", "--progress", "plain",
                                "--metadata-file", metadata]
        assert results == {"IMAGE_URL": "registry.example.com/t/p:1.0-k0123", "IMAGE_DIGEST": DIGEST}
        assert not list(tmp_path.rglob("pwned"))


def test_the_engine_and_registry_come_from_the_environment(pod, tmp_path):
    done, calls, _ = pod("build", PROFILE="p", PLATFORM="linux/amd64")
    assert done.returncode == 0, done.stderr
    assert calls[0]["env"] == {"IMAGECTL_BUILD_ENGINE": "buildah", "IMAGECTL_REGISTRY_URL": None,
                               "IMAGECTL_REGISTRY_NAMESPACE": None, "DOCKER_CONFIG": None}  # empty: imagectl.toml's
    done, calls, _ = pod("build", PROFILE="p", PLATFORM="linux/amd64", REGISTRY_URL="registry.example.com:5000",
                         REGISTRY_NAMESPACE="team", DOCKER_CONFIG_DIR="/workspace/dockerconfig")
    assert calls[0]["env"] == {"IMAGECTL_BUILD_ENGINE": "buildah", "IMAGECTL_REGISTRY_URL": "registry.example.com:5000",
                               "IMAGECTL_REGISTRY_NAMESPACE": "team", "DOCKER_CONFIG": "/workspace/dockerconfig"}


def test_index_and_promote(pod):
    done, calls, results = pod("index", PROFILE="p", PLATFORMS="linux/amd64,linux/arm64")
    assert done.returncode == 0, done.stderr
    assert calls[0]["args"] == ["index", "p", "--platforms", "linux/amd64,linux/arm64", "--json"]
    assert results == {"IMAGE_URL": "registry.example.com/t/p:1.0-k0123-index", "IMAGE_DIGEST": DIGEST}
    done, calls, results = pod("promote", PROFILE="$(touch pwned)")
    assert done.returncode == 0 and calls[0]["args"] == ["promote", "$(touch pwned)", "--channel", "stable"]
    assert results == {}


def test_a_failed_command_fails_the_step_and_writes_no_result(pod):
    done, calls, results = pod("build", PROFILE="p", PLATFORM="linux/amd64", FAIL="1")
    assert done.returncode != 0 and len(calls) == 1 and results == {}


def test_the_repository_is_checked_out_at_the_revision(pod, repository, tmp_path):
    repo, first = repository
    done, calls, _ = pod("build", PROFILE="p", PLATFORM="linux/amd64", GIT_URL=str(repo), GIT_REVISION=first)
    assert done.returncode == 0, done.stderr
    assert calls[0]["cwd"] == str(tmp_path / "source") and "matrices" in calls[0]["files"]
    assert (tmp_path / "source" / "matrices" / "team.toml").read_text() == "first\n"


def test_a_revision_that_looks_like_an_option_is_not_one(pod, repository, tmp_path):
    repo, _ = repository
    done, calls, _ = pod("build", PROFILE="p", PLATFORM="linux/amd64", GIT_URL=str(repo),
                         GIT_REVISION=f"--upload-pack=touch {tmp_path}/pwned")
    assert done.returncode != 0 and calls == [] and not list(tmp_path.rglob("pwned"))


def test_without_a_repository_it_runs_in_an_empty_folder(pod, tmp_path):
    done, calls, _ = pod("promote", PROFILE="p")
    assert done.returncode == 0 and calls[0]["cwd"] == str(tmp_path / "source") and calls[0]["files"] == []
