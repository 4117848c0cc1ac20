"""``python3 -m imagectl.ci.image_results``: the results IMAGE_URL and IMAGE_DIGEST (Tekton Chains' names; Argo's
output parameters) of the image a step pushed, from the documents ``imagectl build --metadata-file`` and
``imagectl index --json`` write (made here by the same code: build_document, IndexResult.as_dict)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from imagectl.ci.image_results import image_result, main, write_results
from imagectl.cli.build_views import build_document
from imagectl.errors import OperationError
from imagectl.images.builder import BuildResult, PlatformResult
from imagectl.images.index_assembly import IndexResult

DIGEST = "sha256:" + "ab" * 32
REPOSITORY = "registry.example.com:5000/team/torch-2.3-cu121"


def built(status="built", digest=DIGEST, repository=REPOSITORY, tag="2.3.1-cu121-k0123456789"):
    result = BuildResult("torch-2.3-cu121", status, tag, digest, repository=repository,
                         platforms=[PlatformResult("linux/amd64", digest)])
    return build_document([result])


def test_a_pushed_build_gives_its_tag_and_digest():
    assert image_result(built()) == (f"{REPOSITORY}:2.3.1-cu121-k0123456789", DIGEST)
    assert image_result(built("reused")) == (f"{REPOSITORY}:2.3.1-cu121-k0123456789", DIGEST)


def test_an_index_gives_the_index_digest():
    index = IndexResult("torch-2.3-cu121", REPOSITORY, "2.3.1-cu121-k0123456789", DIGEST, "assembled").as_dict()
    assert image_result(index) == (f"{REPOSITORY}:2.3.1-cu121-k0123456789", DIGEST)


@pytest.mark.parametrize(("document", "message"), [
    (built("failed"), "build status 'failed'"),
    (built(digest="sha256:" + "ab" * 31), "is not a registry digest"),
    (built(digest="a1b2c3d4e5f6"), "was the image pushed"),  # an engine's image id: nothing pushed
    (built(digest="SHA256:" + "AB" * 32), "is not a registry digest"),
    (built(repository=""), "names no repository and tag"),
    (built(tag=""), "names no repository and tag"),
    (built(repository="registry.example.com/team/x y"), "invalid image reference"),
    (built(repository="user:secret@registry.example.com/x"), "carries no credentials"),
    ({"results": []}, "exactly one result"),
    ({"results": [built()["results"][0]] * 2}, "exactly one result"),
])
def test_what_names_no_pushed_image_is_refused(document, message):
    with pytest.raises(OperationError, match=message) as caught:
        image_result(document)
    assert "secret" not in str(caught.value)


def test_results_are_the_files_exact_bytes(tmp_path):
    source = tmp_path / "build.json"
    source.write_text(json.dumps(built()), encoding="utf-8")
    url, digest = tmp_path / "IMAGE_URL", tmp_path / "IMAGE_DIGEST"
    assert main([str(source), str(url), str(digest)]) == 0
    assert url.read_bytes() == f"{REPOSITORY}:2.3.1-cu121-k0123456789".encode()  # no line break: Chains reads it
    assert digest.read_bytes() == DIGEST.encode()


@pytest.mark.parametrize("content", ["", "{", "[]", '"x"', "\xff"])
def test_an_unreadable_document_is_one_line_exit_1(tmp_path, capsys, content):
    source = tmp_path / "build.json"
    source.write_bytes(content.encode("latin-1"))
    assert main([str(source), str(tmp_path / "u"), str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("imagectl: image results: ") and len(err.splitlines()) == 1
    assert not (tmp_path / "u").exists()


def test_a_missing_document_and_wrong_arguments(tmp_path, capsys):
    assert main([str(tmp_path / "none.json"), str(tmp_path / "u"), str(tmp_path / "d")]) == 1
    assert "cannot read" in capsys.readouterr().err
    assert main([str(tmp_path / "none.json")]) == 2
    with pytest.raises(OperationError, match="cannot write a result"):
        source = tmp_path / "build.json"
        source.write_text(json.dumps(built()), encoding="utf-8")
        write_results(source, tmp_path / "no" / "folder", tmp_path / "d")


def test_it_runs_as_the_steps_run_it(tmp_path):
    """``python3 -m imagectl.ci.image_results`` in a fresh interpreter, as steps/build.sh calls it."""
    source = tmp_path / "build.json"
    source.write_text(json.dumps(built()), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "imagectl.ci.image_results", str(source), str(tmp_path / "u"),
                           str(tmp_path / "d")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "d").read_text() == DIGEST
    failed = subprocess.run([sys.executable, "-m", "imagectl.ci.image_results", str(tmp_path / "none"),
                             str(tmp_path / "u"), str(tmp_path / "d")], capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr and len(failed.stderr.splitlines()) == 1
