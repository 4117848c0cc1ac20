"""The pure parts of ``imagectl bases``: where the team keeps a base (naming), end of life (eol), what ``status``
makes of what the registries answered, the warnings of ``build`` and ``list --upstream``, and what ``sync`` reads
off an index.  The registry parts run against a real registry in tests/integration/test_bases.py (another
basename than this file's: pytest collects one module per basename)."""

from __future__ import annotations

import json
from datetime import date
from types import SimpleNamespace

import pytest

from imagectl.bases.eol import POLICY_URL, add_months, end_of_life
from imagectl.bases.naming import MatrixBase, digest_tag, matrix_bases, public_of, team_copy, team_repository
from imagectl.bases.status import BaseStatus, team_state, upstream_state
from imagectl.bases.sync import mount_candidates, platforms_of
from imagectl.bases.custody import TeamPin
from imagectl.cli.bases_cmd import upstream_warnings
from imagectl.config import Config
from imagectl.errors import InputError, RegistryError
from imagectl.images.base_digest import custody_notes
from imagectl.matrix.model import CudaToolkit
from imagectl.reference import apply_mirror, parse_reference
from imagectl.registry.manifest import DOCKER_MANIFEST_LIST, OCI_INDEX, OCI_MANIFEST, Manifest

D1, D2 = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def toolkit(version: str = "12.1", *, eol: str | None = None, since: str | None = None) -> CudaToolkit:
    return CudaToolkit(version, f"{version}.1", "530.30.02", "525.60.13", ("sm_90",), ("ubuntu22.04",),
                       end_of_life=eol, eol_since=since)


def base(ref: str = "nvidia/cuda:12.1.1-base-ubuntu22.04", *profiles: str) -> MatrixBase:
    return MatrixBase(parse_reference(ref), toolkit(), profiles or ("torch-2.3.1-cu121",))


# --------------------------------------------------------------------------------------------- naming


def test_team_repository_keeps_docker_hub_paths_bare_and_prefixes_other_registries_with_their_host():
    hub = team_repository(parse_reference("nvidia/cuda:12.1.1-base-ubuntu22.04"), "reg.example.com:5000", "ml")
    assert str(hub) == "reg.example.com:5000/ml/bases/nvidia/cuda:12.1.1-base-ubuntu22.04"
    ngc = team_repository(parse_reference("nvcr.io:443/nvidia/pytorch:24.01-py3"), "reg.example.com", "ml")
    assert str(ngc) == "reg.example.com/ml/bases/nvcr.io-443/nvidia/pytorch:24.01-py3"
    untagged = team_repository(parse_reference("ubuntu"), "reg.example.com", "ml")
    assert str(untagged) == "reg.example.com/ml/bases/library/ubuntu:latest"


def test_team_copy_needs_a_registry_and_a_valid_name():
    public = parse_reference("nvidia/cuda:12.1.1-base-ubuntu22.04")
    assert team_copy(public, Config()) is None
    assert str(team_copy(public, Config(registry_url="127.0.0.1:5000", namespace="t"))).startswith("127.0.0.1:5000/t/")
    with pytest.raises(InputError):
        team_repository(public, "127.0.0.1:5000", "Not A Namespace")


def test_public_of_undoes_every_mirror_and_leaves_unmirrored_references_alone():
    mirrors = {"docker.io": "127.0.0.1:5077/hub", "ghcr.io": "mirror.example.com/gh/"}
    for text in ("nvidia/cuda:12.1.1-base-ubuntu22.04", "ghcr.io/org/img:1", "nvidia/cuda@" + D1):
        public = parse_reference(text)
        assert public_of(apply_mirror(public, mirrors), mirrors) == public
    elsewhere = parse_reference("quay.io/org/img:2")
    assert public_of(elsewhere, mirrors) == elsewhere
    # a prefix matches whole path components only: 127.0.0.1:5077/hubx/... is no mirror of docker.io
    other = parse_reference("127.0.0.1:5077/hubx/nvidia/cuda:1")
    assert public_of(other, mirrors) == other


def test_digest_tag_keeps_twelve_hex_digits_and_refuses_an_over_long_tag():
    assert digest_tag("12.1.1-base-ubuntu22.04", D1) == "12.1.1-base-ubuntu22.04--111111111111"
    assert digest_tag("x" * 114, D1) == "x" * 114 + "--111111111111"  # 128 characters: the most a tag may have
    assert digest_tag("x" * 115, D1) is None


def test_matrix_bases_are_distinct_sorted_and_name_their_profiles():
    def profile(name: str, ref: str, cuda: CudaToolkit) -> SimpleNamespace:
        return SimpleNamespace(name=name, base_image=parse_reference(ref), toolkit=cuda)

    cu121, cu118 = toolkit(), toolkit("11.8", eol="why (source)", since="2025-08-09")
    found = matrix_bases([
        profile("torch-2.3.1-cu121", "nvidia/cuda:12.1.1-base-ubuntu22.04", cu121),
        profile("torch-2.0.1-cu118", "nvidia/cuda:11.8.0-base-ubuntu22.04", cu118),
        profile("torch-2.3.0-cu121", "nvidia/cuda:12.1.1-base-ubuntu22.04", cu121),
        profile("torch-2.3.0-cu121", "nvidia/cuda:12.1.1-base-ubuntu22.04", cu121),
    ])
    assert [b.public.familiar for b in found] == ["nvidia/cuda:11.8.0-base-ubuntu22.04",
                                                  "nvidia/cuda:12.1.1-base-ubuntu22.04"]
    assert found[1].profiles == ("torch-2.3.0-cu121", "torch-2.3.1-cu121") and found[0].toolkit is cu118
    assert base("nvidia/cuda").tag == "latest"


# --------------------------------------------------------------------------------------------- end of life


def test_end_of_life_from_the_matrix_with_the_policy_deletion_day():
    assert end_of_life(toolkit()).status == "supported"
    assert end_of_life(toolkit()).line() == "CUDA 12.1 supported"
    past = end_of_life(toolkit("11.8", eol="CUDA 11: end of life (policy)", since="2025-08-09"))
    assert (past.status, past.since, past.tags_deleted_after) == ("eol", "2025-08-09", "2026-02-09")
    assert past.line() == "CUDA 11.8 past end of life since 2025-08-09; NVIDIA may delete its tags after 2026-02-09"
    assert past.as_dict() == {"cuda": "11.8", "status": "eol", "since": "2025-08-09",
                              "tags_deleted_after": "2026-02-09", "why": "CUDA 11: end of life (policy)",
                              "policy": POLICY_URL}
    undated = end_of_life(toolkit("11.7", eol="why (source)"))
    assert undated.as_dict()["since"] == "unknown" and undated.as_dict()["tags_deleted_after"] == "unknown"
    assert undated.line() == "CUDA 11.7 past end of life (day unknown)"
    assert end_of_life(toolkit()).as_dict()["since"] is None


@pytest.mark.parametrize(("day", "months", "expected"), [
    (date(2025, 8, 9), 6, date(2026, 2, 9)),
    (date(2025, 8, 31), 6, date(2026, 2, 28)),  # February is shorter: its last day
    (date(2023, 8, 31), 6, date(2024, 2, 29)),  # a leap year
    (date(2025, 12, 15), 1, date(2026, 1, 15)),
    (date(2025, 1, 1), 24, date(2027, 1, 1)),
])
def test_add_months(day, months, expected):
    assert add_months(day, months) == expected


def test_the_shipped_cuda_11_data_says_end_of_life_with_its_source_and_day():
    from imagectl.cli.workspace import Workspace

    matrix = Workspace().matrix
    for version in ("11.7", "11.8"):
        cuda = matrix.cuda[version]
        assert cuda.end_of_life and "support-policy.md" in cuda.end_of_life and cuda.eol_since == "2025-08-09"
    assert all(not matrix.cuda[v].end_of_life for v in matrix.cuda if v.startswith("12."))


# --------------------------------------------------------------------------------------------- status


@pytest.mark.parametrize(("pinned", "now", "reachable", "state"), [
    (D1, D1, True, "current"),
    (D1, D2, True, "moved"),
    (D1, None, True, "gone"),
    (None, None, True, "gone"),
    (None, D2, True, "unpinned"),
    (D1, None, False, "unreachable"),
])
def test_upstream_state(pinned, now, reachable, state):
    assert upstream_state(pinned, now, reachable=reachable) == state


@pytest.mark.parametrize(("configured", "readable", "pinned", "held", "state"), [
    (False, True, None, False, "no-registry"),
    (True, False, None, False, "unknown"),
    (True, True, None, False, "missing"),
    (True, True, D1, False, "incomplete"),
    (True, True, D1, True, "held"),
])
def test_team_state(configured, readable, pinned, held, state):
    assert team_state(configured=configured, readable=readable, pinned=pinned, held=held) == state


def status(upstream: str, *, pinned: str | None = D1, now: str | None = D2, errors: tuple[str, ...] = (),
           ref: str = "nvidia/cuda:12.1.1-base-ubuntu22.04") -> BaseStatus:
    return BaseStatus(base(ref, "a", "b"), "reg/ml/bases/nvidia/cuda:x", pinned, pinned is not None, now,
                      upstream, end_of_life(toolkit()), errors)  # type: ignore[arg-type]


def test_status_json_says_team_state_and_an_unreadable_team_registry_is_unknown():
    held = status("moved").as_dict()
    assert (held["team_state"], held["upstream"], held["pinned"], held["upstream_digest"]) == ("held", "moved", D1, D2)
    assert json.loads(json.dumps(held))["end_of_life"]["status"] == "supported"
    unread = status("gone", pinned=None, now=None, errors=("team copy: registry reg: down",))
    assert unread.team_state == "unknown"
    assert status("gone", pinned=None, now=None).team_state == "missing"


def test_upstream_warnings_one_line_per_moved_or_gone_base_and_one_per_distinct_error():
    lines = upstream_warnings([
        status("current", now=D1),
        status("moved", ref="nvidia/cuda:12.1.1-runtime-ubuntu22.04"),
        status("gone", now=None, pinned=None, ref="nvidia/cuda:11.8.0-base-ubuntu22.04"),
        status("unreachable", now=None, errors=("upstream: registry docker.io: down",), ref="nvidia/cuda:1"),
        status("unreachable", now=None, errors=("upstream: registry docker.io: down",), ref="nvidia/cuda:2"),
        status("unpinned", pinned=None),
    ])
    assert lines == [
        "warning: base nvidia/cuda:12.1.1-runtime-ubuntu22.04 moved upstream (a rebuild with fixes: 'imagectl bases "
        "sync' takes it) (2 profiles; the team copy pins sha256:111111111111); see 'imagectl bases status'",
        "warning: base nvidia/cuda:11.8.0-base-ubuntu22.04 is gone upstream (2 profiles; the team holds no copy); "
        "see 'imagectl bases status'",
        "warning: could not ask upstream about base nvidia/cuda:1 and 1 more: registry docker.io: down",
    ]


# --------------------------------------------------------------------------------------------- build's notes


def test_custody_notes_of_a_build_from_the_team_copy():
    public = parse_reference("nvidia/cuda:12.1.1-base-ubuntu22.04")
    pin = TeamPin(parse_reference("reg/ml/bases/nvidia/cuda:12.1.1-base-ubuntu22.04"), D1)
    assert custody_notes(public, pin, D1, None) == ()
    (moved,) = custody_notes(public, pin, D2, None)
    assert "moved upstream (now sha256:222222222222; the team copy pins sha256:111111111111)" in moved
    (gone,) = custody_notes(public, pin, None, None)
    assert gone == "base nvidia/cuda:12.1.1-base-ubuntu22.04 is gone upstream; building from the team copy " \
                   "(sha256:111111111111)"
    (down,) = custody_notes(public, pin, None, RegistryError("registry docker.io: down"))
    assert "upstream cannot be asked (registry docker.io: down)" in down


# --------------------------------------------------------------------------------------------- sync


def index(*platforms: dict[str, str], media_type: str = OCI_INDEX) -> Manifest:
    entries = [{"mediaType": OCI_MANIFEST, "digest": f"sha256:{i:064x}", "size": 10, "platform": p}
               for i, p in enumerate(platforms)]
    return Manifest.from_bytes(json.dumps({"schemaVersion": 2, "mediaType": media_type,
                                           "manifests": entries}).encode(), media_type)


def test_platforms_of_an_index_leave_out_attestation_entries_and_a_single_image_has_none():
    found = index({"os": "linux", "architecture": "amd64"}, {"os": "linux", "architecture": "arm64", "variant": "v8"},
                  {"os": "unknown", "architecture": "unknown"}, media_type=DOCKER_MANIFEST_LIST)
    assert platforms_of(found) == ("linux/amd64", "linux/arm64/v8")
    image = Manifest.from_bytes(json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
                                            "config": {"mediaType": "x", "digest": D1, "size": 2}}).encode())
    assert platforms_of(image) == ()


def test_mount_candidates_are_the_repositories_of_the_first_profiles_on_the_base():
    assert mount_candidates(base("nvidia/cuda:1", "a", "b", "c", "d"), "team/ml") == ["team/ml/a", "team/ml/b",
                                                                                       "team/ml/c"]


# --------------------------------------------------------------------------------------------- list --upstream


def test_list_upstream_warns_about_an_unreachable_upstream_and_does_not_fail(run_cli, monkeypatch):
    import socket

    import imagectl.retry

    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setattr(imagectl.retry.RetryPolicy, "delay", lambda self, attempt, response=None: 0.0, raising=False)
    monkeypatch.setenv("IMAGECTL_MIRRORS", f"docker.io={closed}/hub")
    plain = run_cli("list", "--cuda", "11.8")
    assert plain.code == 0 and "could not ask upstream" not in plain.err  # a plain list asks no registry
    assert [line for line in plain.err.splitlines() if "past end of life" in line]
    asked = run_cli("list", "--cuda", "11.8", "--upstream")
    assert asked.code == 0 and asked.out == plain.out
    warned = [line for line in asked.err.splitlines() if line.startswith("warning: could not ask upstream")]
    assert len(warned) == 1 and closed in warned[0], asked.err
