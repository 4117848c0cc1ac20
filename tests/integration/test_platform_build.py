"""``build --platform linux/amd64,linux/arm64`` end to end (issue 20, items 3 and 5): buildah builds both platforms
of a stand-in ``torch-2.15-cu132`` (the arm64 one under QEMU user emulation), checks each in a container, and pushes
one OCI image index to a real registry; skopeo (an independent client) reads it back.

The base is a two-platform stand-in of ``nvidia/cuda:13.2.1-base-ubuntu22.04`` (tests/integration/support/arm64.py);
the wheels are the usual stand-ins, but torch is two platform wheels, ``manylinux_2_28_x86_64`` and
``manylinux_2_28_aarch64``: each platform's lock names its own, and pip installs the aarch64 one only where it runs
as aarch64, so a platform built under the wrong architecture fails at its pip step.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from imagectl.images.index_assembly import check_report_where
from imagectl.images.platforms import CHECK_ANNOTATION
from imagectl.reference import parse_reference
from imagectl.registry import RegistryClient
from imagectl.tags.moves import guarded_move
from imagectl.tags.store import RegistryTagStore
from tests.integration.conftest import shipped_pins, skip_or_fail
from tests.integration.support.arm64 import push_multiplatform_base
from tests.integration.support.engine import cuda_base_env
from tests.integration.support.wheels import (_standin_requires, make_standin_dependency_wheels,
                                              make_standin_framework_wheels, make_wheel, serve_simple_index,
                                              torch_standin_files, wheel_filename)
from tests.integration.test_index_tags import push_child, push_index

pytestmark = pytest.mark.integration

NAME = "torch-2.15-cu132"  # its build has aarch64 CUDA wheels (matrices/platforms.toml); Python 3.11 by default
PUBLIC_BASE = "nvidia/cuda:13.2.1-base-ubuntu22.04"
PREFIX = "hubmulti"
NAMESPACE = "multi"
AMD, ARM = "linux/amd64", "linux/arm64"
MACHINE = {AMD: "x86_64", ARM: "aarch64"}
OLD_TAG = "2.15.0-cu132-py3.11-20240101T120000-0000000001"  # an earlier index under latest, to roll back to


@pytest.fixture(scope="module")
def platform_wheels(tmp_path_factory) -> Iterator[str]:
    """A PEP 503 index of stand-ins of torch-2.15-cu132's pins, torch as an x86_64 and an aarch64 wheel."""
    pins = shipped_pins(NAME)
    facts = {"torch_version": pins["torch"], "cuda": "13.2", "cudnn": pins["nvidia-cudnn-cu13"],
             "nccl": pins["nvidia-nccl-cu13"]}
    wheels = tmp_path_factory.mktemp("platform-wheels")
    make_standin_framework_wheels(wheels, pins, facts)
    make_standin_dependency_wheels(wheels)  # numpy too: the build's lock inputs name it
    (wheels / wheel_filename("torch", pins["torch"])).unlink()
    for machine in ("x86_64", "aarch64"):
        make_wheel(wheels, "torch", pins["torch"], torch_standin_files(pins["torch"], facts),
                   _standin_requires("torch", pins), tag=f"py3-none-manylinux_2_28_{machine}")
    url, stop = serve_simple_index(wheels)
    yield url
    stop()


@pytest.fixture(scope="module")
def multi_base(docker_client, registry) -> str:
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").is_file():
        skip_or_fail("binfmt_misc has no qemu-aarch64 handler: linux/arm64 cannot be built or checked here")
    if shutil.which("buildah") is None:
        skip_or_fail("buildah is not installed: only it builds another platform than the host's")
    try:
        return push_multiplatform_base(docker_client, registry.host, PREFIX, PUBLIC_BASE, cuda_base_env("13.2.1"))
    except RuntimeError as exc:
        pytest.fail(f"no stand-in arm64 base: {exc}")


def write_config(path: Path, registry_host: str, index_url: str) -> None:
    path.joinpath("imagectl.toml").write_text("\n".join([
        "[registry]", f'url = "{registry_host}"', f'namespace = "{NAMESPACE}"', "",
        "[mirrors]", f'"docker.io" = "{registry_host}/{PREFIX}"', "",
        "[pip]", f'index_url = "{index_url}"', "",
        "[build]", 'network = "host"', 'engine = "buildah"', ""]))


def raw_index(host: str, repo: str, tag: str) -> tuple[str, dict]:
    """(digest, document) of what skopeo reads under ``repo:tag``, as raw bytes."""
    proc = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw", f"docker://{host}/{repo}:{tag}"],
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return "sha256:" + hashlib.sha256(proc.stdout).hexdigest(), json.loads(proc.stdout)


def run_in(ref: str, *command: str) -> str:
    """The output of ``command`` in a buildah container of ``ref`` (pulled by digest; QEMU runs an arm64 one)."""
    made = subprocess.run(["buildah", "from", "--tls-verify=false", "--pull", f"docker://{ref}"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert made.returncode == 0, made.stderr
    container = made.stdout.strip().splitlines()[-1]
    try:
        done = subprocess.run(["buildah", "run", "--isolation", "chroot", container, "--", *command],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, timeout=60, check=False)


def seed_previous_index(host: str, repo: str) -> str:
    """An earlier two-platform index under ``OLD_TAG`` and ``latest`` (as an earlier build leaves them)."""
    client = RegistryClient(host, insecure=True)
    labels = {"imagectl.profile": NAME, "imagectl.framework": "torch", "imagectl.framework.version": "2.15.0"}
    children = {p: push_child(client, repo, f"earlier {p}\n", p.split("/")[1], labels) for p in (AMD, ARM)}
    index = push_index(client, repo, OLD_TAG, children)
    store = RegistryTagStore(client, parse_reference(f"{host}/{repo}"))
    guarded_move(store, "latest", index, OLD_TAG, store.digest("latest"), "build")
    return index


def test_build_of_two_platforms_pushes_one_checked_index(run_cli, tmp_path, registry, multi_base, platform_wheels,
                                                         docker_config):
    repo = f"{NAMESPACE}/{NAME}"
    earlier = seed_previous_index(registry.host, repo)
    write_config(tmp_path, registry.host, platform_wheels)

    built = run_cli("build", NAME, "--platform", "linux/amd64,linux/arm64", "--json", "--progress", "plain")
    assert built.code == 0, built.err[-4000:]
    result = json.loads(built.out)["results"][0]
    assert result["status"] == "built" and result["engine"] == "buildah"
    checks = {p["platform"]: p for p in result["platforms"]}
    assert list(checks) == [AMD, ARM]
    assert checks[AMD]["check"] == "native" and checks[ARM]["check"] == "emulated by qemu-aarch64"
    assert all(p["check_seconds"] > 0 for p in checks.values())
    assert f"check: {ARM} ran emulated by qemu-aarch64 in " in built.err and f"check: {AMD} ran native in " in built.err
    assert built.err.count("check: ok") >= 2  # each platform's findings, all ok

    # skopeo: one index, under the immutable tag and latest, naming both platforms as checked
    digest, index = raw_index(registry.host, repo, "latest")
    assert digest == result["digest"] and raw_index(registry.host, repo, result["tag"])[0] == digest
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    entries = {f"{m['platform']['os']}/{m['platform']['architecture']}": m for m in index["manifests"]}
    assert list(entries) == [AMD, ARM]
    assert {p: m["digest"] for p, m in entries.items()} == {p: checks[p]["digest"] for p in (AMD, ARM)}
    assert entries[ARM]["annotations"][CHECK_ANNOTATION] == "emulated by qemu-aarch64"
    assert entries[AMD]["annotations"][CHECK_ANNOTATION] == "native"

    # inside each child: the kernel and Python say its architecture (QEMU runs the arm64 one)
    for platform, entry in entries.items():
        ref = f"{registry.host}/{repo}@{entry['digest']}"
        machine = run_in(ref, "sh", "-c", "uname -m; /opt/venv/bin/python -c 'import platform; "
                                          "print(platform.machine())'")
        assert machine.split() == [MACHINE[platform]] * 2, (platform, machine)

    # each image carries its own check report, which says where it ran (what `imagectl index` requires)
    client = RegistryClient(registry.host, insecure=True)
    assert check_report_where(client, repo, entries[AMD]["digest"], AMD) == "native"
    assert check_report_where(client, repo, entries[ARM]["digest"], ARM) == "emulated on x86_64"
    assert check_report_where(client, repo, entries[ARM]["digest"], AMD) is None  # not the amd64 image's report

    # the index job finds no per-platform images here (this build pushed its images by digest): it refuses
    refused = run_cli("index", NAME, "--platforms", "linux/amd64,linux/arm64")
    assert refused.code == 1 and refused.err.count("\n") == 1, refused.err
    assert refused.err.startswith(f"imagectl: index {NAME}: no {AMD} image with build key ")

    # rollback moves both platforms at once (one PUT of the earlier index), and back again
    back = run_cli("rollback", NAME)
    assert back.code == 0, back.err
    assert raw_index(registry.host, repo, "latest")[0] == earlier
    again = run_cli("rollback", NAME)
    assert again.code == 0, again.err
    assert raw_index(registry.host, repo, "latest")[0] == digest
