"""What the shipped matrix admits about itself (issue 11, items 7, 8 and 9): unverified builds marked in every
output, the newest line's missing companions and numpy, and base tags that cite a source."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from imagectl.lock.target import lock_inputs
from imagectl.matrix.listing import companion_note, profile_notes
from imagectl.matrix.names import list_profiles, resolvable_profiles, resolve_profile

REPO = Path(__file__).resolve().parents[3]
UNVERIFIED = "torch-2.15-cu130"  # download.pytorch.org's cu130 build of 2.15: nothing but its existence sourced


# --- item 7: unverified builds are visible -----------------------------------------------------------------


def test_unverified_is_data_not_a_comment(shipped_matrix):
    text = (REPO / "matrices" / "torch.toml").read_text()
    left = re.findall(r"(?mi)^  # unverified: .*(?:pins|nccl|cudnn).*$", text)  # (GPU arch notes are not ours)
    assert not left, f"a variant still says it in a comment: {left}"
    torch = shipped_matrix.frameworks["torch"]
    unverified = [(r.version, v.cuda) for r in torch.releases for v in r.variants if not v.verified]
    assert len(unverified) == 22 and ("2.15.0", "13.0") in unverified
    assert all(v.verified for r in torch.releases for v in r.variants if v.pypi)  # read from the wheel metadata


def test_a_build_without_pins_cudnn_or_nccl_must_say_why(shipped_matrix):
    from dataclasses import replace

    from imagectl.matrix.rules import unverified_stated

    p = resolve_profile(UNVERIFIED, shipped_matrix)
    [violation] = unverified_stated(replace(p, variant=replace(p.variant, unverified=None)))
    assert violation.rule == "unverified-stated" and "no pins, cudnn, nccl" in violation.message
    assert all(unverified_stated(p) == [] for p in resolvable_profiles(shipped_matrix))


def test_list_json_and_table_mark_unverified_builds(run_cli):
    rows = {r["name"]: r for r in json.loads(run_cli("list", "--json").out)}
    assert rows[UNVERIFIED]["verified"] is False and "no source for its cuDNN" in rows[UNVERIFIED]["unverified"]
    assert rows["torch-2.15-cu132"]["verified"] is True and rows["torch-2.15-cu132"]["unverified"] is None
    table = run_cli("list").out.splitlines()
    columns = table[0].split()
    assert "VERIFIED" in columns and columns[-1] == "LOCK"
    row = next(line.split() for line in table if line.split()[0] == UNVERIFIED)
    assert row[columns.index("VERIFIED")] == "NO"


def test_show_says_why_a_build_is_unverified(run_cli):
    info = json.loads(run_cli("show", UNVERIFIED, "--json").out)
    assert info["verified"] is False and info["unverified"].startswith("no source for its cuDNN, NCCL and pins")
    assert info["notes"][0] == f"unverified: {info['unverified']}"
    text = run_cli("show", UNVERIFIED).out
    assert re.search(r"(?m)^verified +no: no source for its cuDNN, NCCL and pins", text)


def test_matrix_formats_carry_verified(run_cli):
    rows = {r["name"]: r for r in json.loads(run_cli("matrix", "--format", "json").out)}
    assert rows[UNVERIFIED]["verified"] is False and rows[UNVERIFIED]["unverified"]
    chunks = json.loads(run_cli("matrix", "--format", "github").out)["include"]
    include = {e["profile"]: e for chunk in chunks for e in chunk["profiles"]["include"]}
    assert include[UNVERIFIED]["verified"] is False and include["torch-2.15-cu132"]["unverified"] == ""
    markdown = run_cli("matrix", "--format", "markdown").out
    assert "| Verified |" in markdown.splitlines()[0]
    assert re.search(rf"`{UNVERIFIED}` \| no: no source for its cuDNN", markdown)
    assert re.search(r"`torch-2.15-cu132` \| yes \|", markdown)
    gitlab = run_cli("matrix", "--format", "gitlab").out
    assert f"# unverified: {UNVERIFIED}: no source for its cuDNN" in gitlab


@pytest.fixture
def fake_engine(monkeypatch):
    """``build`` over the fake engine of tests/unit/images (no Docker, no registry)."""
    import imagectl.cli.building
    from imagectl.images import builder
    from tests.unit.images.enginefake import FakeEngine, FakeRegistry

    registry = FakeRegistry()
    monkeypatch.setattr(builder, "open_tag_store", registry.open_tag_store)
    monkeypatch.setattr(imagectl.cli.building, "engine_for", lambda config: FakeEngine(registry))
    monkeypatch.setattr(builder, "resolve_base_digest", lambda base, config, engine: "sha256:" + "b" * 64)
    # the expected size reads the index and the base's manifest (tests/unit/images/test_size_plan.py fakes both)
    monkeypatch.setattr(builder, "expected_gate", lambda plans, config, log, *, always=False: None)


def test_build_says_unverified_and_missing_companions_before_it_starts(run_cli, fake_engine):
    r = run_cli("build", "--plan", UNVERIFIED)
    notes = [line for line in r.err.splitlines() if line.startswith("note: ")]
    assert notes[:1] == [
        f"note: {UNVERIFIED}: unverified: no source for its cuDNN, NCCL and pins: cu130 is \"Stable, available via"
        " download.pytorch.org\" per RFC #190385 (open) [rfc]; its cuDNN is \"TBD\" there and the release/2.15"
        " matrix script is not readable.",
    ]
    assert r.err.index(notes[0]) == 0  # before anything else the build says
    assert not any("companions:" in line for line in notes)  # 2.15 has torchvision 0.29.2, torchaudio 2.11.1
    r14 = run_cli("build", "--plan", "torch-2.14-cu132")
    assert "note: torch-2.14-cu132: companions: no torchaudio release for torch 2.14" in r14.err


# --- item 8: the newest line -------------------------------------------------------------------------------


def test_companions_of_the_newest_line(shipped_matrix, run_cli):
    newest = resolve_profile("torch-2.15-cu132", shipped_matrix)
    assert companion_note(newest) is None and profile_notes(newest) == []
    bare = replace(newest, release=replace(newest.release, companions=()))  # as 2.15.0 was until issue 34
    assert companion_note(bare) == "none released for torch 2.15 yet (torchvision, torchaudio)"
    assert profile_notes(bare) == ["companions: none released for torch 2.15 yet (torchvision, torchaudio)"]
    assert companion_note(resolve_profile("torch-2.14-cu130", shipped_matrix)) == "no torchaudio release for torch 2.14"
    assert companion_note(resolve_profile("torch-2.9-cu128", shipped_matrix)) is None
    text = run_cli("show", "torch-2.15-cu132").out
    assert re.search(r"(?m)^companions +torchaudio==2.11.1 torchvision==0.29.2$", text)
    shown = json.loads(run_cli("show", "torch-2.15-cu132", "--json").out)["companions"]
    assert shown == {"torchvision": "0.29.2", "torchaudio": "2.11.1"}


def test_numpy_is_in_every_torch_lock(shipped_matrix):
    torch = shipped_matrix.frameworks["torch"]
    assert torch.lock_requires == ("numpy",) and shipped_matrix.frameworks["jax"].lock_requires == ()
    for profile in list_profiles(shipped_matrix, "torch"):
        assert lock_inputs(profile)[-1] == "numpy", profile.name
    locks = sorted((REPO / "matrices" / "locks").glob("torch-*.txt"))
    assert locks and all(re.search(r"(?m)^numpy==", path.read_text()) for path in locks)
    assert all(re.search(r"(?m)^# inputs: .* numpy$", path.read_text()) for path in locks)
    assert (REPO / "matrices" / "locks" / "torch-2.15.0-cu132-py3.12.txt").is_file()


# --- item 9: base tags -------------------------------------------------------------------------------------


def test_the_12_8_2_ubuntu20_04_base_tags_are_back_with_their_source(shipped_matrix):
    """NVIDIA's doc/supported-tags.md (the copy whose newest entry is 13.2.1) lists 12.8.2-{base,runtime,devel}-
    ubuntu20.04 (issue 21, item 4): the matrix makes them again, cites that list, and torch-2.8-cu128-py3.9 resolves
    (Python 3.9 is only in Ubuntu 20.04's archive among 12.8's OSes)."""
    assert shipped_matrix.cuda["12.8"].os == ("ubuntu22.04", "ubuntu24.04", "ubuntu20.04")
    tags = {str(p.base_image) for p in resolvable_profiles(shipped_matrix)}
    assert {f"docker.io/nvidia/cuda:12.8.2-{f}-ubuntu20.04" for f in ("base", "runtime", "devel")} <= tags
    table = (REPO / "matrices" / "cuda.toml").read_text().split('[cuda."12.8"]')[1].split("[cuda.")[0]
    assert "doc/supported-tags.md" in table and "13.2.1" in table and "dist/12.8.2/ubuntu2004" in table
    profile = resolve_profile("torch-2.8-cu128-py3.9", shipped_matrix)
    assert profile.os.name == "ubuntu20.04"
    assert str(profile.base_image) == "docker.io/nvidia/cuda:12.8.2-base-ubuntu20.04"


def test_every_toolkits_base_tags_cite_their_source():
    text = (REPO / "matrices" / "cuda.toml").read_text()
    for table in re.split(r"(?m)^\[cuda\.", text)[1:]:
        version = table.split('"')[1]
        release = re.search(r'(?m)^release = "([^"]+)"', table)[1]
        os_line = re.search(r"(?m)^os = \[([^\]]*)\] *#(.*)$", table)
        oses = [o.strip().strip('"') for o in os_line[1].split(",")]
        comment = os_line[2]
        # [hub]: NVIDIA's supported-tags list; [flavors]: NVIDIA's image sources (dist/<release>/...), for a release
        # newer than the supported-tags copy that could be read
        assert ("[hub]" in comment or "[flavors]" in comment) and \
            re.match(rf" *(nvidia/cuda:)?{re.escape(release)}-", comment), version
        named = re.search(r"ubuntu\{([^}]*)\}|ubuntu([0-9.]+)", comment)
        listed = named[1].split(",") if named[1] else [named[2]]
        assert [f"ubuntu{v}" for v in listed] == oses, version


# --- issue 21, item 4: bases past end of life ------------------------------------------------------------------


def test_bases_past_end_of_life_are_data_with_their_source_and_list_and_show_mark_them(shipped_matrix, run_cli):
    """NVIDIA's doc/support-policy.md: CUDA 11 images reach end of life once CUDA 13 is released, and EOL tags are
    deleted six months later.  The 11.x toolkits say so (with the source); the others are supported."""
    eol = {version for version, toolkit in shipped_matrix.cuda.items() if toolkit.end_of_life}
    assert eol == {"11.7", "11.8"}
    assert all("doc/support-policy.md" in shipped_matrix.cuda[v].end_of_life for v in eol)
    rows = {r["name"]: r for r in json.loads(run_cli("list", "--json").out)}
    assert "support-policy.md" in rows["torch-2.0-cu117"]["end_of_life"]
    assert rows["torch-2.3-cu121"]["end_of_life"] is None
    table = run_cli("list", "--framework", "torch").out.splitlines()
    columns = table[0].split()
    base = columns.index("BASE")
    marks = {line.split()[0]: line.split()[base] for line in table[1:]}
    assert marks["torch-2.0-cu117"] == "EOL" and marks["torch-2.3-cu121"] == "ok"
    shown = json.loads(run_cli("show", "torch-2.0-cu118", "--json").out)
    assert shown["end_of_life"].startswith("CUDA 11: end of life")
    assert "end_of_life          no" in run_cli("show", "torch-2.3-cu121").out
