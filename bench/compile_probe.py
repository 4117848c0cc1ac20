"""What the compile probe's waiting container saves (issue 35, item 3): the time from "every ``.py`` file is staged"
to "their ``.pyc`` files are there", with the probe already waiting in a container against a container started at
that moment, with the engine's store idle and while a layer is being staged into it (as in a build: the lock layers
are staged while the ``.pyc`` files are made).

    python3 bench/compile_probe.py [--runs 5] [--files 600] [--layer-mb 400]

The system image is the integration tests' stand-in rootfs (Debian bookworm with python3, cached by
tests/integration/support/engine.py), pulled into buildah's store from the Docker engine.  The sources are the first
FILES ``.py`` files of this Python's standard library (a different Python compiles them: the image's), staged under
``/opt/bench/lib``.  The probe is :mod:`imagectl.assemble.probe.compile_probe`, run as a file, mounted, with buildah
(``BuildahEngine.run_mounted``, as a build runs it).  Variants, interleaved, each timed from the moment the sources
file is written (a waiting probe) or the container is asked for (a new one) to the moment ``probe.json`` appears:

- ``waiting, store idle``: the probe started earlier and waits for the sources (what builds do today); the baseline;
- ``new container, store idle``: ``buildah from`` + ``run`` of the probe after the sources are there;
- ``waiting, store busy`` and ``new container, store busy``: the same while ``containers-storage import-layer``
  stages a layer of LAYER_MB MB of incompressible bytes (``LayoutEngine.stage_layer``), started a second before.

Prints one row per variant (median seconds of the runs, ratio to the baseline).  Asserts nothing.  Needs root,
buildah, containers-storage and the Docker engine (for the stand-in rootfs).  The image ``localhost/imagectl-bench-
probe`` and the staged layers are removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from imagectl.assemble.compile import PROBE_FILE, VENV_FILE, probe_argv, probe_folder, write_sources  # noqa: E402
from imagectl.engine.buildah import BuildahEngine  # noqa: E402
from tests.integration.support.engine import ensure_dockerd, rootfs_image  # noqa: E402

IMAGE = "localhost/imagectl-bench-probe"
SITE = "/opt/bench/lib"
PYTHON = "/usr/bin/python3"
VARIANTS = ("waiting, store idle", "new container, store idle", "waiting, store busy", "new container, store busy")


def system_image() -> str:
    """The stand-in rootfs in buildah's store as IMAGE; its id."""
    ref = rootfs_image(ensure_dockerd(), "bookworm")
    subprocess.run(["buildah", "pull", "--quiet", f"docker-daemon:{ref}"], check=True, capture_output=True)
    subprocess.run(["buildah", "tag", ref, IMAGE], check=True, capture_output=True)
    return IMAGE


def stdlib_sources(count: int) -> list[Path]:
    """The first ``count`` ``.py`` files of this Python's standard library, tests and site-packages left out."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found = sorted(p for p in root.rglob("*.py") if not {"test", "tests", "site-packages", "idlelib"} & set(p.parts))
    return found[:count]


def stage_sources(stage: Path, files: list[Path]) -> list[str]:
    """Copy ``files`` under ``stage`` at their paths in the image (under SITE); those paths."""
    root, paths = Path(sysconfig.get_paths()["stdlib"]), []
    for source in files:
        inside = f"{SITE}/{source.relative_to(root)}"
        target = stage / inside.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        paths.append(inside)
    return paths


def random_layer(path: Path, megabytes: int) -> str:
    """An uncompressed layer tar of ``megabytes`` MB of random bytes at ``path``; its diff_id."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for n in range(megabytes // 16):
            data = os.urandom(16 << 20)
            info = tarfile.TarInfo(f"opt/bench/blob-{n}.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def appears(path: Path, timeout: float = 600) -> float:
    """Wait (polling every 50 ms, as the build does) until ``path`` exists; the time it was seen."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: no {path.name} within {timeout:g} s")
        time.sleep(0.05)
    return time.monotonic()


def one_run(engine: BuildahEngine, image: str, work: Path, files: list[Path], variant: str,
            layer: tuple[Path, str] | None) -> float:
    """Seconds from the sources being ready to the probe's answer, for ``variant``."""
    stage, folder = work / "stage", probe_folder(work / "probe")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    sources = stage_sources(stage, files)
    argv, mounts = probe_argv(PYTHON, folder, stage, 600)
    with ThreadPoolExecutor(2) as pool:
        running: Future[tuple[int, str]] | None = None
        if variant.startswith("waiting"):
            running = pool.submit(engine.run_mounted, image, argv, mounts, timeout=900)
            appears(stage / VENV_FILE)
        staging = None
        if layer is not None:
            staging = pool.submit(engine.stage_layer, [layer[1]], lambda: layer[0])
            time.sleep(1.0)  # the import is under way
        started = time.monotonic()
        if running is not None:
            write_sources(stage, sources)
        else:
            write_sources(stage, sources)
            running = pool.submit(engine.run_mounted, image, argv, mounts, timeout=900)
        done = appears(stage / PROBE_FILE)
        status, output = running.result()
        if status != 0:
            raise SystemExit(f"bench: the probe failed (exit {status}): {output[-2000:]}")
        if staging is not None:
            staging.result()
    engine.discard_staged()
    return done - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--files", type=int, default=600)
    parser.add_argument("--layer-mb", type=int, default=400)
    args = parser.parse_args()
    engine = BuildahEngine()
    image = system_image()
    files = stdlib_sources(args.files)
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-probe-") as tmp:
        work = Path(tmp)
        try:
            for run in range(args.runs):
                for variant in VARIANTS:
                    layer = None
                    if variant.endswith("busy"):
                        blob = work / "layer.tar"
                        layer = (blob, random_layer(blob, args.layer_mb))  # a new layer each time: imported anew
                    times[variant].append(one_run(engine, image, work, files, variant, layer))
                    print(f"run {run + 1} {variant}: {times[variant][-1]:.2f} s", file=sys.stderr, flush=True)
        finally:
            subprocess.run(["buildah", "rmi", IMAGE], capture_output=True, check=False)
    base = statistics.median(times[VARIANTS[0]])
    print(f"{len(files)} .py files, layer {args.layer_mb} MB, {args.runs} runs, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'variant':34} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio':>6}")
    for variant in VARIANTS:
        values = times[variant]
        print(f"{variant:34} {statistics.median(values):9.2f} {min(values):7.2f} {max(values):7.2f} "
              f"{statistics.median(values) / base:6.2f}")
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    sys.exit(main())
