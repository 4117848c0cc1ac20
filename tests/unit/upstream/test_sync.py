"""``imagectl matrix sync``: which releases are proposed, what a proposal says, and the command against a
local index generated from the recorded PyPI metadata."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from imagectl.upstream.index_builds import IndexBuild
from imagectl.upstream.sync import ProposalInputs, missing_releases, propose, render_proposal
from imagectl.matrix.load import load_matrix

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

V = Version


def test_missing_releases_newer_patches_and_newer_lines():
    known = ["2.3.0", "2.3.1", "2.5.0"]
    published = [V(v) for v in ("2.2.2", "2.3.1", "2.3.2", "2.4.0", "2.5.0", "2.5.1", "2.6.0", "2.6.1", "2.7.0rc1",
                                "2.8.0.dev1")]
    assert missing_releases(known, published) == [(V("2.6.1"), None), (V("2.5.1"), "2.5.0"), (V("2.3.2"), "2.3.1")]


def test_missing_releases_edge_cases():
    assert missing_releases(["2.3.1"], [V("2.3.1")]) == []
    assert missing_releases([], [V("2.2.0"), V("2.3.1")]) == [(V("2.3.1"), None)]
    assert missing_releases([], []) == []
    assert missing_releases(["2.3.1"], [V("3.0.0")]) == [(V("3.0.0"), None)]


def recorded_build(recorded, version: str) -> IndexBuild:
    entry = recorded["torch"][version]
    return IndexBuild("torch", version, "", entry["wheel"]["filename"], "3.11",
                      tuple(Requirement(line) for line in entry["wheel"]["requires_dist"]), tuple(entry["cpython"]),
                      source="https://pypi.example/simple")


def test_a_proposal_from_recorded_metadata(matrix, recorded):
    fw = matrix.frameworks["torch"]
    inputs = ProposalInputs(fw.releases[0], companions=(("torchvision", "0.24.1"),), todo=("torchaudio: none found",))
    proposal = propose(matrix, fw, recorded_build(recorded, "2.9.1"), inputs)
    assert proposal.cuda == "12.8" and proposal.cuda_declared
    assert proposal.cuda_from == "nvidia-cuda-runtime-cu12==12.8.90"
    assert proposal.cudnn == "9.10.2.21" and proposal.nccl == "2.27.5"
    assert dict(proposal.pins)["triton"] == "3.5.1" and "torch" not in dict(proposal.pins)
    assert proposal.python == ("3.10", "3.11", "3.12", "3.13", "3.14")  # cp313t, cp314t left out
    text = render_proposal(proposal)
    assert "# source: https://pypi.example/simple torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl metadata" in text
    assert "# TODO torchaudio: none found" in text
    block = tomllib.loads(text)["release"][0]
    assert block["version"] == "2.9.1" and block["companions"] == {"torchvision": "0.24.1"}
    variant = block["variant"][0]
    assert variant["pypi"] is True and variant["cuda"] == "12.8" and variant["pins"] == dict(proposal.pins)


def test_an_undeclared_cuda_and_loose_pins_become_comments(matrix, recorded):
    fw = matrix.frameworks["torch"]
    proposal = propose(matrix, fw, recorded_build(recorded, "2.14.1"), ProposalInputs(fw.releases[0]))
    assert proposal.cuda == "13.0" and not proposal.cuda_declared
    text = render_proposal(proposal)
    assert 'CUDA 13.0 is not declared in any [cuda] table; add [cuda."13.0"]' in text
    assert "# not pinned (no ==):" in text and "triton~=3.8.0" in text
    assert "triton" not in tomllib.loads(text)["release"][0]["variant"][0]["pins"]


def test_a_newer_patch_names_the_variants_to_carry_over(matrix, recorded):
    fw = matrix.frameworks["torch"]
    previous = next(r for r in fw.releases if r.version == "2.3.1")
    proposal = propose(matrix, fw, recorded_build(recorded, "2.3.1"), ProposalInputs(previous, "2.3.0"))
    assert proposal.other_cuda == ("11.8",)
    text = render_proposal(proposal)
    assert "newer patch of 2.3; the matrix has 2.3.0" in text
    assert "torch 2.3.0 in the matrix also lists CUDA 11.8 builds" in text


# --- the command ----------------------------------------------------------------------------------


@pytest.fixture
def sync(run_cli, use_matrix, test_matrix_dir, serve):
    def run(root: Path, *args: str, matrix_dir: Path | None = None):
        use_matrix(matrix_dir or test_matrix_dir)
        server = serve(root)
        return run_cli("matrix", "sync", "--framework", "torch", "--index", f"{server.url}/simple", *args), server.url

    return run


def blocks(text: str) -> dict[str, str]:
    parts = re.split(r"(?m)^# --- torch ", text)[1:]
    return {part.split(" ", 1)[0]: part for part in parts}


def test_sync_proposes_every_newer_line(sync, make_index, recorded):
    root = make_index().add_recorded(recorded).write()
    r, url = sync(root)
    assert r.code == 0, r.err
    found = blocks(r.out)
    assert list(found) == ["2.15.0", "2.14.1", "2.13.0", "2.12.1", "2.11.0", "2.10.0", "2.9.1", "2.8.0"]
    assert "8 releases proposed: torch 2.15.0" in r.err
    b = found["2.9.1"]
    assert 'companions = { torchvision = "0.24.1", torchaudio = "2.9.1" }' in b
    assert 'cuda = "12.8"   # from nvidia-cuda-runtime-cu12==12.8.90' in b and "not declared" not in b
    assert f"# source: {url}/simple torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl metadata" in b
    assert 'CUDA 13.0 is not declared' in found["2.11.0"]
    # torchvision 0.29.2 and torchaudio 2.11.1 state floors (torch>=2.14.0, torch>=2.11), no == pin
    assert 'companions = { torchvision = "0.29.2", torchaudio = "2.11.1" }' in found["2.15.0"]
    assert "# note: torchvision 0.29.2 requires torch>=2.14.0 (admits the release; not an == pin" in found["2.15.0"]
    assert "torch-2.10.0-3-cp311-cp311-manylinux_2_28_x86_64.whl" in found["2.10.0"]  # the highest build tag
    tomllib.loads(r.out)  # the whole document is TOML


def test_proposals_load_as_matrix_entries(sync, make_index, recorded, tmp_path):
    root = make_index().add_recorded(recorded, torch=["2.3.1", "2.7.1", "2.8.0", "2.9.0", "2.9.1"]).write()
    out = tmp_path / "proposed.toml"
    r, _ = sync(root, "--output", str(out))
    assert r.code == 0 and r.out == "" and out.is_file()
    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "matrices"
    merged = tmp_path / "merged"
    merged.mkdir()
    (merged / "cuda.toml").write_text((fixture / "cuda.toml").read_text())
    header = (fixture / "torch.toml").read_text().split("[[release]]")[0]
    (merged / "torch.toml").write_text(header + out.read_text())
    loaded = load_matrix([merged]).frameworks["torch"]
    assert [r.version for r in loaded.releases] == ["2.9.1", "2.8.0"]
    newest = loaded.releases[0]
    assert newest.companions == (("torchaudio", "2.9.1"), ("torchvision", "0.24.1"))
    variant = newest.variants[0]
    assert variant.pypi and variant.cuda == "12.8" and variant.cudnn == "9.10.2.21" and variant.nccl == "2.27.5"


def test_a_newer_patch_of_a_known_line(sync, make_index, recorded, copy_matrix, tmp_path):
    matrix_dir = copy_matrix(tmp_path / "m")
    path = matrix_dir / "torch.toml"
    text = path.read_text()
    start = text.index('[[release]]\nversion = "2.3.1"')
    path.write_text(text[:start] + text[text.index('[[release]]\nversion = "2.3.0"'):])
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1", "2.7.1"]).write()
    r, _ = sync(root, matrix_dir=matrix_dir)
    assert r.code == 0
    assert list(blocks(r.out)) == ["2.3.1"]
    assert "(newer patch of 2.3; the matrix has 2.3.0)" in r.out
    assert 'companions = { torchvision = "0.18.1", torchaudio = "2.3.1" }' in r.out


def test_current_matrix_proposes_nothing_and_check(sync, make_index, recorded):
    root = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1", "2.7.1"]).write()
    r, url = sync(root, "--check")
    assert r.code == 0 and r.out == "" and f"the matrix is current with {url}/simple" in r.err
    root2 = make_index("more").add_recorded(recorded, torch=["2.3.1", "2.8.0"]).write()
    r2, _ = sync(root2, "--check")
    assert r2.code == 1 and "torch 2.8.0" in r2.err


def test_output_into_a_matrix_directory_is_refused(sync, make_index, recorded, test_matrix_dir):
    root = make_index().add_recorded(recorded, torch=["2.8.0"]).write()
    for target in (test_matrix_dir / "torch.toml", test_matrix_dir / "proposed.toml"):
        r, _ = sync(root, "--output", str(target))
        assert r.code == 2 and "matrix directory" in r.err and len(r.err.strip().splitlines()) == 1
    assert not (test_matrix_dir / "proposed.toml").exists()


def test_a_framework_without_releases_gets_the_newest(sync, make_index, recorded, copy_matrix, tmp_path):
    matrix_dir = copy_matrix(tmp_path / "m")
    path = matrix_dir / "torch.toml"
    path.write_text(path.read_text().split("[[release]]")[0])
    root = make_index().add_recorded(recorded, torch=["2.7.1", "2.8.0"]).write()
    r, _ = sync(root, matrix_dir=matrix_dir)
    assert r.code == 0 and list(blocks(r.out)) == ["2.8.0"]
    assert "(a minor line the matrix lacks)" in r.out
    assert 'companions = { torchvision = "0.23.0", torchaudio = "2.8.0" }' in r.out


# --- releases the matrix has: companions released since ------------------------------------------


def without_companions(matrix_dir: Path, version: str) -> Path:
    """The matrix at ``matrix_dir`` with release ``version``'s companions emptied."""
    path = matrix_dir / "torch.toml"
    text = path.read_text()
    start = text.index(f'version = "{version}"')
    line = re.compile(r"(?m)^companions = .*$").search(text, start)
    assert line is not None
    path.write_text(text[:line.start()] + "companions = {}" + text[line.end():])
    return matrix_dir


def test_a_companion_released_later_is_proposed_for_a_release_the_matrix_has(sync, make_index, recorded,
                                                                              copy_matrix, tmp_path):
    matrix_dir = without_companions(copy_matrix(tmp_path / "m"), "2.7.1")
    index = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1", "2.7.1"], companions=False)
    wheel = "-py3-none-manylinux_2_28_x86_64.whl"
    index.add("torchvision", f"torchvision-0.22.0{wheel}", ["torch==2.7.0"])        # pins an older torch
    index.add("torchvision", f"torchvision-0.22.9{wheel}", ["numpy", "torch>=2.7.1"])  # admits 2.7.1
    index.add("torchvision", f"torchvision-0.30.0{wheel}", ["torch>=2.8"])          # does not
    index.add("torchaudio", f"torchaudio-2.7.5{wheel}", [])                         # names no torch
    r, url = sync(index.write(), "--check", matrix_dir=matrix_dir)
    assert r.code == 1, r.err
    assert "# --- torch 2.7.1 (in the matrix; companions released for it since) ---" in r.out
    assert '# in its [[release]], set: companions = { torchvision = "0.22.9" }' in r.out
    assert f"torchvision 0.22.9: requires torch>=2.7.1, admits it (not an == pin); source: {url}/simple" in r.out
    assert "torchaudio" not in r.out.split("in the matrix; companions")[1]
    assert "companions for 1 releases in the matrix: torch 2.7.1" in r.err
    assert blocks(r.out).keys() == {"2.7.1"}  # the update, not a new [[release]]
    tomllib.loads(r.out)


def test_an_exact_pin_wins_over_a_newer_floor(sync, make_index, recorded, copy_matrix, tmp_path):
    matrix_dir = without_companions(copy_matrix(tmp_path / "m"), "2.7.1")
    index = make_index().add_recorded(recorded, torch=["2.3.0", "2.3.1", "2.7.1"])
    index.add("torchvision", "torchvision-0.99.0-py3-none-manylinux_2_28_x86_64.whl", ["torch>=2.0"])
    r, _ = sync(index.write(), matrix_dir=matrix_dir)
    assert r.code == 0, r.err
    assert '# in its [[release]], set: companions = { torchvision = "0.22.1", torchaudio = "2.7.1" }' in r.out
    assert "torchvision 0.22.1: requires torch==2.7.1, pins it exactly" in r.out


# --- lockstep packages: jax and its plugins ------------------------------------------------------

JAX_TOML = """
[framework]
name = "jax"
package = "jax"
companions = ["jaxlib"]
cuda_tag = "cuda{major}"
index_url = "https://pypi.org/simple"
pypi_index_url = "https://pypi.org/simple"
check = "jax"
jit_packages = []

[[release]]
version = "0.12.0"
python = ["3.12"]
companions = { jaxlib = "0.12.0" }
  [[release.variant]]
  cuda = "12.8"
  pypi = true
  cudnn = "9.27.0.42"
  nccl = "2.32.3"
  pins = { "jax-cuda12-plugin" = "0.12.0", "jax-cuda12-pjrt" = "0.12.0", "nvidia-cudnn-cu12" = "9.27.0.42" }
"""


def jax_matrix(copy_matrix, tmp_path: Path) -> Path:
    matrix_dir = copy_matrix(tmp_path / "m")
    (matrix_dir / "jax.toml").write_text(JAX_TOML)
    return matrix_dir


def add_jax(index, version: str, *, jaxlib: bool = True, plugin: bool = True) -> None:
    """jax ``version`` as JAX publishes it: jax pins jaxlib and the plugin (>=X,<=X) in its cuda12 extra,
    the plugin pins its pjrt."""
    pin = f"<={version},>={version}"
    index.add("jax", f"jax-{version}-py3-none-any.whl", [
        f"jaxlib<={version},>=0.11.0", f'jaxlib{pin}; extra == "cuda12"',
        f'jax-cuda12-plugin[with-cuda]{pin}; extra == "cuda12"'])
    if jaxlib:
        index.add("jaxlib", f"jaxlib-{version}-cp312-cp312-manylinux_2_27_x86_64.whl", [])
    if plugin:
        add_plugin(index, version)


def add_plugin(index, version: str) -> None:
    index.add("jax-cuda12-plugin", f"jax_cuda12_plugin-{version}-cp312-cp312-manylinux_2_27_x86_64.whl",
              [f"jax-cuda12-pjrt=={version}"])
    index.add("jax-cuda12-pjrt", f"jax_cuda12_pjrt-{version}-py3-none-manylinux_2_27_x86_64.whl", [])


def run_jax(run_cli, use_matrix, serve, matrix_dir: Path, root: Path, *args: str):
    use_matrix(matrix_dir)
    server = serve(root)
    return run_cli("matrix", "sync", "--framework", "jax", "--index", f"{server.url}/simple", *args)


def test_a_plugin_without_its_jax_release_is_said_and_not_proposed(run_cli, use_matrix, serve, make_index,
                                                                   copy_matrix, tmp_path):
    index = make_index()
    add_jax(index, "0.12.0")
    add_plugin(index, "0.12.1")  # jax-cuda12-plugin 0.12.1 and its pjrt, no jax 0.12.1, no jaxlib 0.12.1
    r = run_jax(run_cli, use_matrix, serve, jax_matrix(copy_matrix, tmp_path), index.write(), "--check")
    assert r.code == 0, r.err
    assert r.out == ""
    lines = [line for line in r.err.splitlines() if "0.12.1" in line]
    assert lines == [
        "note: jax: jax-cuda12-pjrt 0.12.1 is on the index, but jax 0.12.1 is not: nothing proposed for it",
        "note: jax: jax-cuda12-plugin 0.12.1 is on the index, but jax 0.12.1 is not: nothing proposed for it",
    ]
    assert "0 releases proposed; the matrix is current" in r.err


def test_a_jax_release_whose_jaxlib_is_missing_is_not_proposed(run_cli, use_matrix, serve, make_index,
                                                               copy_matrix, tmp_path):
    index = make_index()
    add_jax(index, "0.12.0")
    add_jax(index, "0.12.1", jaxlib=False)   # jax 0.12.1 pins jaxlib 0.12.1, which the index lacks
    add_jax(index, "0.13.0")                 # complete
    r = run_jax(run_cli, use_matrix, serve, jax_matrix(copy_matrix, tmp_path), index.write(), "--check")
    assert r.code == 1, r.err
    assert "note: jax 0.12.1 not proposed: it pins jaxlib==0.12.1, which the index does not publish" in r.err
    assert "1 releases proposed: jax 0.13.0" in r.err
    assert '"jax-cuda12-plugin" = "0.13.0"' in r.out and 'version = "0.12.1"' not in r.out


def test_a_jax_release_whose_plugin_is_missing_is_not_proposed(run_cli, use_matrix, serve, make_index,
                                                               copy_matrix, tmp_path):
    index = make_index()
    add_jax(index, "0.12.0")
    add_jax(index, "0.12.1", plugin=False)
    r = run_jax(run_cli, use_matrix, serve, jax_matrix(copy_matrix, tmp_path), index.write())
    assert r.code == 0, r.err
    assert "note: jax 0.12.1 not proposed: it pins jax-cuda12-plugin==0.12.1, which the index does not publish" \
        in r.err
    assert r.out == ""
