"""``imagectl build --json``, ``--metadata-file`` and ``--plan`` in-process, over the fake engine and registry.

Hermetic as tests/unit/images/test_builder.py: the engine is a FakeEngine (``LazyEngine`` patched), the base
digest a constant (``resolve_base_digest`` patched), the registry's tags FakeStores (``open_tag_store`` patched),
and opening a real registry connection fails the test.
"""

from __future__ import annotations

import json
import re
import time

import pytest

import imagectl.cli.building
import imagectl.registry.access
from imagectl.errors import OperationError
from imagectl.images import builder
from imagectl.labels import BUILD_KEY
from imagectl.tags.naming import MOVING_TAG, is_immutable
from tests.unit.images.enginefake import FakeEngine, FakeRegistry, push_by_digest

REGISTRY = "registry.example.com"
NAME = "torch-2.3-cu121"
REPO = f"{REGISTRY}/ml/{NAME}"
BASE_DIGEST = "sha256:" + "b" * 64
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")



@pytest.fixture(autouse=True)
def attested(monkeypatch) -> None:
    """Attesting reaches the registry (tests/integration/test_evidence.py): here it attaches nothing, every image
    counts as attested, and the fake engine pushes by digest, as ``build`` does."""
    monkeypatch.setattr(builder, "attest_build", lambda plan, config, engine, built, trace: [])
    monkeypatch.setattr(builder, "unattested", lambda store, config, repo, tag, digest: None)
    monkeypatch.setattr(builder, "push_by_digest", push_by_digest)

@pytest.fixture
def registry(monkeypatch) -> FakeRegistry:
    fake = FakeRegistry()
    monkeypatch.setattr(builder, "open_tag_store", fake.open_tag_store)
    return fake


@pytest.fixture
def engine(monkeypatch, registry) -> FakeEngine:
    """The engine every ``build`` of the test gets, pushing to ``registry``."""
    return use_engine(monkeypatch, FakeEngine(registry))


def use_engine(monkeypatch, fake: FakeEngine) -> FakeEngine:
    """Make ``fake`` the engine of ``build``; no real registry or base lookup is reachable."""
    monkeypatch.setattr(imagectl.cli.building, "engine_for", lambda config: fake)
    monkeypatch.setattr(builder, "resolve_base_digest", lambda base, config, engine: BASE_DIGEST)
    # the expected size reads the index and the base's manifest (tests/unit/images/test_size_plan.py fakes both)
    monkeypatch.setattr(builder, "expected_gate", lambda plans, config, log, *, always=False: None)

    def no_registry(host, **_):
        raise AssertionError(f"a unit test tried to reach registry {host}")

    monkeypatch.setattr(imagectl.registry.access, "connect", no_registry)
    return fake


@pytest.fixture
def with_registry(tmp_path) -> None:
    (tmp_path / "imagectl.toml").write_text(f'[registry]\nurl = "{REGISTRY}"\nnamespace = "ml"\n')


def test_build_json_is_one_document_with_the_full_digest_and_phases(run_cli, engine, registry, with_registry,
                                                                    tmp_path):
    r = run_cli("build", NAME, "--json", "--metadata-file", "out/meta.json")
    assert r.code == 0, r.err
    document = json.loads(r.out)  # the whole of stdout: no summary table
    assert json.loads((tmp_path / "out" / "meta.json").read_text()) == document
    [result] = document["results"]
    [made] = engine.builds
    [(_, pushed_tag, pushed_digest)] = engine.pushes
    assert (result["profile"], result["status"], result["repository"]) == (NAME, "built", REPO)
    assert pushed_tag == "" and is_immutable(result["tag"])  # pushed by digest, tagged once attested
    assert registry.store(REPO).tag_map == {result["tag"]: pushed_digest, MOVING_TAG: pushed_digest}
    assert result["digest"] == pushed_digest and DIGEST.fullmatch(result["digest"]) and len(result["digest"]) == 71
    assert result["image_id"] == made.image and result["size"] == engine.images[made.image].size > 0
    assert set(result["phases"]) == {"resolve", "lock", "render", "lookup", "build", "check", "tag", "push"}
    assert all(seconds >= 0 for seconds in result["phases"].values()) and result["seconds"] >= 0
    assert result["notes"] == [] and "error" not in result and "log_tail" not in result
    assert f"building {NAME}" in r.err  # progress stays on stderr


def test_build_json_reports_a_reused_image(run_cli, engine, with_registry):
    first = json.loads(run_cli("build", NAME, "--json").out)["results"][0]
    r = run_cli("build", NAME, "--json")
    [again] = json.loads(r.out)["results"]
    assert r.code == 0 and len(engine.builds) == 1
    assert (again["status"], again["tag"], again["digest"]) == ("reused", first["tag"], first["digest"])
    assert again["image_id"] is None and set(again["phases"]) == {"resolve", "lock", "render", "lookup"}


def test_build_json_without_a_registry_gives_the_image_id_as_digest(run_cli, monkeypatch):
    engine = use_engine(monkeypatch, FakeEngine())  # the real open_tag_store: the engine's own store
    r = run_cli("build", NAME, "--json")
    [result] = json.loads(r.out)["results"]
    [made] = engine.builds
    assert r.code == 0 and result["digest"] == result["image_id"] == made.image and "push" not in result["phases"]
    assert result["repository"] == f"localhost/imagectl/{NAME}"  # a local-only name: never resolves to Docker Hub


def test_a_failed_build_has_its_step_error_log_tail_and_real_seconds(run_cli, engine, with_registry, monkeypatch):
    error = "No matching distribution found for torch==2.3.1"
    engine.fail_builds(error)
    real_build = engine.build

    def slow_build(*args, **kwargs):
        time.sleep(0.2)
        return real_build(*args, **kwargs)

    monkeypatch.setattr(engine, "build", slow_build)
    r = run_cli("build", NAME, "--json", "--metadata-file", "meta.json")
    [result] = json.loads(r.out)["results"]
    assert r.code == 1 and result["status"] == "failed" and result["step"] == "build"
    assert result["error"] == f"build: build failed: {error}" and result["log_tail"][-1] == f"ERROR: {error}"
    assert result["tag"] is None and result["digest"] is None and result["repository"] == REPO
    assert result["seconds"] >= 0.2 and result["phases"]["build"] >= 0.2 and "check" not in result["phases"]


def test_the_summary_table_shows_the_real_seconds_of_a_failure(run_cli, engine, with_registry, monkeypatch):
    def slow_refusal(base, config, engine):
        time.sleep(0.2)
        raise OperationError("the mirror is down")

    monkeypatch.setattr(builder, "resolve_base_digest", slow_refusal)
    r = run_cli("build", NAME)
    [row] = [line for line in r.out.splitlines() if line.startswith(NAME)]
    assert r.code == 1 and row.split()[1] == "failed" and float(row.split()[-1]) >= 0.2
    assert "imagectl: torch-2.3-cu121: the mirror is down" in r.err


def test_an_unwritable_metadata_file_is_a_one_line_error(run_cli, engine, with_registry, tmp_path):
    (tmp_path / "afile").write_text("")
    r = run_cli("build", NAME, "--metadata-file", "afile/meta.json")
    assert r.code == 1 and r.err.strip().splitlines()[-1] == (
        "imagectl: afile/meta.json: cannot write: afile is not a directory")


def test_plan_says_build_then_reuse_and_never_builds(run_cli, engine, registry, with_registry):
    r = run_cli("build", NAME, "--plan", "--json")
    [entry] = json.loads(r.out)["plan"]
    assert r.code == 0 and (entry["profile"], entry["action"], entry["repository"]) == (NAME, "build", REPO)
    assert engine.builds == [] and engine.pushes == [] and registry.store(REPO).tag_map == {}

    built = json.loads(run_cli("build", NAME, "--json").out)["results"][0]
    assert engine.builds[0].labels[BUILD_KEY] == entry["key"]
    store = registry.store(REPO)
    store.calls.clear()
    r = run_cli("build", NAME, "--plan", "--json")
    [entry] = json.loads(r.out)["plan"]
    assert (entry["action"], entry["tag"]) == ("reuse", built["tag"]) and len(engine.builds) == 1
    assert [call[0] for call in store.calls] == ["tag_with_key"] and store.tag_map[MOVING_TAG] == built["digest"]

    text = run_cli("build", NAME, "--plan")
    assert text.code == 0 and text.out.splitlines()[0].split() == ["PROFILE", "ACTION", "DETAIL"]
    assert text.out.splitlines()[1].split() == [NAME, "reuse", built["tag"]]


def test_plan_with_force_says_build_and_a_refusal_says_why(run_cli, engine, with_registry, monkeypatch):
    run_cli("build", NAME)
    [entry] = json.loads(run_cli("build", NAME, "--plan", "--force", "--json").out)["plan"]
    assert entry["action"] == "build" and len(engine.builds) == 1

    def refuse(base, config, engine):
        raise OperationError("the mirror is down")

    monkeypatch.setattr(builder, "resolve_base_digest", refuse)
    r = run_cli("build", NAME, "--plan", "--json", "--metadata-file", "plan.json")
    assert r.code == 1 and json.loads(r.out) == {
        "plan": [{"profile": NAME, "action": "refused", "reason": "the mirror is down"}]}
