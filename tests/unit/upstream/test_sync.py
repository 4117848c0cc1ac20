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
    assert "# TODO torchvision: no torchvision release on the index requires torch==2.15.0" in found["2.15.0"]
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
