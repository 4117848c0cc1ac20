"""import: expectations from the matrix, matching profiles, strictness, and a local-engine import end to end
against a fake engine."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from imagectl.config import Config
from imagectl.engine import ImageInfo
from imagectl.errors import OperationError
from imagectl.image_spec import ImageSpec
from imagectl.cli.import_views import import_json
from imagectl.images.importer import (
    ImportEnvironment,
    ImportOptions,
    import_image,
    matching_profiles,
    profile_matches,
)
from imagectl.labels import expectations, expectations_from_profile, labels_for
from imagectl.matrix.names import resolve_profile
from imagectl.reference import names_registry
from imagectl.tags.managed import resolve_managed
from imagectl.tags.naming import MOVING_TAG, immutable_parts, is_immutable


def report_for(profile, **changes):
    fw = {"name": profile.framework.name, "version": profile.release.version,
          "local_version": profile.release.version + "+cu121",
          "cuda": profile.variant.cuda, "cudnn": profile.variant.cudnn, "nccl": profile.variant.nccl}
    fw.update(changes.pop("framework", {}))
    report = {"python": profile.python + ".4", "packages": dict(profile.packages), "system_nccl": {},
              "gpu_requested": False, "framework": fw}
    report.update(changes)
    return report


def test_expectations_from_profile_are_the_profiles_versions_and_pins(matrix):
    profile = resolve_profile("torch-2.3-cu121", matrix)
    expect = expectations_from_profile(profile)
    assert expect == {"framework": "torch", "version": profile.release.version, "cuda": profile.variant.cuda,
                      "cudnn": profile.variant.cudnn, "nccl": profile.variant.nccl, "python": profile.python,
                      "packages": dict(profile.packages), "lock": None, "lock_sha256": None, "extras": {}}
    assert expect["packages"] and expect["version"].startswith("2.3.")
    assert expectations(labels_for(ImageSpec(profile), profile.base_image)) == expect


def test_matching_profiles(matrix):
    profile = resolve_profile("torch-2.3-cu121", matrix)
    assert matching_profiles(report_for(profile), matrix) == ["torch-2.3-cu121"]
    assert profile_matches(profile, report_for(profile))
    py311 = report_for(profile, python="3.11.9")
    assert matching_profiles(py311, matrix) == ["torch-2.3-cu121-py3.11"] and not profile_matches(profile, py311)
    older = report_for(profile, framework={"version": "2.3.0"})
    assert matching_profiles(older, matrix) == ["torch-2.3.0-cu121"]
    assert matching_profiles(report_for(profile, framework={"cuda": "12.4"}), matrix) == []
    no_framework = report_for(profile, framework={"name": None, "version": None, "error": "ModuleNotFoundError"})
    assert matching_profiles(no_framework, matrix) == []


@pytest.mark.parametrize("text, expected", [
    ("ghcr.io/team/img:1", True), ("127.0.0.1:5000/x", True), ("localhost/x:1", True),
    ("team/img:1", False), ("img", False), ("img:1.0", False),
])
def test_names_registry(text, expected):
    assert names_registry(text) is expected


class FakeEngine:
    """Just enough of the Docker engine for a local import: images, tags, and a check that reports ``report``."""

    def __init__(self, report: dict) -> None:
        self.images: dict[str, ImageInfo] = {}
        self.refs: dict[str, str] = {}
        self.report = report
        self.runs: list[list[str]] = []

    def add(self, ref: str, image_id: str) -> None:
        self.images[image_id] = ImageInfo(image_id, (ref,), (), {}, 1000, "2024-05-01T12:00:00Z")
        self.refs[ref] = image_id

    def inspect(self, ref: str):
        image_id = self.refs.get(ref, ref)
        return self.images.get(image_id)

    def list_tags(self, repository: str) -> list[str]:
        return sorted(r.split(":", 1)[1] for r in self.refs if r.startswith(f"{repository}:"))

    def tag(self, image: str, repository: str, tag: str) -> None:
        self.refs[f"{repository}:{tag}"] = self.refs.get(image, image)

    def untag(self, ref: str) -> None:
        self.refs.pop(ref, None)

    def run(self, image, command, network=None, gpus=False):
        self.runs.append(command)
        return 0, "some output\n" + json.dumps(self.report) + "\n"


@pytest.fixture
def local_import(matrix, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    managed = resolve_managed("torch-2.3-cu121", matrix, Config(namespace="ml"))
    engine = FakeEngine(report_for(managed.profile))
    engine.add("team/own:v1", "sha256:" + "1" * 64)

    def run(options=None, ref="team/own:v1"):
        env = ImportEnvironment(matrix, Config(namespace="ml"), engine, lambda line: None)
        return import_image(ref, managed, options or ImportOptions(), env)

    return engine, managed, run


def test_local_import_checks_tags_and_moves_latest_when_there_is_none(local_import):
    engine, _, run = local_import
    result = run()
    assert result.checked and not result.disagreements and result.matches == ["torch-2.3-cu121"]
    assert engine.runs[0][:2] == ["sh", "-c"] and "def framework_facts" in engine.runs[0][-1]
    assert is_immutable(result.tag) and immutable_parts(result.tag)["key"] == "1" * 10
    assert immutable_parts(result.tag)["version"] == "2.3.1" and immutable_parts(result.tag)["cuda"] == "cu121"
    repo = "localhost/ml/torch-2.3-cu121"
    assert engine.refs[f"{repo}:{result.tag}"] == engine.refs[f"{repo}:{MOVING_TAG}"] == "sha256:" + "1" * 64
    assert result.move is not None and result.move.changed
    again = run()
    assert again.reused and again.tag == result.tag and again.move is None
    assert import_json(again)["reused"] is True


def test_a_second_image_leaves_latest_unless_set_latest(local_import):
    engine, _, run = local_import
    first = run()
    engine.add("team/own:v2", "sha256:" + "2" * 64)
    second = run(ref="team/own:v2")
    assert engine.refs[f"localhost/ml/torch-2.3-cu121:{MOVING_TAG}"] == first.digest
    assert any("stays on" in note for note in second.notes)
    engine.add("team/own:v3", "sha256:" + "3" * 64)
    third = run(ImportOptions(set_latest=True), ref="team/own:v3")
    assert engine.refs[f"localhost/ml/torch-2.3-cu121:{MOVING_TAG}"] == third.digest


def test_disagreements_warn_and_strict_fails_before_copying(local_import):
    engine, managed, run = local_import
    engine.report = report_for(managed.profile, framework={"nccl": "2.19.3"})
    result = run()
    assert [f.what for f in result.disagreements] == ["nccl loaded by torch"]
    assert any("1 disagreements" in n for n in result.notes)
    engine.add("team/own:v2", "sha256:" + "2" * 64)
    tags_before = dict(engine.refs)
    with pytest.raises(OperationError, match="nccl loaded by torch: expected 2.20.5, found 2.19.3"):
        run(ImportOptions(strict=True), ref="team/own:v2")
    assert engine.refs == tags_before


def test_an_image_that_matches_no_profile_is_said_so(local_import):
    engine, _, run = local_import
    engine.report = {"python": "3.11.2", "packages": {}, "system_nccl": {},
                     "framework": {"error": "ModuleNotFoundError: No module named 'torch'"}}
    result = run()
    assert result.matches == [] and any("matches no profile" in n for n in result.notes)
    with pytest.raises(OperationError, match="disagrees"):
        run(ImportOptions(strict=True))


def test_no_check_and_a_missing_local_image(local_import):
    engine, _, run = local_import
    result = run(ImportOptions(check=False))
    assert not result.checked and not engine.runs and any("not checked" in n for n in result.notes)
    with pytest.raises(OperationError, match="local engine has no image"):
        run(ref="team/missing:v1")


def test_resolve_managed_accepts_a_repository_suffix(matrix):
    config = Config(registry_url="reg.example.com:5000", namespace="ml")
    plain = resolve_managed("torch-2.3-cu121", matrix, config)
    assert str(plain.reference) == "reg.example.com:5000/ml/torch-2.3-cu121"
    team = resolve_managed("torch-2.3-cu121-nlp", matrix, config)
    assert team.profile == plain.profile and team.name == "torch-2.3-cu121-nlp"
    assert str(team.reference) == "reg.example.com:5000/ml/torch-2.3-cu121-nlp"
    from imagectl.errors import UnknownProfileError

    with pytest.raises(UnknownProfileError):
        resolve_managed("torch-9.9-cu121", matrix, config)
    with pytest.raises(UnknownProfileError):
        resolve_managed("nonsense", matrix, replace(config))


CLASH = "2.3.1-cu121-py3.10-20240501T120000-abcdefabcd"  # a key part no import here has: found only by name


def test_an_import_never_overwrites_an_immutable_tag_naming_another_image(local_import, monkeypatch):
    from imagectl.images import importer

    engine, managed, run = local_import
    monkeypatch.setattr(importer, "immutable_tag", lambda *args, **kwargs: CLASH)
    engine.add("someone/else:1", "sha256:" + "9" * 64)
    engine.tag("someone/else:1", managed.reference.familiar, CLASH)

    with pytest.raises(OperationError, match=f"localhost/ml/torch-2.3-cu121:{CLASH} already names another image"):
        run()
    assert engine.refs[f"localhost/ml/torch-2.3-cu121:{CLASH}"] == "sha256:" + "9" * 64
    assert f"localhost/ml/torch-2.3-cu121:{MOVING_TAG}" not in engine.refs


def test_an_import_whose_tag_already_names_the_image_copies_nothing(local_import, monkeypatch):
    from imagectl.images import importer

    engine, managed, run = local_import
    monkeypatch.setattr(importer, "immutable_tag", lambda *args, **kwargs: CLASH)
    engine.tag("team/own:v1", managed.reference.familiar, CLASH)  # as a concurrent import of this image wrote it

    result = run()
    assert (result.tag, result.digest, result.reused) == (CLASH, "sha256:" + "1" * 64, False)
    assert result.copied == "already there: the tag names this image"
    assert engine.refs[f"localhost/ml/torch-2.3-cu121:{MOVING_TAG}"] == "sha256:" + "1" * 64
