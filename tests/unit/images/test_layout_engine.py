"""The engine seam's two levels (issue 35, item 3): every engine is an :class:`Engine`; only a
:class:`LayoutEngine` (buildah) takes an assembled build.  mypy proves that a Docker engine, or a LazyEngine not yet
narrowed by ``layout_engine``, cannot be handed to ``assembled_build``; at run time the builder narrows with
``layout_engine`` and an engine that is no layout engine stops the build with one line before anything is built."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from enginefake import FakeEngine, FakeRegistry
from imagectl.config import Config
from imagectl.engine import Engine, LayoutEngine
from imagectl.engine.buildah import BuildahEngine
from imagectl.engine.docker import DockerEngine
from imagectl.engine.select import LazyEngine, layout_engine
from imagectl.errors import BuildError
from imagectl.images import builder
from imagectl.images.builder import base_resolver, build_one
from imagectl.images.plan import BuildOptions, BuildRequest, plan_build
from imagectl.images.trace import Trace
from imagectl.matrix.names import resolve_profile

REPO_ROOT = Path(__file__).resolve().parents[3]
LAYOUT_ONLY = ("run_mounted", "load_layout", "stage_layer", "discard_staged", "push_layout")


def test_the_five_assembled_members_are_the_layout_engines_alone():
    assert all(hasattr(LayoutEngine, name) for name in LAYOUT_ONLY)
    assert not any(hasattr(Engine, name) for name in LAYOUT_ONLY)
    assert not any(hasattr(DockerEngine, name) for name in LAYOUT_ONLY)  # no refusals left to call
    assert not any(hasattr(LazyEngine, name) for name in LAYOUT_ONLY)
    assert LayoutEngine in BuildahEngine.__mro__  # declared, not only shaped like one


def test_layout_engine_hands_out_buildah_and_refuses_the_rest():
    buildah = object.__new__(BuildahEngine)  # its methods and attributes, without running buildah
    assert layout_engine(buildah) is buildah
    assert layout_engine(LazyEngine(lambda: buildah)) is buildah  # connects, and gives the engine it made
    fake = FakeEngine()
    assert layout_engine(fake) is None
    assert layout_engine(LazyEngine(lambda: fake)) is None


def test_an_assembled_build_on_an_engine_that_is_no_layout_engine_stops_before_building(matrix, monkeypatch):
    registry = FakeRegistry()
    monkeypatch.setattr(builder, "open_tag_store", registry.open_tag_store)
    monkeypatch.setattr(builder, "resolve_base_digest", lambda base, config, engine: "sha256:" + "b" * 64)
    engine = FakeEngine(registry)
    config = Config(build_engine="buildah", build_install="assembled")  # what renders an assembled Dockerfile
    trace = Trace(lambda line: None)
    plan = plan_build(BuildRequest(resolve_profile("torch-2.3-cu121", matrix), BuildOptions()), config,
                      base_resolver(config, engine), trace)
    with pytest.raises(BuildError, match=r'\[build\] install = "assembled" needs the buildah engine; the docker '
                                         r'engine builds the lock with pip') as raised:
        build_one(plan, config, LazyEngine(lambda: engine), trace)
    assert raised.value.step == "build" and engine.builds == []


SNIPPET = '''\
from pathlib import Path

from imagectl.config import Config
from imagectl.engine.buildah import BuildahEngine
from imagectl.engine.docker import DockerEngine
from imagectl.engine.select import LazyEngine, layout_engine
from imagectl.images.assembled import assembled_build
from imagectl.images.plan import Plan
from imagectl.images.trace import Trace


def on_docker(plan: Plan, config: Config, trace: Trace, work: Path, engine: DockerEngine) -> None:
    with assembled_build(plan, config, engine, trace, work):  # DOCKER
        pass


def on_lazy(plan: Plan, config: Config, trace: Trace, work: Path, engine: LazyEngine) -> None:
    with assembled_build(plan, config, engine, trace, work):  # LAZY
        pass


def on_buildah(plan: Plan, config: Config, trace: Trace, work: Path, engine: BuildahEngine) -> None:
    with assembled_build(plan, config, engine, trace, work):
        pass


def narrowed(plan: Plan, config: Config, trace: Trace, work: Path, engine: LazyEngine) -> None:
    layouts = layout_engine(engine)
    if layouts is not None:
        with assembled_build(plan, config, layouts, trace, work):
            pass
'''


def test_mypy_refuses_docker_and_an_unnarrowed_engine_on_the_assembled_path(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra (pip install -e '.[test]')")
    snippet = tmp_path / "seam.py"
    snippet.write_text(SNIPPET)
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                           "--no-error-summary", "--hide-error-context", "--cache-dir", str(tmp_path / "cache"),
                           str(snippet)], capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    lines = SNIPPET.splitlines()
    marked = {lines.index(line) + 1: line.rsplit("# ", 1)[1] for line in lines if line.endswith(("# DOCKER", "# LAZY"))}
    errors = {int(m[1]): m[2] for m in re.finditer(r"^\S*seam\.py:(\d+): error: (.*)$", done.stdout, re.MULTILINE)}
    assert sorted(errors) == sorted(marked), done.stdout + done.stderr
    for line, which in marked.items():
        engine = "DockerEngine" if which == "DOCKER" else "LazyEngine"
        assert errors[line] == (f'Argument 3 to "assembled_build" has incompatible type "{engine}"; expected '
                                '"LayoutEngine"  [arg-type]'), done.stdout
    assert done.returncode == 1
