"""A team's own matrix of any size, read by the real loader: the profile counts the CI sharding tests need.

``write_team_matrix(root, count)`` writes a matrix directory (the test matrix's ``cuda.toml`` with one flavour,
and a framework ``team`` with ``count`` minor lines, their CUDA builds cycling through the three toolkits, each with
its cuDNN and NCCL pins) whose ``imagectl matrix`` lists exactly ``count`` profiles and ``imagectl validate`` passes.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FIXTURES

CUDA = (("12.1", "8.9.2.26", "2.20.5"), ("11.8", "8.7.0.84", "2.20.5"), ("12.8", "9.7.1.26", "2.26.2"))
FRAMEWORK = """[framework]
name = "team"
label = "Team stack"
package = "torch"
cuda_tag = "cu{major}{minor}"
index_url = "https://download.pytorch.org/whl/{cuda_tag}"
pypi_index_url = "https://pypi.org/simple"
check = "torch"
"""


def _release(number: int) -> str:
    cuda, cudnn, nccl = CUDA[number % len(CUDA)]
    suffix = "cu" + cuda.split(".")[0]
    pins = f'{{ "nvidia-cudnn-{suffix}" = "{cudnn}", "nvidia-nccl-{suffix}" = "{nccl}" }}'
    return (f'\n[[release]]\nversion = "1.{number}.0"\npython = ["3.10"]\n\n'
            f'  [[release.variant]]\n  cuda = "{cuda}"\n  cudnn = "{cudnn}"\n  nccl = "{nccl}"\n  pins = {pins}\n')


def write_team_matrix(root: Path, count: int) -> Path:
    """Write the matrix directory ``root`` (created) with exactly ``count`` listed profiles; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    cuda = (FIXTURES / "matrices" / "cuda.toml").read_text(encoding="utf-8")
    flavors = 'flavors = ["runtime", "devel", "base"]'
    assert flavors in cuda, "the test matrix's [base] flavours changed: update team_matrix.py"
    (root / "cuda.toml").write_text(cuda.replace(flavors, 'flavors = ["runtime"]'), encoding="utf-8")
    text = FRAMEWORK + "".join(_release(n) for n in range(count))
    (root / "team.toml").write_text(text, encoding="utf-8")
    return root
