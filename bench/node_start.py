"""How long a cold node waits for the torch 2.3 image: from an empty engine store to ``python -c "import torch"``
done in a new container, for imagectl's image, the hand-written Dockerfile's image and imagectl's image with zstd
asked, on the Docker engine and on containerd, in one run (issue 35, item 5).

    python3 bench/node_start.py [--engines docker,containerd] [--runs 1] [--scale 50] [--real]

Images, built once before anything is timed and pushed to one loopback registry (the stand-in
``nvidia/cuda:12.1.1-base-ubuntu22.04`` mirrored into it, as in ``bench/push_speed.py``, whose building blocks
these are):

- ``handwritten``: push_speed's ``baseline``: ``FROM`` the same base by digest, the JIT packages, a venv and ONE
  ``pip install --require-hashes --no-deps -r`` of the lock imagectl renders; ``docker build``, ``docker push``
  (Docker 20.10: gzip, Docker's media types).
- ``imagectl``: ``imagectl build torch-2.3-cu121-py3.11`` with ``[build] engine = "buildah"`` (the assembled
  path) in empty containers-storage, ``[registry] compression`` left at its default.
- ``imagectl-zstd``: the same with ``[registry] compression = "zstd"``: every layer zstd, those imagectl writes
  itself included.  The ``layers`` column and the per-layer listing say what the registry holds, layer by layer
  (from the manifest's media types).

Engines; every row runs on a cold node of its own, started on an empty store and deleted after:

- ``docker``: a ``dockerd`` of the bench's own (the same Debian docker.io as the shared daemon) with its own
  ``--data-root``, ``--exec-root``, socket and pidfile, a bridge of its own (never docker0: ``--bridge none`` deletes
  it) and no iptables rules.  The shared daemon cannot be emptied: it holds the stand-in base's layers for the test
  suite, and images with imagectl's reproducible system layers, either of which would make a pull skip layers.
  ``docker pull REF``, then ``docker run --network none REF python -c "import torch"``.
- ``containerd``: Debian's ``containerd`` with its own ``--root``, ``--state`` and ``--address`` socket (and a config
  without the CRI plugin), not dockerd's.  ``ctr image pull --plain-http REF`` (fetch, then unpack into overlayfs),
  then ``ctr run REF ID python -c "import torch"``.

Columns: pull s (the pull command's wall time: download, decompression, unpack), run s (``run`` to the command's
exit: container created and started, the image's entrypoint, the import), total, ratio (total over the hand-written
image's total on the same engine in the same run), compressed MB and layers (the pushed manifest: the sum, the count
and the largest layer), unpacked MB (what the engine's layer store holds after the pull: ``du -sb`` of dockerd's
``overlay2`` or of containerd's overlayfs snapshots; containerd also keeps the compressed blobs, not counted),
compression (layers by compression, as the registry has them), cores (``os.cpu_count()``).  With ``--runs N`` the
rows are measured N times, interleaved, and the run of median total is shown.  A pull or run that fails is one
line in its row (Docker before 23.0 cannot unpack zstd layers).  Target (printed, never asserted; the exit status
is 0 whenever the bench ran): node start at most 0.5x the hand-written image's on both engines.

Default mode (stand-in): stand-in wheels at 1/SCALE of PyPI's sizes (``bench/layers.py``'s ``PYPI_WHEELS``), so the
lock layers weigh 1/SCALE and the real-size base and JIT layers dominate; "import torch" imports the stand-in
``torch`` (``tests/integration/support/wheels.py``'s ``torch_standin_files``: version modules and a list-of-floats
tensor).  10-13 minutes on the shared 2-core VM (about 7 of them building); its ratios do not decide the target.
``--real``: PyPI's wheels (~3 GB of gzip, ~6 GB unpacked per image), still on the stand-in base; not run yet: an
estimated 30-60 minutes and ~25 GB of free disk at the peak (the three images in the registry, the hand-written one
in the shared dockerd, one node).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fixture  # noqa: E402
import layers  # noqa: E402
import push_speed  # noqa: E402

PROFILE = push_speed.PROFILE
COMMAND = ("python", "-c", "import torch")
TARGET = 0.5
ENGINES = ("docker", "containerd")
NAMESPACE = "imagectl-bench"  # containerd's namespace on the bench's own containerd
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Image:
    key: str  # also the registry namespace it is pushed under
    label: str
    compression: str = ""  # [registry] compression written for an imagectl build; "": imagectl's default


IMAGES = (
    Image("handwritten", "hand-written Dockerfile"),
    Image("imagectl", "imagectl (buildah)"),
    Image("imagectl-zstd", "imagectl (buildah), zstd", "zstd"),
)
BASELINE = IMAGES[0].key


@dataclass(frozen=True)
class Layer:
    size: int  # compressed, as pushed
    compression: str  # gzip | zstd | none, from the manifest's media type
    what: str  # a short name from the image config's history


@dataclass(frozen=True)
class Pushed:
    image: Image
    ref: str  # host/repository:latest
    layers: tuple[Layer, ...]


@dataclass(frozen=True)
class Timing:
    engine: str
    image: str  # Image.key
    pull: float | None = None
    run: float | None = None
    unpacked: int | None = None
    error: str = ""  # one line: what failed

    @property
    def total(self) -> float | None:
        return None if self.pull is None or self.run is None else self.pull + self.run


# --------------------------------------------------------------------------------------------- pure helpers


def layer_summary(layer_list: Sequence[Layer]) -> str:
    """The layers by compression, most first: ``"5 gzip + 3 zstd"``."""
    counts: dict[str, int] = {}
    for layer in layer_list:
        counts[layer.compression] = counts.get(layer.compression, 0) + 1
    return " + ".join(f"{n} {name}" for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def median_timing(timings: Sequence[Timing]) -> Timing:
    """The run of median total (the lower one of an even count); a failed run, if any, stands for the row."""
    failed = [t for t in timings if t.total is None]
    if failed:
        return failed[0]
    ordered = sorted(timings, key=lambda t: t.total or 0.0)
    return ordered[(len(ordered) - 1) // 2]


def ratio(timing: Timing, timings: Sequence[Timing]) -> float | None:
    """``timing``'s total over the hand-written image's on the same engine; None where either has no total."""
    base = next((t for t in timings if t.engine == timing.engine and t.image == BASELINE), None)
    if base is None or not base.total or timing.total is None:
        return None
    return timing.total / base.total


def _num(value: float | None, width: int, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def table(timings: Sequence[Timing], pushed: dict[str, Pushed], cores: int) -> list[str]:
    """The report's rows, one per (engine, image), with a header line."""
    lines = [f"{'engine':10} {'image':26} {'pull s':>7} {'run s':>6} {'total s':>7} {'ratio':>5} {'compr MB':>8} "
             f"{'unpacked MB':>11} {'layers':>6} {'largest MB':>10} {'cores':>5}  compression"]
    for t in timings:
        image = pushed[t.image]
        sizes = [layer.size for layer in image.layers]
        unpacked = None if t.unpacked is None else t.unpacked / 1e6
        lines.append(f"{t.engine:10} {image.image.label:26} {_num(t.pull, 7)} {_num(t.run, 6)} {_num(t.total, 7)} "
                     f"{_num(ratio(t, timings), 5, 2)} {sum(sizes) / 1e6:8.1f} {_num(unpacked, 11)} {len(sizes):6d} "
                     f"{max(sizes, default=0) / 1e6:10.1f} {cores:5d}  {layer_summary(image.layers)}"
                     + (f"  FAILED: {t.error}" if t.error else ""))
    return lines


def verdicts(timings: Sequence[Timing], pushed: dict[str, Pushed], real: bool) -> list[str]:
    """The target line, then one line per engine and imagectl image: its ratio against the target (printed, never
    asserted)."""
    lines = [f"target: node start at most {TARGET}x the hand-written image's, on each engine"
             + ("" if real else " (stand-in figures: the target is defined on the real image)")]
    for t in timings:
        if t.image == BASELINE:
            continue
        r = ratio(t, timings)
        verdict = (f"{r:.2f}x  {'met' if r <= TARGET else 'NOT met'}" if r is not None
                   else f"failed: {t.error.split(':', 1)[0]} (see its row)" if t.error else "not measured")
        lines.append(f"  {t.engine:10} {pushed[t.image].image.label:26} {verdict}")
    return lines


def engine_versions(engines: Sequence[str]) -> str:
    """The engines' versions, and whether gzip is decompressed by unpigz (both use it when it is on PATH)."""
    argv = {"docker": ["dockerd", "--version"], "containerd": ["containerd", "--version"]}
    found = []
    for engine in engines:
        proc = subprocess.run(argv[engine], capture_output=True, text=True, check=False)
        words = proc.stdout.split()  # "Docker version 20.10.24+dfsg1, build ..." / "containerd github.com/... 1.6.20"
        found.append(f"{argv[engine][0]} {words[2].rstrip(',')}" if len(words) > 2 else f"{argv[engine][0]}: ?")
    unpigz = shutil.which("unpigz")
    return "; ".join(found) + f"; unpigz: {unpigz or 'not on PATH (gzip is decompressed in Go)'}"


def error_line(output: str) -> str:
    """The line of a failed command's ``output`` that says why: the last one that names an error, else the last
    one; at most 200 characters."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    named = [line for line in lines if "error" in line.lower()]
    return ((named or lines or ["(no output)"])[-1])[:200]


# --------------------------------------------------------------------------------------------- the images


def build_handwritten(bench: push_speed.Bench, state: push_speed.Fresh) -> str:
    """Build and push the hand-written Dockerfile's image (push_speed's baseline); its reference."""
    from tests.integration.support.engine import push_to_registry

    host = state.setup.registry_host
    lock, index = push_speed.baseline_lock(bench, state)
    base = f"{host}/{push_speed.BASE_REPOSITORY}@{state.base_digest}"
    context = state.folder / "handwritten"
    _fixture.write_handwritten_context(context, base=base, lock=lock, index=index, real=bench.real)
    local = f"{host}/{BASELINE}/handwritten:build"
    push_speed.consume(bench.client.api.build(path=str(context), tag=local, rm=True, forcerm=True,
                                              network_mode="host", decode=True), "docker build")
    push_to_registry(bench.client, local, host, f"{BASELINE}/handwritten:latest")
    return f"{host}/{BASELINE}/handwritten:latest"


def build_imagectl(bench: push_speed.Bench, state: push_speed.Fresh, image: Image) -> str:
    """``imagectl build`` with buildah in empty containers-storage, ``[registry] compression`` from ``image``;
    its reference."""
    push_speed.drop_storage(state.folder / "runner", state.env)
    state.env = push_speed.storage_env(state.folder / "runner")
    project = state.folder / f"project-{image.key}"
    build = {"engine": '"buildah"'}
    if bench.real:
        build["ca_bundle"] = f'"{_fixture.CA_BUNDLE}"'
    registry = {"compression": f'"{image.compression}"'} if image.compression else None
    _fixture.write_config(state.setup, project, push=True, namespace=image.key, registry=registry, build=build)
    push_speed.imagectl_build(state, project, PROFILE)
    return f"{state.setup.registry_host}/{image.key}/{PROFILE}:latest"


def registry_layers(state: push_speed.Fresh, repository: str) -> tuple[Layer, ...]:
    """The layers of ``repository:latest`` as the registry holds them: size, compression, what made them."""
    from imagectl.registry.manifest import LAYER_COMPRESSION

    host = state.setup.registry_host
    base_layers = len(push_speed.manifest_layers(host, push_speed.BASE_REPOSITORY, state.base_digest))
    named = layers.pushed_image(host, repository, base_layers).layers
    descriptors = push_speed.manifest_layers(host, repository)
    return tuple(Layer(d.size, LAYER_COMPRESSION.get(d.media_type, d.media_type) or "none", n.what)
                 for d, n in zip(descriptors, named, strict=True))


def build_images(bench: push_speed.Bench, state: push_speed.Fresh) -> dict[str, Pushed]:
    out = {}
    for image in IMAGES:
        started = time.perf_counter()
        ref = build_handwritten(bench, state) if image.key == BASELINE else build_imagectl(bench, state, image)
        repository = ref.split("/", 1)[1].rsplit(":", 1)[0]
        out[image.key] = Pushed(image, ref, registry_layers(state, repository))
        print(f"  built and pushed {image.label}: {ref} in {time.perf_counter() - started:.0f} s")
    push_speed.drop_storage(state.folder / "runner", state.env)
    state.env = push_speed.storage_env(state.folder / "runner")
    return out


# --------------------------------------------------------------------------------------------- cold nodes


@dataclass(frozen=True)
class Node:
    """A cold node: an engine of the bench's own on an empty store, and its CLI pointed at it."""
    engine: str
    cli: tuple[str, ...]
    store: Path  # the engine's unpacked layers (du -sb after a pull)


def wait_for(argv: list[str], process: subprocess.Popen, log: Path) -> None:
    """Wait until ``argv`` succeeds (the engine answers); SystemExit with the log's tail when it does not."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{argv[0]}'s engine exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.3)
    raise SystemExit(f"the engine behind {shlex.join(argv)} did not answer in {START_TIMEOUT:.0f} s:\n"
                     f"{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen, pidfile: Path | None = None) -> None:
    """End an engine the bench started (SIGTERM, then SIGKILL after 30 s); also the supervised containerd a
    dockerd names in ``pidfile`` when it is still alive."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if pidfile is not None and pidfile.exists():
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def unmount_under(folder: Path) -> None:
    mounted = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
               if line.split()[1].startswith(str(folder) + "/")]
    for target in sorted(mounted, key=len, reverse=True):
        subprocess.run(["umount", target], capture_output=True, check=False)


@contextmanager
def docker_node(folder: Path) -> Iterator[Node]:
    """A dockerd of its own on an empty data root under ``folder``, with its own exec root, socket and pidfile."""
    folder.mkdir(parents=True)
    (folder / "daemon.json").write_text("{}\n")
    socket = folder / "docker.sock"
    # A bridge of its own: a second dockerd started with --bridge none deletes the host's docker0 (which the shared
    # daemon and the test suite's containers use); rows run with --network none, so the bridge carries nothing.
    bridge = f"imgnode{os.getpid() % 10000}"
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True, capture_output=True)
    argv = ["dockerd", "--config-file", str(folder / "daemon.json"), "--data-root", str(folder / "data"),
            "--exec-root", str(folder / "exec"), "--pidfile", str(folder / "docker.pid"), "-H", f"unix://{socket}",
            "--bridge", bridge, "--iptables=false", "--ip-forward=false", "--ip-masq=false",
            "--storage-driver", "overlay2", "--containerd-namespace", NAMESPACE,
            "--containerd-plugins-namespace", f"{NAMESPACE}-plugins"]
    log = folder / "dockerd.log"
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    cli = ("docker", "-H", f"unix://{socket}")
    try:
        wait_for([*cli, "version"], process, log)
        yield Node("docker", cli, folder / "data" / "overlay2")
    finally:
        stop(process, folder / "exec" / "containerd" / "containerd.pid")
        unmount_under(folder)
        subprocess.run(["ip", "link", "delete", bridge], check=False, capture_output=True)


CONTAINERD_CONFIG = """\
version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
"""


@contextmanager
def containerd_node(folder: Path) -> Iterator[Node]:
    """Debian's containerd with its own root, state and socket under ``folder`` (no CRI plugin), not dockerd's."""
    folder.mkdir(parents=True)
    root, state, socket = folder / "root", folder / "state", folder / "containerd.sock"
    (folder / "config.toml").write_text(CONTAINERD_CONFIG.format(root=root))
    argv = ["containerd", "--config", str(folder / "config.toml"), "--root", str(root), "--state", str(state),
            "--address", str(socket)]
    log = folder / "containerd.log"
    with log.open("w") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    cli = ("ctr", "--address", str(socket), "--namespace", NAMESPACE)
    try:
        wait_for([*cli, "version"], process, log)
        yield Node("containerd", cli, root / "io.containerd.snapshotter.v1.overlayfs")
    finally:
        stop(process)
        unmount_under(folder)


NODES = {"docker": docker_node, "containerd": containerd_node}


def pull_argv(node: Node, ref: str) -> list[str]:
    if node.engine == "docker":
        return [*node.cli, "pull", ref]
    return [*node.cli, "image", "pull", "--plain-http", ref]


def run_argv(node: Node, ref: str, name: str) -> list[str]:
    if node.engine == "docker":
        return [*node.cli, "run", "--network", "none", "--name", name, ref, *COMMAND]
    return [*node.cli, "run", ref, name, *COMMAND]


def timed(argv: list[str], log: Path) -> tuple[float, str]:
    """Run ``argv`` (its output appended to ``log``); (seconds, "" or ``exit N: <its last line of output>``)."""
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {shlex.join(argv)}\n")
        out.flush()
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode == 0:
        return seconds, ""
    output = log.read_text().rsplit(f"$ {shlex.join(argv)}\n", 1)[-1]
    return seconds, f"exit {proc.returncode}: {error_line(output)}"


def disk_usage(path: Path) -> int | None:
    proc = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    return int(proc.stdout.split()[0]) if proc.returncode == 0 and proc.stdout else None


def measure(engine: str, pushed: Pushed, folder: Path, number: int) -> Timing:
    """Pull and run ``pushed`` on a cold ``engine`` node in ``folder`` (deleted after)."""
    log = folder.parent / f"{folder.name}.log"
    try:
        with NODES[engine](folder) as node:
            pull, error = timed(pull_argv(node, pushed.ref), log)
            if error:
                return Timing(engine, pushed.image.key, error=f"pull {error}")
            unpacked = disk_usage(node.store)
            run, error = timed(run_argv(node, pushed.ref, f"node-start-{number}"), log)
            if error:
                return Timing(engine, pushed.image.key, pull, unpacked=unpacked, error=f"run {error}")
            return Timing(engine, pushed.image.key, pull, run, unpacked)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)


# --------------------------------------------------------------------------------------------- main


def layer_listing(pushed: dict[str, Pushed]) -> list[str]:
    """Each image's layers as the registry holds them, in order: size, compression, what made it."""
    lines = []
    for image in pushed.values():
        total = sum(layer.size for layer in image.layers)
        lines.append(f"{image.image.label}: {image.ref}: {len(image.layers)} layers, {total / 1e6:.1f} MB")
        lines += [f"  {layer.size / 1e6:9.1f} MB  {layer.compression:5}  {layer.what}" for layer in image.layers]
    return lines


def measure_all(pushed: dict[str, Pushed], engines: list[str], runs: int,
                nodes: Path) -> list[Timing]:
    """Every (engine, image) ``runs`` times, interleaved; the run of median total of each."""
    seen: dict[tuple[str, str], list[Timing]] = {(e, i.key): [] for e in engines for i in IMAGES}
    for number in range(runs):
        for engine in engines:
            for image in IMAGES:
                load = os.getloadavg()[0]
                t = measure(engine, pushed[image.key], nodes / f"{engine}-{image.key}-{number}", number)
                seen[(engine, image.key)].append(t)
                what = t.error or f"pull {t.pull:.1f} s, run {t.run:.1f} s"
                print(f"  run {number + 1}: {engine}, {image.label}: {what} (load average {load:.1f})")
    return [median_timing(timings) for timings in seen.values()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of: {', '.join(ENGINES)}")
    parser.add_argument("--runs", type=int, default=1, help="measure every row N times, interleaved; the median")
    parser.add_argument("--scale", type=int, default=50, help="stand-in wheels weigh 1/SCALE of the real ones")
    parser.add_argument("--real", action="store_true", help="real wheels from PyPI (an estimated 30-60 minutes)")
    args = parser.parse_args()
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not engines:
        parser.error(f"--engines: unknown {', '.join(unknown) or '(none given)'}; engines are {', '.join(ENGINES)}")
    if args.runs < 1:
        parser.error(f"--runs: {args.runs}: at least 1")
    started, cores = time.perf_counter(), os.cpu_count() or 0
    print("$", shlex.join([sys.executable, *sys.argv]))
    print(time.strftime("%Y-%m-%d %H:%M %Z"), f"load average {os.getloadavg()[0]:.2f}, {cores} cores,",
          "real wheels (PyPI)" if args.real else f"stand-in wheels at 1/{args.scale}")
    print(engine_versions(engines))
    with ExitStack() as stack:
        bench = push_speed.prepare(stack, args.real, args.scale)
        nodes = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="imagectl-node-",
                                                                     ignore_cleanup_errors=True)))
        with push_speed.fresh(bench, "images") as state:
            pushed = build_images(bench, state)
            timings = measure_all(pushed, engines, args.runs, nodes)
    print()
    print("\n".join(table(timings, pushed, cores)))
    print()
    print("\n".join(layer_listing(pushed)))
    print()
    print("\n".join(verdicts(timings, pushed, args.real)))
    print(f"{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
