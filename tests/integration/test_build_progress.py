"""What a build shows while it runs, on a CI log and on a terminal, and what a pipeline reads from it (issue 12):
real engine, real registry, stand-in base and wheels."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.integration.conftest import write_config

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11
STAMP = re.compile(r"^\[\d\d:\d\d\] ")


def test_a_ci_log_gets_timestamped_lines_and_never_a_carriage_return(run_cli, tmp_path, mirror, wheel_index,
                                                                       registry, docker_config):
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace="plain")
    built = run_cli("build", PROFILE, "--force")  # stderr is not a terminal here: --progress auto is plain
    assert built.code == 0, built.err[-3000:]
    assert "\r" not in built.err + built.out
    stamped = [line for line in built.err.splitlines() if STAMP.match(line)]
    assert len(stamped) >= 10 and all(STAMP.match(line) for line in built.err.splitlines()
                                      if not line.startswith(("note:", "imagectl:")))
    text = "\n".join(stamped)
    for phase in ("base image ", "lock", "building ", "checking ", "check: ok", "pushing "):
        assert phase in text, phase
    # the push (by digest, blob by blob, as on buildah: issue 36 item 1) says what it sent and what was there
    assert re.search(r"push: [0-9.]+ [kMG]?B uploaded, [0-9.]+ [kMG]?B mounted from other repositories \(\d+ blobs?\), "
                     r"[0-9.]+ [kMG]?B already there, of [0-9.]+ [kMG]?B", text), text[-3000:]


def test_build_json_is_one_document_with_the_digest_the_registry_serves(run_cli, tmp_path, mirror, wheel_index,
                                                                        registry, docker_config):
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace="pipeline")
    built = run_cli("build", PROFILE, "--json", "--metadata-file", "meta.json")
    assert built.code == 0, built.err[-3000:]
    document = json.loads(built.out)
    assert json.loads((tmp_path / "meta.json").read_text()) == document
    result = document["results"][0]
    assert result["status"] == "built" and len(result["digest"]) == 71 and result["digest"].startswith("sha256:")
    assert result["lock"]["origin"] == "build-time" and len(result["lock"]["sha256"]) == 64
    assert set(result["phases"]) >= {"resolve", "lock", "render", "build", "check", "tag", "push"}
    served = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw",
                             f"docker://{registry.host}/pipeline/{PROFILE}:{result['tag']}"],
                            capture_output=True, timeout=120)
    assert served.returncode == 0, served.stderr
    import hashlib

    assert "sha256:" + hashlib.sha256(served.stdout).hexdigest() == result["digest"]

    from imagectl.registry import RegistryClient

    client = RegistryClient(registry.host, insecure=True)
    tags_before = client.list_tags(f"pipeline/{PROFILE}")

    def keyed_images(key: str) -> set[str]:
        listed = subprocess.run(["docker", "images", "-q", "--no-trunc", "--filter", f"label=imagectl.build-key={key}"],
                                capture_output=True, text=True)
        return set(listed.stdout.split())

    key = json.loads(run_cli("build", PROFILE, "--plan", "--json").out)["plan"][0]["key"]
    before = keyed_images(key)
    assert result["image_id"] in before
    plan = run_cli("build", PROFILE, "--plan", "--json", "--force")
    assert plan.code == 0, plan.err
    entry = json.loads(plan.out)["plan"][0]
    assert entry["action"] == "build" and entry["key"] == key
    assert keyed_images(key) == before  # --plan built nothing (other tests may have built the same context)
    assert client.list_tags(f"pipeline/{PROFILE}") == tags_before  # and pushed nothing


@pytest.mark.skipif(shutil.which("script") is None, reason="script (util-linux) is not installed")
def test_on_a_terminal_the_build_is_a_live_display(tmp_path, mirror, wheel_index, registry, docker_config):
    """Under a pseudo-terminal (util-linux ``script``) ``--progress auto`` redraws one line per profile."""
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace="tty")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_") or k.startswith("IMAGECTL_TEST_")}
    command = f"{sys.executable} -m imagectl build {PROFILE} --force"
    done = subprocess.run(["script", "-qfec", command, "/dev/null"], cwd=tmp_path, env={**env, "COLUMNS": "120"},
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    screen = done.stdout
    assert "\x1b[2K" in screen and "\x1b[1F" in screen  # erase line, back to the row: redrawn in place
    rows = [part for part in screen.split("\x1b[2K") if part.startswith(f"{PROFILE} [")]
    assert len(rows) > 5 and any("building" in row or "Step" in row for row in rows)
    assert not any(STAMP.match(line) for line in screen.splitlines())  # not the plain log


def pip_size_text(size: int) -> str:
    """The size as pip prints it after ``Downloading`` (pip's ``format_size``: 0.1 MB, 1 kB, 0.1 kB, bytes)."""
    if size > 1000 * 1000:
        return f"{size / 1000 / 1000:.1f} MB"
    if size > 10 * 1000:
        return f"{int(size / 1000)} kB"
    return f"{size / 1000:.1f} kB" if size > 1000 else f"{size} bytes"


def served_wheels(index_url: str) -> dict[tuple[str, str], int]:
    """(project, version) -> bytes of every wheel the stand-in index serves (its PEP 691 JSON pages)."""
    import urllib.request

    def page(url: str) -> dict:
        request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)

    served = {}
    for project in page(f"{index_url}/")["projects"]:
        for entry in page(f"{index_url}/{project['name']}/")["files"]:
            version = entry["filename"].split("-")[1]
            served[(project["name"], version)] = entry["size"]
    return served


def test_pip_steps_end_with_a_summary_and_json_names_each_download(run_cli, tmp_path, mirror, wheel_index, registry,
                                                                    docker_config):
    """``--no-cache``: pip really runs (a cached layer prints nothing of pip's)."""
    from imagectl.progress.piplog import parse_pip_size

    write_config(tmp_path, mirror=mirror, index_url=wheel_index, registry=registry, namespace="downloads")
    built = run_cli("build", PROFILE, "--force", "--no-cache", "--json")
    assert built.code == 0, built.err[-3000:]
    log = built.err.splitlines()
    summaries = [line for line in log if re.match(r"^\[\d\d:\d\d\] pip: \d+ packages?, ", line)]
    installed = [i for i, line in enumerate(log) if re.match(r"^\[\d\d:\d\d\] Successfully installed ", line)]
    assert summaries and len(summaries) == len(installed), "\n".join(log)
    assert all(log[i + 1] in summaries for i in installed)  # each right after pip's last line
    summary = re.compile(r"pip: \d+ packages?, [0-9.]+ [kMG]?B downloaded in \d+ s, installed in \d+ s: "
                         r"[a-z0-9-]+ [0-9.]+ [kMG]?B \d+ s")
    assert all(summary.search(line) for line in summaries), summaries

    downloads = json.loads(built.out)["results"][0]["downloads"]
    served = served_wheels(wheel_index)
    assert {d["name"] for d in downloads} >= {"torch", "nvidia-cudnn-cu12", "nvidia-nccl-cu12"}
    for d in downloads:
        assert set(d) == {"name", "version", "bytes", "seconds"} and d["seconds"] >= 0
        size = served[(d["name"], d["version"])]  # a stand-in wheel, at the version the lock pins
        assert d["bytes"] == parse_pip_size(pip_size_text(size)), (d, size)  # its real size, as pip rounds it
    assert len(downloads) == len({(d["name"], d["version"]) for d in downloads})  # each wheel once
    assert sum(int(re.search(r"pip: (\d+) package", line)[1]) for line in summaries) == len(downloads)
