"""Which companion release goes with a framework release: an exact pin, else the newest release whose
requirement admits it (torchvision 0.29.2's ``torch>=2.14.0`` admits torch 2.15.0)."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from imagectl.upstream.companions import relation


def reqs(*lines: str) -> list[Requirement]:
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize(("lines", "version", "expected"), [
    (("torch==2.9.1",), "2.9.1", "pins"),
    (("torch (==2.15)",), "2.15.0", "pins"),            # 2.15 and 2.15.0 are the same release
    (("torch==2.15.0",), "2.15", "pins"),
    (("torch>=2.14.0", "numpy"), "2.15.0", "admits"),   # torchvision 0.29.2
    (("torch>=2.11",), "2.15.0", "admits"),             # torchaudio 2.11.1
    (("torch>=2.14,<2.15",), "2.15.0", None),            # excluded by its ceiling
    (("torch==2.14.0",), "2.15.0", None),                # pins another release
    (("torch",), "2.15.0", None),                        # names torch without a version: says nothing
    (("numpy",), "2.15.0", None),                        # torchaudio 2.11.0 names no torch at all
    (("torch>=2.14.0; python_version < '3.0'",), "2.15.0", "admits"),  # markers are the caller's job
])
def test_relation(lines, version, expected):
    assert relation(reqs(*lines), "torch", version)[0] == expected


def test_relation_names_the_requirement():
    assert relation(reqs("Torch>=2.14.0"), "torch", "2.15.0") == ("admits", "Torch>=2.14.0")
