"""The matrix model compares per-Python pin ranges itself (so ``show`` need not import packaging's specifier
parser); its answers are packaging's, for every range the shipped matrix writes and for the shapes a team may."""

from __future__ import annotations

import itertools

import pytest
from packaging.specifiers import SpecifierSet

from imagectl.matrix.model import _admits

PYTHONS = [f"3.{minor}" for minor in range(0, 16)] + ["3.10.1", "3.9.18", "3.12.0rc1", "3"]
SHAPES = ["<3.12", "<=3.11", ">3.9", ">=3.9", "==3.11", "!=3.11", ">=3.9,<3.13", "<3.12, >3.8", " <3.10 ",
          ">=3.9.1", "<3.10.2", "==3.11.*", "~=3.10", ">=3.10,!=3.11.*", "<3.12.0rc1", "===3.11"]


def shipped_ranges(matrix) -> set[str]:
    return {spec for fw in matrix.frameworks.values() for release in fw.releases for variant in release.variants
            for _, spec in variant.pin_python}


def test_the_shipped_matrix_writes_per_python_ranges(shipped_matrix):
    assert shipped_ranges(shipped_matrix)  # the comparison below covers real data, not only made-up shapes


@pytest.mark.parametrize("specifier", SHAPES)
def test_every_shape_agrees_with_packaging(specifier):
    for python in PYTHONS:
        assert _admits(specifier, python) == SpecifierSet(specifier).contains(python), (specifier, python)


def test_every_shipped_range_agrees_with_packaging(shipped_matrix):
    for specifier, python in itertools.product(sorted(shipped_ranges(shipped_matrix)), PYTHONS):
        assert _admits(specifier, python) == SpecifierSet(specifier).contains(python), (specifier, python)
