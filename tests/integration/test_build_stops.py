"""An assembled build (buildah) that fails, is interrupted, or is killed, with real processes against a stand-in index
that sends wheels slowly (issue 35 item 1, issue 36 item 6):

- a Dockerfile partial that fails ends the build while wheels are still coming: the index never sends them all, and
  the folder, partial downloads and containers are gone;
- Ctrl-C (SIGINT to ``imagectl build``) while the system image builds, or while the probe runs and the layers are
  written: exit 130, one last line, no traceback, nothing left;
- ``kill -9`` while the probe runs: its container and work folder stay, the probe itself ends with its parent,
  ``imagectl sweep`` lists and removes them, and so does the next build.

Each test has a containers-storage of its own (``CONTAINERS_STORAGE_CONF``), so what it finds there is its own.  The
seconds from the failure (or the signal) to the exit are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from imagectl.lock.lockfile import parse_lock

from imagectl.engine.process import descendants
from tests.integration.conftest import NO_DAEMON, empty_storage, standin_torch_wheels, write_config
from tests.integration.support.skips import require_binary
from tests.integration.support.slow_index import SlowIndex, slow_index

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"
REPO = Path(__file__).resolve().parents[2]
FAILS = "imagectl-test: the partial fails now"
# torch's framework partial (templates/frameworks/torch.j2 from [paths] templates): the last RUN of the system image
FAILING_PARTIAL = 'RUN echo "imagectl-test: the partial" "fails now" && sleep 1 && false\n'


@pytest.fixture
def wheels(tmp_path_factory) -> Path:
    return standin_torch_wheels(tmp_path_factory.mktemp("slow-wheels"))


@pytest.fixture
def index(wheels) -> Iterator[SlowIndex]:
    """The stand-in wheels, each body 64 bytes a second: some two minutes for all 25."""
    with slow_index(wheels, chunk=64, pause_s=1.0) as served:
        yield served


@dataclass
class Build:
    """An ``imagectl build`` process, its stderr lines as they came (with the time each came)."""

    process: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)
    reader: threading.Thread | None = None

    def read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def when(self, test: Callable[[str], bool]) -> float | None:
        return next((at for at, line in list(self.lines) if test(line)), None)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def finish(self, timeout: float = 300) -> tuple[int, float]:
        """(exit status, the time it exited).  One that does not exit in time is made to show where each of its
        threads waits (faulthandler on SIGABRT), and the test fails with that."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(30)
            if self.reader is not None:
                self.reader.join(30)
            raise AssertionError(f"no exit within {timeout:g} s:\n{self.text()[-12000:]}") from None
        ended = time.monotonic()
        if self.reader is not None:
            self.reader.join(30)
        return code, ended


# `imagectl build` as a shell runs it in the foreground: Ctrl-C raises KeyboardInterrupt.  A test runner started in the
# background of a script inherits SIGINT ignored, and a process started so keeps ignoring it, as Unix programs do.
LAUNCH = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
          "from imagectl.cli import main; sys.exit(main())")


def start_build(folder: Path, *args: str) -> Build:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_") or k.startswith("IMAGECTL_TEST_")}
    process = subprocess.Popen([sys.executable, "-c", LAUNCH, "build", PROFILE, *args], cwd=folder,
                               env={**env, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"},
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    build = Build(process)
    build.reader = threading.Thread(target=build.read, daemon=True)
    build.reader.start()
    return build


@dataclass(frozen=True)
class World:
    folder: Path
    cache: Path
    locked: tuple[str, ...]  # the lock's wheels (canonical names)

    @property
    def contexts(self) -> list[str]:
        root = self.cache / "imagectl" / "contexts"
        return sorted(os.listdir(root)) if root.exists() else []

    @property
    def partial_downloads(self) -> list[str]:
        return sorted(str(p) for p in (self.cache / "imagectl" / "wheels").glob(".*.part"))


@pytest.fixture
def world(tmp_path, monkeypatch, mirror, registry, docker_config, index, run_cli) -> Iterator[World]:
    """A workspace whose lock comes from the slow index (made while it is fast), a wheel cache, containers-storage
    and Docker config of its own, no Docker daemon (buildah, assembled)."""
    require_binary("buildah")
    monkeypatch.setenv("DOCKER_HOST", NO_DAEMON)
    cache = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    empty_storage(monkeypatch, tmp_path / "storage")
    locks = tmp_path / "locks"
    locks.mkdir()
    config = write_config(tmp_path, mirror=mirror, index_url=index.url, registry=registry,
                          namespace=f"stops-{tmp_path.name[-12:].lower().strip('_')}", locks=locks, engine=None)
    config.write_text(config.read_text().replace("[paths]\n", '[paths]\ntemplates = ["./templates"]\n'))
    (tmp_path / "templates" / "frameworks").mkdir(parents=True)
    index.slow.clear()
    made = run_cli("lock", PROFILE)
    assert made.code == 0, made.err[-3000:]
    index.slow.set()
    [lock] = locks.glob("*.txt")
    packages = parse_lock(lock.read_text(), "lock").packages
    yield World(tmp_path, cache, tuple(canonicalize_name(p.name) for p in packages))
    # the overlay driver mounts its folder on itself, and that stays (a store of the test's own): undone
    storage = tmp_path / "storage"
    subprocess.run(["containers-storage", "--graph", str(storage / "root"), "--run", str(storage / "run"),
                    "--storage-driver", "overlay", "shutdown"], capture_output=True, check=False, timeout=120)


def containers() -> list[dict]:
    for _ in range(10):  # buildah fails to list while a container goes ("container not known"): again
        done = subprocess.run(["buildah", "containers", "--json"], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return json.loads(done.stdout or "[]") or []
        time.sleep(0.2)
    raise AssertionError(f"buildah containers: {done.stderr}")


def wait_for(condition: Callable[[], object], what: str, seconds: float = 600) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not in {seconds:g} s: {what}")


def running_probe(build: Build) -> tuple[str, str, list[int]] | None:
    """(the name of the probe's working container, its mount point, the probe's processes), once ``build``'s probe
    runs in it."""
    prefix = f"imagectl-run-{build.process.pid}."
    mine = [c["containername"] for c in containers() if c["containername"].startswith(prefix)]
    probes = probe_processes(build.process.pid)
    return (mine[0], mountpoint_of(mine[0]), probes) if mine and probes else None


def probe_processes(build_pid: int) -> list[int]:
    """The compile probe's processes under the build process ``build_pid``."""
    return [pid for pid in descendants(build_pid) if b"compile_probe.py" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie is not: it waits for its reaper)."""
    found = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            found.append(pid)
    return found


def mountpoint_of(name: str) -> str:
    done = subprocess.run(["buildah", "inspect", "--type", "container", name], capture_output=True, text=True,
                          check=False)
    return json.loads(done.stdout)["MountPoint"] if done.returncode == 0 else ""


def report(what: str, seconds: float) -> None:
    print(f"\n[measured] {what}: {seconds:.1f} s", file=sys.__stdout__, flush=True)


def test_a_failing_system_build_stops_the_downloads_and_leaves_nothing(world, index, wheels):
    (world.folder / "templates" / "frameworks" / "torch.j2").write_text(FAILING_PARTIAL)
    build = start_build(world.folder)
    code, ended = build.finish(600)
    failed_at = build.when(lambda line: line.rstrip().endswith(FAILS) and '"' not in line)
    assert failed_at is not None, build.text()[-3000:]
    report("a failing system build: from the partial's failure to the exit", ended - failed_at)

    assert code == 1, build.text()[-3000:]
    errors = [line for _, line in build.lines if line.startswith(f"imagectl: {PROFILE}: build: ")]
    assert len(errors) == 1 and "build failed: " in errors[0] and "false" in errors[0], build.text()[-3000:]
    assert "Traceback" not in build.text()
    # the index was still sending wheels when the build failed: it never sent all of the lock's
    sent = {canonicalize_name(name.split("-")[0]) for name in index.server.full_downloads()}
    assert index.wheel_requests(), "no download had started"
    assert len(world.locked) > 10 and set(world.locked) - sent, (world.locked, sent)
    lock_bytes = sum(p.stat().st_size for p in wheels.glob("*.whl")
                     if canonicalize_name(p.name.split("-")[0]) in world.locked)
    print(f"[measured] the slow index sent {index.sent} of the lock's {lock_bytes} wheel bytes, "
          f"{len(sent)} of its {len(world.locked)} wheels whole", file=sys.__stdout__, flush=True)
    # nothing left: the assemble folder, partial downloads, working containers (buildah bud --force-rm)
    assert world.contexts == [] and world.partial_downloads == []
    assert containers() == []


@pytest.mark.parametrize("phase", ["system build", "assembling"])
def test_ctrl_c_at_any_phase_exits_130_with_one_line_and_leaves_nothing(world, index, phase):
    build = start_build(world.folder)
    if phase == "system build":  # the wheels are coming and buildah bud runs
        wait_for(lambda: index.wheel_requests() and build.when(lambda line: "STEP" in line), "downloads and bud")
        probes = []
    else:  # the system image is built, the probe runs in its container, the layers are being written
        _, _, probes = wait_for(lambda: running_probe(build), "the probe running in its container")
    assert build.process.poll() is None
    sent = time.monotonic()
    build.process.send_signal(signal.SIGINT)
    code, ended = build.finish(120)
    report(f"Ctrl-C during the {phase}: from SIGINT to the exit", ended - sent)

    assert code == 130, build.text()[-3000:]
    shown = [line for _, line in build.lines if line.strip()]
    assert shown[-1] == "imagectl: interrupted", shown[-5:]
    assert "Traceback" not in build.text() and not [line for line in shown if line.startswith(f"imagectl: {PROFILE}")]
    assert world.contexts == [] and world.partial_downloads == []
    assert containers() == []  # the probe's removed, bud's --force-rm'd
    assert alive(probes) == []


def test_kill_9_leaves_what_the_sweep_and_the_next_build_remove_and_the_probe_dies_with_it(world, index, run_cli):
    killed = kill_9_while_the_probe_runs(world)
    listed = run_cli("sweep", "--dry-run", "--json")
    assert listed.code == 0, listed.err
    found = {(e["kind"], e["name"]) for e in json.loads(listed.out)["leftovers"]}
    assert ("container", killed["container"]) in found, found
    assert ("work folder", killed["folder"]) in found, found
    assert {e["status"] for e in json.loads(listed.out)["leftovers"]} == {"would remove"}
    assert [c["containername"] for c in containers()] == [killed["container"]]  # a dry run removes nothing

    swept = run_cli("sweep", "--json")
    assert swept.code == 0, swept.err
    removed = {(e["kind"], e["name"]) for e in json.loads(swept.out)["leftovers"] if e["status"] == "removed"}
    assert removed == found
    assert containers() == [] and world.contexts == [] and world.partial_downloads == []
    assert not os.path.ismount(killed["mountpoint"])

    # again, and this time the next build (the index fast again) is what removes them
    killed = kill_9_while_the_probe_runs(world)
    index.slow.clear()
    build = start_build(world.folder)
    code, _ = build.finish(900)
    assert code == 0, build.text()[-3000:]
    assert "removed what builds killed earlier left: 1 container" in build.text(), build.text()[-3000:]
    assert [c["containername"] for c in containers()] == []
    assert world.contexts == [] and world.partial_downloads == []


def kill_9_while_the_probe_runs(world: World) -> dict[str, str]:
    """Start a build, ``kill -9`` it while its probe runs and wheels are coming; check what it left and that the
    probe ended without it.  Its container, mount point and work folder."""
    build = start_build(world.folder)
    container, mountpoint, probes = wait_for(lambda: running_probe(build), "the probe running in its container")
    build.process.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    build.finish(60)
    assert [c["containername"] for c in containers()] == [container]  # left behind
    [folder] = [name for name in world.contexts if name.startswith(f"{build.process.pid}.")]
    wait_for(lambda: not alive(probes), "the probe ending after its parent", seconds=120)
    report("kill -9: from the kill to the probe's end", time.monotonic() - killed_at)
    print(f"[measured] after kill -9, the container's root is {'still' if os.path.ismount(mountpoint) else 'not'} "
          "a mount point", file=sys.__stdout__, flush=True)
    return {"container": container, "mountpoint": mountpoint,
            "folder": str(world.cache / "imagectl" / "contexts" / folder)}
