"""The system lock and the cache mounts, end to end on buildah (the engine with cache mounts): ``lock --system`` asks
apt in the stand-in base, the build installs exactly those versions (``dpkg-query -W`` in the image against the base's
says so), and a second build without the layer cache downloads no wheel (the index counts them) and gives the same
image."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from imagectl.engine.buildah import BuildahEngine
from imagectl.lock.system_store import read_system_lock
from tests.integration.conftest import standin_torch_wheels, write_config
from tests.integration.support.wheels import IndexServer, start_simple_index

pytestmark = pytest.mark.integration

# the runtime flavour: its stand-in base lacks the JIT toolchain, so the system lock has packages to pin (the -base
# stand-in carries them); the stand-in base is Debian bookworm: Python 3.11 is the base's own
PROFILE = "torch-2.3-cu121-runtime-py3.11"
DPKG = ["dpkg-query", "-W", "-f=${Package}=${Version}\\n"]


@pytest.fixture(scope="module")
def counting_index(tmp_path_factory) -> Iterator[IndexServer]:
    """The stand-in wheels of torch-2.3-cu121's pins, served by an index that counts whole-wheel downloads."""
    wheels = standin_torch_wheels(tmp_path_factory.mktemp("counted-wheels"))
    with start_simple_index(wheels) as server:
        yield server


def diff_ids(image: str) -> list[str]:
    """The image's layer digests (uncompressed), as buildah reads its config."""
    done = subprocess.run(["buildah", "inspect", "--type", "image", image.removeprefix("sha256:")],
                          capture_output=True, text=True, check=True, timeout=60)
    return json.loads(done.stdout)["OCIv1"]["rootfs"]["diff_ids"]


def installed(engine: BuildahEngine, image: str) -> set[str]:
    code, out = engine.run(image, DPKG)
    assert code == 0, out[-2000:]
    return {line.strip() for line in out.splitlines() if "=" in line}


def test_the_build_installs_the_system_lock_and_a_warm_cache_downloads_nothing(run_cli, tmp_path, mirror,
                                                                               counting_index, monkeypatch):
    if not shutil.which("buildah"):
        pytest.fail("buildah is not installed (.ci/run installs it)")
    locks = tmp_path / "locks"
    locks.mkdir()
    write_config(tmp_path, mirror=mirror, index_url=counting_index.url, namespace="syslock", locks=locks)
    monkeypatch.setenv("IMAGECTL_BUILD_ENGINE", "buildah")

    made = run_cli("lock", PROFILE, "--system")
    assert made.code == 0, made.err[-3000:]
    (path,) = locks.glob("*.apt.lock")
    assert path.name == "torch-12.1.1-runtime-ubuntu22.04-py3.11.apt.lock"
    lock = read_system_lock(path)
    assert lock.packages("python") == () and "the base has Python 3.11" in lock.note("python")
    pins = {p.pin for p in lock.packages("jit")}
    assert {"gcc", "g++", "python3.11-dev"} <= {p.name for p in lock.packages("jit")}

    built = run_cli("build", PROFILE, "--progress", "plain")
    assert built.code == 0, built.err[-3000:]
    assert f"system lock {path.name}" in built.err
    engine = BuildahEngine(insecure=lambda host: True)
    image = f"localhost/syslock/{PROFILE}:latest"
    first = engine.inspect(image)
    assert first is not None
    base_line = next(line for line in run_cli("render", PROFILE).out.splitlines() if line.startswith("FROM "))
    base = engine.pull(f"{base_line.split()[1].rsplit(':', 1)[0]}@{lock.header.digest}", lambda line: None)
    assert installed(engine, first.id) - installed(engine, base.id) == pins  # exactly the locked versions

    before = sum(counting_index.full_downloads().values())
    again = run_cli("build", PROFILE, "--force", "--no-cache", "--quiet", "--json")
    assert again.code == 0, again.err[-3000:]
    assert sum(counting_index.full_downloads().values()) == before  # every wheel came from the cache mount
    second = json.loads(again.out)["results"][0]["image_id"]
    assert diff_ids(second) == diff_ids(first.id)  # a warm cache (this build) and a cold one give the same layers
