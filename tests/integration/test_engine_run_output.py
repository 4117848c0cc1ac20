"""``buildah run`` gives back all of a program's output while imagectl's other threads keep the interpreter busy, as a
second build's threads do during ``build A B``: its chroot relay exits with the program and drops what it still
holds, so a reader that falls behind lost the end (exit status 0).  An SBOM then listed the stand-in base's dpkg
packages up to ``perl-modules`` only, and ``diff`` showed 26 OS packages B "added" (test_diff, CI).  Real buildah, a
real Debian root file system (the stand-in base's, cached)."""

from __future__ import annotations

import os
import subprocess
import tarfile
import threading
from collections.abc import Iterator

import pytest

from imagectl.engine.buildah import BuildahEngine
from imagectl.evidence.attach import read_os_packages
from imagectl.evidence.sbom import parse_dpkg_status
from tests.integration.support.engine import standin_rootfs
from tests.integration.support.skips import require_binary

pytestmark = pytest.mark.integration

RUNS = 8  # on the old code about one run in two lost the end of its output
BUSY_THREADS = 3


def _buildah(*args: str) -> str:
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"buildah {args[0]}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


@pytest.fixture(scope="module")
def debian() -> Iterator[tuple[str, str]]:
    """An image of the stand-in base's Debian root file system in buildah's store, and its dpkg status."""
    require_binary("buildah")
    tarball, _ = standin_rootfs("bookworm")
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("./var/lib/dpkg/status")
        assert member is not None
        status = member.read().decode()
    name = f"localhost/imagectl-test/run-output:{os.getpid()}"
    container = _buildah("from", "scratch")
    try:
        _buildah("add", "--quiet", container, str(tarball), "/")
        _buildah("commit", "--quiet", container, name)
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    yield name, status
    subprocess.run(["buildah", "rmi", name], capture_output=True, check=False)


@pytest.fixture
def busy_interpreter() -> Iterator[None]:
    """Threads that keep the GIL busy meanwhile (a second build's layer writers and stager)."""
    done = threading.Event()

    def spin() -> None:
        while not done.is_set():
            total = 0
            for n in range(20000):
                total += n

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(BUSY_THREADS)]
    for thread in threads:
        thread.start()
    yield
    done.set()
    for thread in threads:
        thread.join()


def test_run_gives_back_all_of_a_long_output_while_other_threads_are_busy(debian, busy_interpreter):
    image, _ = debian
    engine = BuildahEngine()
    want = "".join(f"{n}\n" for n in range(1, 100001)) + "end\n"
    lengths = []
    for _ in range(RUNS):
        code, output = engine.run(image, ["sh", "-c", "seq 1 100000; echo end"])
        assert code == 0, output[-500:]
        lengths.append(len(output))
    assert lengths == [len(want)] * RUNS  # on the old code: 524288 or 557056 characters of 588899, now and then


def test_the_sbom_s_os_packages_are_all_of_the_image_s_while_other_threads_are_busy(debian, busy_interpreter):
    image, status = debian
    engine = BuildahEngine()
    want = parse_dpkg_status(status)
    assert len(want) > 50
    for _ in range(RUNS):
        debs, _, how = read_os_packages(engine, image)
        assert (how, len(debs), debs[-1].name) == ("status", len(want), want[-1].name)
        assert debs == want
