"""The first build and push of the torch 2.3 image with imagectl (Docker engine; buildah with gzip and with zstd
layers) against a hand-written Dockerfile built and pushed with Docker, each from a fresh state, in one run; and
the bytes a node moving from torch 2.3.0 to 2.3.1 pulls when each image was built on a fresh runner (issue 19, 6).

    python3 bench/push_speed.py [--rows baseline,docker,buildah-gzip,buildah-zstd,upgrade] [--scale 50] [--real]

Rows (``--rows`` picks them; each one starts from a fresh state and pushes to a registry of its own):

- ``baseline``: a hand-written Dockerfile, what a person writes for the same image: ``FROM`` the same base by
  digest, ``apt-get install`` of the JIT packages imagectl's image carries (gcc, g++, python3.11-dev), a venv, and
  ``pip install --require-hashes --no-deps -r`` of the same lock in ONE layer (the lock is taken from ``imagectl
  render``, outside the timing: the baseline is handed the pins for free).  ``docker build`` (``nocache``) and
  ``docker push`` through the Docker SDK; Docker 20.10 pushes gzip.
- ``docker``: ``imagectl build --no-cache`` with ``[build] engine = "docker"`` (gzip).
- ``buildah-gzip`` / ``buildah-zstd``: ``imagectl build`` with ``[build] engine = "buildah"`` in empty
  containers-storage (``CONTAINERS_STORAGE_CONF`` naming a storage.conf with its own graphroot and runroot,
  overlay driver), ``[registry] compression = "gzip"`` / ``"zstd"``.
- ``docker-zstd`` (not run by default): ``engine = "docker"`` with ``compression = "zstd"``: the Docker engine
  ignores ``[registry] compression`` (``engine/select.py`` hands it to buildah only), so its layers stay gzip; the
  ``layers`` column shows what the registry got.  A probe, not counted for the time target.
- ``upgrade``: ``imagectl build torch-2.3.0-cu121-py3.11`` (A) with buildah in empty storage, the storage
  deleted, then ``imagectl build torch-2.3-cu121-py3.11`` (B, torch 2.3.1) in another empty storage, both to one
  registry (one namespace, gzip).  The pull fraction is the compressed bytes of B's layers whose digests A's
  manifest lacks, over all of B's layers (both manifests read from the registry): what a node holding A pulls
  where blobs are kept by digest; printed too, what a store keyed by each layer's chain pulls (every layer from the
  first one A lacks up).

Fresh state, per row: a new loopback registry (the stand-in base pushed to it as the ``docker.io`` mirror), a new
``XDG_CACHE_HOME`` (imagectl's build-time lock cache and uv's cache) and ``TMPDIR`` (buildah's cache mounts, the
OCI layout of a push), new empty containers-storage for buildah.  Docker cannot get a fresh daemon: its rows build
with no layer cache (``nocache``, ``--no-cache``), and every image a row made is removed (by id, with its parent
layers) as soon as its numbers are taken; the stand-in base's own layers stay in the daemon (the test suite's
stand-in images share them), so Docker rows do not pull the base (66 MB over loopback).  Each row's registry,
storage and folders are deleted when its numbers are taken.

Default mode (stand-in): the stand-in ``nvidia/cuda:12.1.1-base-ubuntu22.04`` (Debian bookworm, Python 3.11) and a
loopback index of stand-in wheels holding every version PyPI's locks of both releases pick, with PyPI's upload times
and Requires-Dist, of 1/SCALE of the real wheels' sizes (``bench/layers.py``'s ``PYPI_WHEELS``): the locks are
PyPI's.  A few minutes on the 2-core VM; its numbers do not decide the targets (defined on the real image).
``--real``: the real wheels from the profile's index (PyPI), ``[build] ca_bundle`` = the system CA bundle, still on
the stand-in base (Docker Hub is unreachable here); about 40 minutes and ~25 GB of free disk at the peak.

Columns: seconds (wall time of the whole ``imagectl build --json``, or of ``docker build`` + ``docker push``),
ratio to the baseline, the phases of ``build --json`` (lock, build, check, push, attest; ``other``: the rest),
pushed MB (``pushed_bytes`` of ``--json``; the Docker engine's is the progress its push events report, which is not
compressed bytes; the baseline's: its layers that are not the base's, which Docker mounts from the mirror
repository), image MB (the compressed layers of the pushed manifest), not base (of those, the ones whose digests
the mirrored base's manifest lacks: what had to be uploaded), layers (their compression).
Targets: the fastest imagectl row of torch 2.3.1 at most 0.5x the baseline; the upgrade pulls at most 30% of B.
Exit status 1 when a target that was measured is not met.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fixture  # noqa: E402
import layers  # noqa: E402

PROFILE = "torch-2.3-cu121-py3.11"  # torch 2.3.1 (B of the upgrade)
OLDER = "torch-2.3.0-cu121-py3.11"  # A of the upgrade
BASE = "nvidia/cuda:12.1.1-base-ubuntu22.04"  # the base of both
BASE_REPOSITORY = "hub/nvidia/cuda"  # its mirror in each row's registry (_fixture.mirror_bases)
CA_BUNDLE = _fixture.CA_BUNDLE
NAMESPACE = "bench"
TIME_TARGET = 0.5
PULL_TARGET = 0.30
PHASES = ("lock", "build", "check", "push", "attest")


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    engine: str  # docker | buildah
    compression: str = "gzip"


ROWS = {row.key: row for row in (
    Row("baseline", "hand-written Dockerfile", "docker"),
    Row("docker", "imagectl, Docker", "docker"),
    Row("buildah-gzip", "imagectl, buildah, gzip", "buildah"),
    Row("buildah-zstd", "imagectl, buildah, zstd", "buildah", "zstd"),
    Row("docker-zstd", "imagectl, Docker, zstd asked", "docker", "zstd"),
    Row("upgrade", "upgrade (buildah, gzip)", "buildah"),
)}
DEFAULT_ROWS = "baseline,docker,buildah-gzip,buildah-zstd,upgrade"

@dataclass
class Bench:
    client: object  # docker.DockerClient
    work: Path
    index_url: str  # "" with --real: the profile's own index
    real: bool
    scale: int


@dataclass
class Fresh:
    """One row's fresh state: its folder, registry (the base mirrored into it) and environment."""
    folder: Path
    setup: _fixture.Setup
    base_digest: str
    env: dict[str, str]


@dataclass
class Result:
    label: str
    engine: str
    seconds: float
    phases: dict[str, float]
    pushed: int  # pushed_bytes of --json (the baseline: its layers that are not the base's)
    image: int  # the compressed layers of the pushed manifest
    not_base: int  # of those, the layers whose digests the mirrored base lacks
    layers: str
    ratio_to: bool = True  # a first build and push of torch 2.3.1: counts for the time target


# --------------------------------------------------------------------------------------------- fresh state


def storage_env(folder: Path) -> dict[str, str]:
    """The environment of one runner: empty containers-storage, XDG cache and TMPDIR under ``folder``."""
    for name in ("storage", "cache", "tmp"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    conf = folder / "storage" / "storage.conf"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{folder}/storage/root"\n'
                    f'runroot = "{folder}/storage/run"\n')
    env = {k: v for k, v in _fixture.env().items() if not k.startswith("IMAGECTL_")}
    env.update(CONTAINERS_STORAGE_CONF=str(conf), XDG_CACHE_HOME=str(folder / "cache"), TMPDIR=str(folder / "tmp"))
    return env


def drop_storage(folder: Path, env: dict[str, str]) -> None:
    """Delete the runner's containers-storage (and everything else under ``folder``)."""
    if (folder / "storage" / "root").exists():
        for argv in (["buildah", "rm", "--all"], ["buildah", "rmi", "--all", "--force"]):
            subprocess.run(argv, env=env, capture_output=True, check=False)
        mounted = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                   if line.split()[1].startswith(str(folder) + "/")]
        for target in sorted(mounted, key=len, reverse=True):
            subprocess.run(["umount", target], capture_output=True, check=False)
    shutil.rmtree(folder, ignore_errors=True)


def remove_docker_images(client, host: str) -> None:
    """Remove every image a row made under its registry ``host`` (by id: its tags and untagged parent layers go
    too); the mirrored base is only untagged (the stand-in images of the tests hold it)."""
    import docker.errors

    for image in client.images.list():
        refs = [ref for ref in image.tags if ref.startswith(f"{host}/")]
        if not refs:
            continue
        try:
            if any(ref.startswith(f"{host}/hub/") for ref in refs):
                for ref in refs:
                    client.images.remove(ref)
            else:
                client.images.remove(image.id, force=True)
        except docker.errors.APIError as exc:
            print(f"  not removed: {refs}: {exc}")


@contextmanager
def fresh(bench: Bench, name: str) -> Iterator[Fresh]:
    """A fresh runner and registry for one row; everything removed on the way out."""
    from tests.integration.support.registry import start_registry

    folder = bench.work / name
    env = storage_env(folder / "runner")
    registry = start_registry(folder / "registry")
    try:
        digest = _fixture.mirror_bases(bench.client, registry.host, [PROFILE])[BASE]
        setup = _fixture.Setup(folder, registry.host, folder / "registry", bench.index_url)
        yield Fresh(folder, setup, digest, env)
    finally:
        registry.stop()
        remove_docker_images(bench.client, registry.host)
        drop_storage(folder / "runner", env)
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------------------------- measuring


def manifest_layers(host: str, repository: str, reference: str = "latest") -> list:
    from imagectl.registry import RegistryClient

    with RegistryClient(host, insecure=True) as client:
        return client.get_manifest(repository, reference).layers()


def compression_of(descriptors: list) -> str:
    from imagectl.registry.manifest import LAYER_COMPRESSION

    return "+".join(sorted({LAYER_COMPRESSION.get(d.media_type, d.media_type) or "none" for d in descriptors}))


def write_project(bench: Bench, state: Fresh, row: Row) -> Path:
    project = state.folder / "project"
    build = {"engine": f'"{row.engine}"'}
    if bench.real:
        build["ca_bundle"] = f'"{CA_BUNDLE}"'
    _fixture.write_config(state.setup, project, push=True, namespace=NAMESPACE,
                          registry={"compression": f'"{row.compression}"'}, build=build)
    return project


def imagectl_build(state: Fresh, project: Path, profile: str, flags: tuple[str, ...] = ()) -> tuple[float, dict]:
    """Run ``imagectl build PROFILE --json`` in ``project``; (seconds, the result of the profile)."""
    argv = [*_fixture.imagectl(project, "build", profile, "--json", "--progress", "plain"), *flags]
    log = state.folder / f"build-{profile}.log"
    start = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.run(argv, cwd=project, env=state.env, stdout=subprocess.PIPE, stderr=err, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} failed (exit {proc.returncode}):\n{log.read_text()[-4000:]}")
    document = json.loads(proc.stdout)
    result = (document.get("results") or [document])[0]
    keep_evidence(state, profile, proc.stdout, result)
    return seconds, result


def keep_evidence(state: Fresh, profile: str, document: str, result: dict) -> None:
    """With ``IMAGECTL_BENCH_KEEP=DIR``: the build's ``--json`` document, its log and ``pip freeze`` in the image (run
    in the row's storage or daemon before it is deleted) go to DIR, for a report by hand."""
    keep = os.environ.get("IMAGECTL_BENCH_KEEP")
    if not keep:
        return
    folder = Path(keep)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{state.folder.name}-{profile}-{int(time.time())}"
    (folder / f"{stem}.json").write_text(document)
    shutil.copy(state.folder / f"build-{profile}.log", folder / f"{stem}.log")
    ref = f"{result['repository']}:{result['tag']}"
    if result.get("engine") == "docker":
        freeze = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "/opt/venv/bin/pip",
                                 ref, "freeze"], env=state.env, capture_output=True, text=True)
        (folder / f"{stem}.freeze").write_text(freeze.stdout + freeze.stderr)
        return
    made = subprocess.run(["buildah", "from", "--pull-never", ref], env=state.env, capture_output=True, text=True)
    if made.returncode != 0:
        (folder / f"{stem}.freeze").write_text(f"buildah from {ref} failed: {made.stderr}")
        return
    container = made.stdout.strip().splitlines()[-1]
    freeze = subprocess.run(["buildah", "run", container, "/opt/venv/bin/pip", "freeze"], env=state.env,
                            capture_output=True, text=True)
    (folder / f"{stem}.freeze").write_text(freeze.stdout + freeze.stderr)
    subprocess.run(["buildah", "rm", container], env=state.env, capture_output=True)


def imagectl_row(bench: Bench, row: Row) -> Result:
    with fresh(bench, row.key) as state:
        project = write_project(bench, state, row)
        flags = ("--no-cache",) if row.engine == "docker" else ()
        seconds, result = imagectl_build(state, project, PROFILE, flags)
        out = imagectl_result(row.label, row.engine, seconds, result, state, PROFILE)
        out.ratio_to = row.key != "docker-zstd"  # a probe of what Docker does with zstd, not a configuration
        return out


def imagectl_result(label: str, engine: str, seconds: float, result: dict, state: Fresh, profile: str) -> Result:
    image, not_base, layers_seen = pushed_sizes(state, f"{NAMESPACE}/{profile}")
    return Result(label, engine, seconds, dict(result.get("phases") or {}), int(result.get("pushed_bytes") or 0),
                  image, not_base, layers_seen)


def pushed_sizes(state: Fresh, repository: str) -> tuple[int, int, str]:
    """(compressed bytes of the layers of ``repository:latest``, of those not in the mirrored base, their
    compression)."""
    host = state.setup.registry_host
    descriptors = manifest_layers(host, repository)
    base = {d.digest for d in manifest_layers(host, BASE_REPOSITORY, state.base_digest)}
    return (sum(d.size for d in descriptors), sum(d.size for d in descriptors if d.digest not in base),
            compression_of(descriptors))


def baseline_lock(bench: Bench, state: Fresh) -> tuple[str, str]:
    """The lock imagectl makes for the profile (``imagectl render -o``: every layer's file) as one file, and the
    index it came from."""
    project = write_project(bench, state, ROWS["docker"])
    out = state.folder / "rendered"
    argv = _fixture.imagectl(project, "render", PROFILE, "-o", str(out))
    proc = subprocess.run(argv, cwd=project, env=state.env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} failed:\n{proc.stderr[-3000:]}")
    files = sorted(out.glob("lock-*.txt"))
    if not files:
        raise SystemExit(f"imagectl render wrote no lock-*.txt into {out}: {sorted(p.name for p in out.iterdir())}")
    return "".join(path.read_text() for path in files), profile_index(project, state.env)


def consume(stream, what: str) -> None:
    for chunk in stream:
        if "error" in chunk or "errorDetail" in chunk:
            raise SystemExit(f"{what} failed: {chunk.get('error') or chunk.get('errorDetail')}")


def baseline_row(bench: Bench, row: Row) -> Result:
    from tests.integration.support.engine import push_to_registry

    with fresh(bench, row.key) as state:
        context = state.folder / "handwritten"
        lock, index = baseline_lock(bench, state)
        base = f"{state.setup.registry_host}/{BASE_REPOSITORY}@{state.base_digest}"
        _fixture.write_handwritten_context(context, base=base, lock=lock, index=index, real=bench.real)
        local = f"{state.setup.registry_host}/{NAMESPACE}/handwritten:build"
        start = time.perf_counter()
        consume(bench.client.api.build(path=str(context), tag=local, nocache=True, rm=True, forcerm=True,
                                       network_mode="host", decode=True), "docker build")
        built = time.perf_counter()
        push_to_registry(bench.client, local, state.setup.registry_host, f"{NAMESPACE}/handwritten:latest")
        pushed = time.perf_counter()
        image, not_base, layers_seen = pushed_sizes(state, f"{NAMESPACE}/handwritten")
        return Result(row.label, "docker", pushed - start, {"build": built - start, "push": pushed - built}, not_base,
                      image, not_base, layers_seen)


def profile_index(project: Path, env: dict[str, str]) -> str:
    """The index the profile's lock came from, as ``imagectl show --json`` in ``project`` says."""
    argv = _fixture.imagectl(project, "show", PROFILE, "--json")
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, check=True)
    return str(json.loads(proc.stdout)["index_url"])


@dataclass
class Upgrade:
    a: Result
    b: Result
    moved: layers.Moved
    lines: list[str]


def upgrade_row(bench: Bench, row: Row) -> Upgrade:
    """A on runner A, storage deleted; B on runner B; both to one registry; the bytes of B that A lacks."""
    with fresh(bench, row.key) as state:
        project = write_project(bench, state, row)
        seconds, result = imagectl_build(state, project, OLDER)
        a = imagectl_result(f"upgrade A: {OLDER}", row.engine, seconds, result, state, OLDER)
        a.ratio_to = False
        drop_storage(state.folder / "runner", state.env)
        state.env = storage_env(state.folder / "runner")  # runner B: empty storage, caches and TMPDIR again
        seconds, result = imagectl_build(state, project, PROFILE)
        b = imagectl_result(f"upgrade B: {PROFILE}", row.engine, seconds, result, state, PROFILE)
        b.ratio_to = False  # not a first push: B's runner mounts what A pushed
        host = state.setup.registry_host
        base_layers = len(manifest_layers(host, BASE_REPOSITORY, state.base_digest))
        image_a = layers.pushed_image(host, f"{NAMESPACE}/{OLDER}", base_layers)
        image_b = layers.pushed_image(host, f"{NAMESPACE}/{PROFILE}", base_layers)
        scale = 1 if bench.real else bench.scale
        have = {layer.digest for layer in image_a.layers}
        lines = [f"  {'new ' if layer.digest not in have else '    '}{layer.size / 1e6:9.1f} MB"
                 + (f"  real {layer.size * (scale if layer.lock else 1) / 1e6:9.1f} MB" if scale != 1 else "")
                 + f"  {' '.join(dict.fromkeys(layer.what.split()))}" for layer in image_b.layers]
        return Upgrade(a, b, layers.moved(image_a, image_b, scale), lines)


# --------------------------------------------------------------------------------------------- report


def mb(n: float) -> str:
    return f"{n / 1e6:9.1f}"


def print_table(results: list[Result], baseline: Result | None) -> None:
    head = f"{'row':34} {'seconds':>8} {'ratio':>6} " + " ".join(f"{p:>6}" for p in PHASES)
    print(head + f" {'other':>6} {'pushed MB':>9} {'image MB':>9} {'not base':>9}  layers")
    for r in results:
        ratio = f"{r.seconds / baseline.seconds:6.2f}" if baseline else f"{'-':>6}"
        phases = " ".join(f"{r.phases[p]:6.1f}" if p in r.phases else f"{'-':>6}" for p in PHASES)
        other = sum(v for k, v in r.phases.items() if k not in PHASES)
        sizes = f"{mb(r.pushed)} {mb(r.image)} {mb(r.not_base)}"
        print(f"{r.label:34} {r.seconds:8.1f} {ratio} {phases} {other:6.1f} {sizes}  {r.layers}")


def time_verdict(results: list[Result], baseline: Result | None, real: bool) -> bool | None:
    candidates = [r for r in results if r is not baseline and r.ratio_to]
    if baseline is None or not candidates:
        return None
    best = min(candidates, key=lambda r: r.seconds)
    ratio = best.seconds / baseline.seconds
    met = ratio <= TIME_TARGET
    print(f"target 1: first build and push at most {TIME_TARGET}x the hand-written Dockerfile's time: fastest "
          f"imagectl row '{best.label}' {ratio:.2f}x: {'target met' if met else 'NOT met'}"
          + ("" if real else " (stand-in figures: the target is defined on the real image)"))
    for r in candidates:
        print(f"  {r.label:34} {r.seconds / baseline.seconds:5.2f}x")
    return met


def pull_verdict(upgrade: Upgrade | None, real: bool, scale: int) -> bool | None:
    if upgrade is None:
        return None
    m = upgrade.moved
    print(f"upgrade: B's layers {mb(m.total).strip()} MB, of which not in A {mb(m.new).strip()} MB: {m.fraction:.1%} "
          f"pulled; B pushed {mb(upgrade.b.pushed).strip()} MB")
    fraction = m.fraction if real else m.fraction_real
    if not real:
        print(f"  at real wheel size (the lock layers' bytes times {scale}): {mb(m.new_real).strip()} of "
              f"{mb(m.total_real).strip()} MB: {m.fraction_real:.1%}")
    chain, of = (m.chain, m.total) if real else (m.chain_real, m.total_real)
    print(f"  a store that keys layers by their chain (Docker's graph drivers) pulls every layer from the first new "
          f"one up: {mb(chain).strip()} of {mb(of).strip()} MB: {chain / of:.1%}"
          + ("" if real else " (at real wheel size)"))
    print("B's layers (new: digest not in A's manifest):")
    print("\n".join(upgrade.lines))
    met = fraction <= PULL_TARGET
    print(f"target 2: a node moving from torch 2.3.0 to 2.3.1 (fresh runners) pulls at most {PULL_TARGET:.0%}: "
          f"{fraction:.1%}: {'target met' if met else 'NOT met'}"
          + ("" if real else " (stand-in figures at real wheel size: the target is defined on the real image)"))
    return met


# --------------------------------------------------------------------------------------------- main


def prepare(stack: ExitStack, real: bool, scale: int) -> Bench:
    from tests.integration.support.engine import ensure_dockerd
    from tests.integration.support.wheels import start_simple_index

    client = ensure_dockerd()
    client.api.timeout = 3600  # a pip install of GBs prints nothing for minutes
    work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="imagectl-bench-push-")))
    index_url = ""
    if not real:
        payload = layers.make_wheels(work / "wheels", scale)
        index = start_simple_index(work / "wheels")
        stack.callback(index.stop)
        index_url = index.url
        print(f"index: {len(layers.PYPI_WHEELS)} stand-in wheels (both releases), {payload / 1e6:.1f} MB of payload: "
              f"1/{scale} of PyPI's")
    return Bench(client, work, index_url, real, scale)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=DEFAULT_ROWS, help=f"comma-separated, of: {', '.join(ROWS)}")
    parser.add_argument("--scale", type=int, default=50, help="stand-in wheels weigh 1/SCALE of the real ones")
    parser.add_argument("--real", action="store_true", help="real wheels from PyPI (about 40 minutes)")
    args = parser.parse_args()
    keys = [key.strip() for key in args.rows.split(",") if key.strip()]
    unknown = [key for key in keys if key not in ROWS]
    if unknown or not keys:
        parser.error(f"--rows: unknown {', '.join(unknown) or '(none given)'}; rows are {', '.join(ROWS)}")
    started = time.perf_counter()
    print("$", shlex.join([sys.executable, *sys.argv]))
    print(time.strftime("%Y-%m-%d %H:%M %Z"), f"load average {os.getloadavg()[0]:.2f}",
          "real wheels (PyPI)" if args.real else f"stand-in wheels at 1/{args.scale}")
    results: list[Result] = []
    baseline = upgrade = None
    with ExitStack() as stack:
        bench = prepare(stack, args.real, args.scale)
        for key in keys:
            row, row_started, load = ROWS[key], time.perf_counter(), os.getloadavg()[0]
            if key == "baseline":
                baseline = baseline_row(bench, row)
                results.append(baseline)
            elif key == "upgrade":
                upgrade = upgrade_row(bench, row)
                results += [upgrade.a, upgrade.b]
            else:
                results.append(imagectl_row(bench, row))
            print(f"  {row.label}: done in {time.perf_counter() - row_started:.0f} s (load average {load:.1f} at "
                  f"the start, {os.getloadavg()[0]:.1f} at the end)")
    print()
    print_table(results, baseline)
    print()
    verdicts = [time_verdict(results, baseline, args.real), pull_verdict(upgrade, args.real, args.scale)]
    print(f"{time.perf_counter() - started:.0f} s")
    return 1 if False in verdicts else 0


if __name__ == "__main__":
    sys.exit(main())
