"""``build``'s push by digest of a Docker image (imagectl's own export of ``docker save``, engine/docker_save.py, and
the layer-digest cache, images/known_layers.py) against the daemon's own ``docker push`` of the same image, in one
run; and, for reference, the export it replaced (``skopeo copy --format v2s2 docker-daemon:`` then the same push).

    python3 bench/docker_push.py [--layer-mb 50] [--repeat 3]

Images: the stand-in ``nvidia/cuda:12.1.1-base-ubuntu22.04`` (Debian bookworm minbase, ~66 MB of layers) with one
layer on top, a copy of the host's ``/usr/lib/python3.11`` plus ``--layer-mb`` MB of stand-in "wheel" bytes (half
random, half text: real installed packages compress about 2:1) as ``A``; ``B`` the same base with another such
layer.  Each case pushes to a registry of its own (fresh loopback CNCF distribution), in this order:

- ``cold``: ``A`` into an empty registry (imagectl: an empty cache too; Docker: a registry it never pushed to);
- ``warm``: then ``B`` into the same repository: the base's layers are there (imagectl: its cache knows their
  blobs; Docker: its own records do).

Each row is the median of ``--repeat`` runs (each run: fresh registries, fresh cache).  Columns: seconds, ratio to
``docker push`` of the same case, the bytes uploaded, and the bytes of the image's layers in the registry.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fixture  # noqa: E402

from imagectl.config import Config  # noqa: E402
from imagectl.engine.docker import DockerEngine  # noqa: E402
from imagectl.images.publish import push_by_digest  # noqa: E402
from imagectl.reference import parse_reference  # noqa: E402
from imagectl.registry import RegistryClient  # noqa: E402
from imagectl.registry.layout_push import push_layout  # noqa: E402

BASE = "nvidia/cuda:12.1.1-base-ubuntu22.04"
TAG = os.urandom(3).hex()


def stand_in_layer(folder: Path, megabytes: int, seed: str) -> None:
    """The host's Python standard library and ``megabytes`` MB of wheel-like bytes (half random, half text)."""
    shutil.copytree("/usr/lib/python3.11", folder / "lib", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    half = megabytes * 1024 * 1024 // 2
    (folder / "random.bin").write_bytes(os.urandom(half))
    line = f"def f_{seed}(x):\n    return x * 2  # a stand-in module\n".encode()
    (folder / "text.py").write_bytes(line * (half // len(line)))


def build_images(client, work: Path, megabytes: int) -> dict[str, str]:
    base = _fixture.standin_base_image(client, f"imagectl-test/{BASE}", env=_fixture.cuda_base_env("12.1.1"))
    images = {}
    for name in ("a", "b"):
        context = work / f"context-{name}"
        stand_in_layer(context / "site", megabytes, name)
        (context / "Dockerfile").write_text(f"FROM {base}\nCOPY site /opt/venv/\n")
        image, _ = client.images.build(path=str(context), tag=f"imagectl-bench/docker-push-{name}:{TAG}", rm=True)
        images[name] = str(image.id)
        shutil.rmtree(context)
    return images


def layer_bytes(host: str, repository: str, reference: str) -> int:
    manifest = RegistryClient(host, insecure=True).get_manifest(repository, reference)
    return sum(layer.size for layer in manifest.layers())


def imagectl_push(image: str, host: str) -> tuple[float, int, str]:
    lines: list[str] = []
    start = time.monotonic()
    pushed = push_by_digest(DockerEngine(), image, parse_reference(f"{host}/bench/app"),
                            Config(registry_url=host, insecure=True), lines.append)
    seconds = time.monotonic() - start
    said = next((line.removeprefix("push: ") for line in lines if line.startswith("push: compressed")), "")
    return seconds, pushed.uploaded, f"layers {layer_bytes(host, 'bench/app', pushed.digest)} B; {said}"


def docker_push(client, image: str, host: str, tag: str) -> tuple[float, str]:
    client.images.get(image).tag(f"{host}/bench/app", tag)
    start = time.monotonic()
    digest = ""
    for event in client.api.push(f"{host}/bench/app", tag=tag, stream=True, decode=True):
        if "error" in event:
            raise RuntimeError(event["error"])
        digest = (event.get("aux") or {}).get("Digest", digest)
    seconds = time.monotonic() - start
    client.images.remove(f"{host}/bench/app:{tag}")
    return seconds, digest


def skopeo_push(image: str, host: str, tmp: Path) -> float:
    """The replaced path: skopeo's export of every layer, then the same push of the layout."""
    start = time.monotonic()
    layout = tmp / f"skopeo-{time.monotonic_ns()}"
    subprocess.run(["skopeo", "copy", "--quiet", "--format", "v2s2", f"docker-daemon:{image}", f"oci:{layout}"],
                   check=True, capture_output=True)
    with RegistryClient(host, insecure=True) as client:
        push_layout(client, layout, "bench/app", None)
    seconds = time.monotonic() - start
    shutil.rmtree(layout)
    return seconds


def one_run(client, images: dict[str, str], work: Path) -> dict[str, tuple[float, int, str]]:
    """Fresh registries and cache; each case's timings, what was uploaded and notes."""
    run = Path(tempfile.mkdtemp(dir=work))
    os.environ["XDG_CACHE_HOME"] = str(run / "cache")
    ours, theirs, old = (_fixture.start_registry(run / name) for name in ("ours", "docker", "skopeo"))
    try:
        rows = {}
        seconds, uploaded, said = imagectl_push(images["a"], ours.host)
        rows["cold imagectl"] = (seconds, uploaded, said)
        seconds, digest = docker_push(client, images["a"], theirs.host, "a")
        rows["cold docker push"] = (seconds, 0, f"layers {layer_bytes(theirs.host, 'bench/app', digest)} B")
        rows["cold skopeo (old)"] = (skopeo_push(images["a"], old.host, run), 0, "")
        seconds, uploaded, said = imagectl_push(images["b"], ours.host)
        rows["warm imagectl"] = (seconds, uploaded, said)
        rows["warm skopeo (old)"] = (skopeo_push(images["b"], old.host, run), 0, "")
        seconds, digest = docker_push(client, images["b"], theirs.host, "b")
        rows["warm docker push"] = (seconds, 0, f"layers {layer_bytes(theirs.host, 'bench/app', digest)} B")
        return rows
    finally:
        for server in (ours, theirs, old):
            server.stop()
        shutil.rmtree(run, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layer-mb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    client = _fixture.ensure_dockerd()
    work = Path(tempfile.mkdtemp(prefix="imagectl-bench-docker-push-"))
    images = build_images(client, work, args.layer_mb)
    try:
        runs = [one_run(client, images, work) for _ in range(args.repeat)]
    finally:
        for image in images.values():
            client.images.remove(image, force=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'case':<20} {'seconds':>8} {'ratio':>6} {'uploaded MB':>12}  notes (last run)")
    for case in runs[0]:
        seconds = statistics.median(run[case][0] for run in runs)
        baseline = statistics.median(run[f"{case.split()[0]} docker push"][0] for run in runs)
        uploaded = runs[-1][case][1]
        print(f"{case:<20} {seconds:8.2f} {seconds / baseline:6.2f} {uploaded / 1e6:12.1f}  {runs[-1][case][2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
