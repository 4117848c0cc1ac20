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


# The longest files (each a few minutes of builds, measured in CI with --durations: .ci/run's log) run first: .ci/run
# gives whole files to three processes (pytest-xdist --dist loadgroup, each file one group), and a long file started
# last keeps one process busy alone at the end.  Only the order of files changes; tests inside a file keep theirs.
LONGEST_FIRST = ("tests/integration/test_build.py", "tests/integration/test_locks.py",
                 "tests/integration/test_platform_build.py", "tests/integration/test_rebuild.py",
                 "tests/integration/test_import.py", "tests/integration/test_evidence.py",
                 "tests/integration/test_system_lock.py", "tests/integration/test_build_progress.py",
                 "tests/integration/test_secrets.py")
# Files whose tests on the two engines (the ``engine`` fixture) are two groups, so two processes share them: the
# buildah half of test_build alone is some 6 minutes of builds.
SPLIT_BY_ENGINE = ("tests/integration/test_build.py",)


def xdist_group(item: pytest.Item) -> str:
    """The group of ``item`` under ``--dist loadgroup``: its file (module fixtures are made once per group), or
    the file and the engine for :data:`SPLIT_BY_ENGINE`."""
    path = item.nodeid.split("::", 1)[0]
    callspec = getattr(item, "callspec", None)
    if path in SPLIT_BY_ENGINE and callspec is not None and "engine" in callspec.params:
        return f"{path}:{callspec.params['engine']}"
    return path


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the files of :data:`LONGEST_FIRST` to the front, in that order (a stable sort), and put each test in
    its :func:`xdist_group`."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


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
