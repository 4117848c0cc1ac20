"""``imagectl test`` on a multi-platform image: which child runs (the host's, or --platform's), and only where it
can run (natively, or under an enabled binfmt_misc QEMU handler); against the in-memory tag store."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagectl.errors import InputError, OperationError, RegistryError
from imagectl.images.tester import Picked, emulator, host_platform, pick_image, platform_finding
from tests.unit.tags.tagfakes import FakeStore, digest_of

REPO = "registry.example.com/ml/torch-2.3-cu121"
AMD, ARM = "linux/amd64", "linux/arm64"
INDEX = f"{REPO}@{digest_of(1)}"


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore(REPO)
    store.add_index("latest", digest_of(1), {digest_of(10): AMD, digest_of(11): ARM})
    store.add("plain", digest_of(2))
    return store


def binfmt(tmp_path: Path, state: str | None) -> Path:
    if state is not None:
        (tmp_path / "qemu-aarch64").write_text(f"{state}\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    return tmp_path


def test_the_host_platform_runs_natively_by_the_childs_digest(store, tmp_path):
    picked = pick_image(INDEX, store, machine="x86_64", binfmt=binfmt(tmp_path, None))
    assert picked == Picked(f"{REPO}@{digest_of(10)}", AMD, "", digest_of(1))
    on_arm = pick_image(INDEX, store, machine="aarch64", binfmt=binfmt(tmp_path, None))
    assert on_arm == Picked(f"{REPO}@{digest_of(11)}", ARM, "", digest_of(1))


def test_another_platform_runs_under_an_enabled_qemu_handler_and_says_so(store, tmp_path):
    picked = pick_image(INDEX, store, "arm64", machine="x86_64", binfmt=binfmt(tmp_path, "enabled"))
    assert picked == Picked(f"{REPO}@{digest_of(11)}", ARM, "qemu-aarch64", digest_of(1))
    finding = platform_finding(picked, 1.25)
    assert finding.ok and finding.actual == "linux/arm64 (emulated by qemu-aarch64, 1.2 s)"


@pytest.mark.parametrize("state", [None, "disabled"])
def test_without_an_enabled_handler_another_platform_is_not_run(store, tmp_path, state):
    with pytest.raises(OperationError, match="linux/arm64 cannot run on this linux/amd64 host.*not checked"):
        pick_image(INDEX, store, ARM, machine="x86_64", binfmt=binfmt(tmp_path, state))
    assert emulator(ARM, binfmt(tmp_path, state)) == ""


def test_a_platform_the_index_lacks_or_imagectl_does_not_know(store, tmp_path):
    store.add_index("amd64-only", digest_of(3), {digest_of(30): AMD})
    with pytest.raises(OperationError, match=r"has no linux/arm64 image \(its platforms: linux/amd64\)"):
        pick_image(f"{REPO}:amd64-only", store, ARM, machine="x86_64", binfmt=binfmt(tmp_path, "enabled"))
    with pytest.raises(InputError, match="--platform 's390x'"):
        pick_image(INDEX, store, "s390x", machine="x86_64")


def test_a_single_platform_image_is_tested_as_before_and_checked_against_a_named_platform(store, tmp_path):
    assert pick_image(f"{REPO}:plain", store, machine="x86_64") == Picked(f"{REPO}:plain")
    assert pick_image(f"{REPO}:plain", store, AMD, machine="x86_64").image == f"{REPO}@{digest_of(2)}"
    with pytest.raises(OperationError, match="is a linux/amd64 image only, not linux/arm64"):
        pick_image(f"{REPO}:plain", store, ARM, machine="x86_64", binfmt=binfmt(tmp_path, "enabled"))


def test_an_image_named_without_its_registry_runs_only_on_the_host_platform():
    assert pick_image("team/img:1", None, machine="x86_64") == Picked("team/img:1")
    assert pick_image("team/img:1", None, "amd64", machine="x86_64") == Picked("team/img:1")
    with pytest.raises(OperationError, match="names no registry"):
        pick_image("team/img:1", None, ARM, machine="x86_64")
    with pytest.raises(OperationError, match="none of the platforms"):
        host_platform("s390x")


def test_a_registry_that_cannot_be_read_leaves_the_host_platform_to_the_engine(store, tmp_path):
    def unreachable(*_: str) -> None:
        raise RegistryError("registry registry.example.com: connection refused")

    store.hooks["digest"] = unreachable
    assert pick_image(f"{REPO}:latest", store, machine="x86_64") == Picked(f"{REPO}:latest")
    store.hooks["digest"] = unreachable
    with pytest.raises(RegistryError):  # a named platform cannot be chosen without reading the index
        pick_image(f"{REPO}:latest", store, ARM, machine="x86_64", binfmt=binfmt(tmp_path, "enabled"))
