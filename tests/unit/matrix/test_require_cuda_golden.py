"""The rendered NVIDIA_REQUIRE_CUDA of each CUDA release equals what NVIDIA's own base image of that release carries.

The golden values are NVIDIA's, copied from its Dockerfiles (golden/require_cuda/SOURCE names the commit).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.matrix.admission import require_cuda

GOLDEN = Path(__file__).parent / "golden" / "require_cuda"
RELEASES = sorted(p.stem for p in GOLDEN.glob("*.txt"))


def test_every_golden_release_is_read():
    assert RELEASES == ["11.7.1", "11.8.0", "12.1.1", "12.4.1", "12.6.3", "12.9.1", "13.3.1"]


@pytest.mark.parametrize("release", RELEASES)
def test_the_rendered_requirement_is_nvidias(shipped_matrix, release):
    toolkit = next(t for t in shipped_matrix.cuda.values() if t.release == release)
    assert require_cuda(toolkit) == (GOLDEN / f"{release}.txt").read_text().strip()


def test_the_older_images_admit_geforce_and_the_newer_do_not(shipped_matrix):
    assert "brand=geforce," in require_cuda(shipped_matrix.cuda["12.1"])
    assert "brand=geforce," not in require_cuda(shipped_matrix.cuda["12.6"])
