"""Shared fixtures: the test matrix, a workspace over it, and a CLI runner that reports exit codes.

Session-wide: ``XDG_CACHE_HOME`` and ``XDG_STATE_HOME`` point into a scratch folder, so no test (nor a CLI
subprocess one starts) reads or writes the real ``~/.cache/imagectl`` or ``~/.local/state/imagectl``; the
integration tests' own rootfs cache stays where it was (``IMAGECTL_TEST_CACHE``).  ``tests/skipguard.py`` fails a
CI run that skips a test; ``pytester`` runs inner sessions (tests/unit/test_skipguard.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest_plugins = ["pytester", "tests.skipguard"]

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent
_ISOLATED = ("XDG_CACHE_HOME", "XDG_STATE_HOME", "IMAGECTL_TEST_CACHE")
_SAVED_ENV = pytest.StashKey[dict[str, str | None]]()
_SCRATCH = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Point the XDG cache and state folders at a scratch folder for the session (in ``os.environ``, so CLI
    subprocesses inherit it).  ``IMAGECTL_TEST_CACHE`` keeps the integration rootfs cache (minutes to rebuild)
    at its usual place, ``$XDG_CACHE_HOME/imagectl-tests``."""
    config.stash[_SAVED_ENV] = {name: os.environ.get(name) for name in _ISOLATED}
    scratch = config.stash[_SCRATCH] = Path(tempfile.mkdtemp(prefix="imagectl-tests-xdg-"))
    real_cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    os.environ.setdefault("IMAGECTL_TEST_CACHE", str(Path(real_cache) / "imagectl-tests"))
    os.environ["XDG_CACHE_HOME"] = str(scratch / "cache")
    os.environ["XDG_STATE_HOME"] = str(scratch / "state")


# The longest groups (each a few minutes of builds, measured with --durations) run first: .ci/run gives whole groups
# to its processes (pytest-xdist --dist loadgroup, each file one group unless split below), and a long group started
# last keeps one process busy alone at the end.  The first of them makes the stand-in bases on a fresh machine (a
# minute or two of mmdebstrap and image builds, which every build test waits for), so the unit tests come right
# after it: the other processes run them meanwhile.  Only the order of groups changes; a group's tests keep theirs.
LONGEST_FIRST = ("tests/integration/test_build.py:docker", "tests/integration/test_build.py:buildah",
                 "tests/integration/test_unhashed_index.py:buildah", "tests/integration/test_unhashed_index.py:docker",
                 "tests/integration/test_locks.py::test_fresh_runners_share_the_cuda_layer_upload_none_of_it_and_"
                 "reproduce_an_image",
                 "tests/integration/test_locks.py", "tests/integration/test_platform_build.py",
                 "tests/integration/test_import.py", "tests/integration/test_evidence.py",
                 "tests/integration/test_system_lock.py", "tests/integration/test_cluster.py",
                 "tests/integration/test_build_progress.py", "tests/integration/test_secrets.py")
# Files whose tests on the two engines (the ``engine`` fixture) are two groups, so two processes share them: the
# buildah half of test_build alone is some 4 minutes of builds, each half of test_unhashed_index 4-5 (CI: 560 s as one
# group, run last).
SPLIT_BY_ENGINE = ("tests/integration/test_build.py", "tests/integration/test_unhashed_index.py")
# Tests that are a group of their own (three runners' full builds, some 3 minutes; the module fixtures they use are
# made again in their process: a stand-in index, seconds).
OWN_GROUP = ("tests/integration/test_locks.py::test_fresh_runners_share_the_cuda_layer_upload_none_of_it_and_"
             "reproduce_an_image",)


def xdist_group(item: pytest.Item) -> str:
    """The group of ``item`` under ``--dist loadgroup``: its file (module fixtures are made once per group), the
    file and the engine for :data:`SPLIT_BY_ENGINE`, or the test itself for :data:`OWN_GROUP`."""
    path = item.nodeid.split("::", 1)[0]
    if item.nodeid in OWN_GROUP:
        return item.nodeid
    callspec = getattr(item, "callspec", None)
    if path in SPLIT_BY_ENGINE and callspec is not None and "engine" in callspec.params:
        return f"{path}:{callspec.params['engine']}"
    return path


def group_rank(group: str) -> int:
    """Where a group runs: 0 the first of :data:`LONGEST_FIRST`, 1 the unit tests, then the rest of it, then the
    others."""
    if group in LONGEST_FIRST:
        index = LONGEST_FIRST.index(group)
        return 0 if index == 0 else 1 + index
    return 1 if group.startswith("tests/unit/") else 1 + len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the groups (a stable sort): the first of :data:`LONGEST_FIRST`, the unit tests, the rest of
    :data:`LONGEST_FIRST` in that order, then the others; and put each test in its :func:`xdist_group`."""
    groups = {id(item): xdist_group(item) for item in items}
    items.sort(key=lambda item: group_rank(groups[id(item)]))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Put the environment back and remove the scratch folder."""
    for name, value in config.stash.get(_SAVED_ENV, {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if _SCRATCH in config.stash:
        shutil.rmtree(config.stash[_SCRATCH], ignore_errors=True)


@pytest.fixture
def test_matrix_dir() -> Path:
    return FIXTURES / "matrices"


@pytest.fixture
def matrix(test_matrix_dir):
    from imagectl.matrix.load import load_matrix

    return load_matrix([test_matrix_dir])


@pytest.fixture
def shipped_matrix():
    from imagectl.matrix.load import load_matrix

    return load_matrix([REPO / "matrices"])


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys, monkeypatch, tmp_path):
    """Run ``imagectl ARGS`` in-process through ``main`` (the real error handling) from ``tmp_path``, without
    imagectl's own ``IMAGECTL_*`` settings (the test harness's ``IMAGECTL_TEST_*`` stay)."""
    from imagectl.cli import main

    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("IMAGECTL_") and not n.startswith("IMAGECTL_TEST_")]:
        monkeypatch.delenv(name)

    def run(*args: str) -> Result:
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
