"""Shared fixtures: the test matrix, a workspace over it, and a CLI runner that reports exit codes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent


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
    """Run ``imagectl ARGS`` in-process through ``main`` (the real error handling) from ``tmp_path``."""
    from imagectl.cli import main

    monkeypatch.chdir(tmp_path)
    for name in [n for n in __import__("os").environ if n.startswith("IMAGECTL_")]:
        monkeypatch.delenv(name)

    def run(*args: str) -> Result:
        code = main(list(args))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
