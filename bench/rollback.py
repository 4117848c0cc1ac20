"""Rollback cost against a local registry: ``imagectl rollback`` vs docker pull + tag + push vs ``skopeo copy``.

    python bench/rollback.py [--size-mb 500] [--small-mb 50] [--runs 5]

Starts a CNCF distribution registry on loopback (``tests/integration/support/registry.py``) behind a small
counting HTTP proxy, so every byte any client sends to or receives from the registry is counted.  For each
size it pushes two images with one random-data layer of that size (``prev`` and ``cur``, immutable tags of
``torch-2.3-cu121-py3.11``, ``latest`` on ``cur`` with the moves logged as ``build`` logs them), then, each
time starting from ``latest`` on ``cur``, measures moving ``latest`` to ``prev``:

(a) ``imagectl rollback NAME`` (a fresh process, registry mode);
(a') the library call ``rollback(store)`` in this process (no interpreter start-up);
(b) ``docker pull prev`` (not in the engine beforehand) + ``docker tag`` + ``docker push latest`` (large size only);
(c) ``skopeo copy docker://...:prev docker://...:latest``;
(s) for scale: a process that only imports what (a) imports (interpreter, click, requests, imagectl), no requests.

It prints, per scenario, the median wall time over ``--runs``, the bytes uploaded as blobs (POST/PATCH/PUT
under ``/blobs/``), the other bytes uploaded (manifests, the move log) and the bytes downloaded, then the
ratios of (a) to (c) and of the large to the small image.  Targets: no blob bytes uploaded by a rollback; (a)
within 2x of (c); (a) flat in the image size.  Nothing is asserted.  Needs docker-registry, skopeo and a
Docker engine; about 2.5 GB of temporary disk for the default sizes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
# The imports below resolve only after the sys.path tweak above (this file runs as a script).

from imagectl.reference import parse_reference  # noqa: E402
from imagectl.registry import Manifest, RegistryClient  # noqa: E402
from imagectl.tags.moves import guarded_move, rollback  # noqa: E402
from imagectl.tags.store import RegistryTagStore  # noqa: E402
from tests.integration.support.registry import start_registry  # noqa: E402

PROFILE = "torch-2.3-cu121-py3.11"
NAMESPACE = "bench"
CHUNK = 1024 * 1024


# --------------------------------------------------------------------------------------------- counting proxy


class Counter:
    """Bytes through the proxy since the last reset: blob uploads, other uploads, downloads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.blob_up = self.other_up = self.down = 0

    def add(self, path: str, up: int, down: int) -> None:
        with self.lock:
            if "/blobs/" in path:
                self.blob_up += up
            else:
                self.other_up += up
            self.down += down

    def snapshot(self) -> tuple[int, int, int]:
        with self.lock:
            return self.blob_up, self.other_up, self.down


class CountingProxy:
    """A streaming HTTP/1.1 proxy to ``upstream`` that counts request and response body bytes."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.counter = Counter()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(proxy: CountingProxy) -> type[BaseHTTPRequestHandler]:
    local = threading.local()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stalls

        def _session(self) -> requests.Session:
            if not hasattr(local, "session"):
                local.session = requests.Session()
            return local.session

        def _body(self) -> Any:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                return self._chunks()
            length = int(self.headers.get("Content-Length") or 0)
            return _ExactBody(self, length) if length else None

        def _chunks(self) -> Iterator[bytes]:
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return
                data = self.rfile.read(size)
                self.rfile.readline()
                self.sent += len(data)
                yield data

        def _handle(self) -> None:
            self.sent = 0
            path = self.path.split("?", 1)[0]
            skip = ("content-length", "transfer-encoding", "connection")
            headers = {
                k: ", ".join(self.headers.get_all(k) or [])
                for k in set(self.headers.keys())
                if k.lower() not in skip
            }
            body = self._body()
            try:
                answer = self._session().request(self.command, proxy.upstream + self.path, headers=headers, data=body,
                                                 stream=True, allow_redirects=False, timeout=600)
            except requests.RequestException as exc:
                self.send_error(502, f"upstream: {type(exc).__name__}")
                self.close_connection = True
                return
            self.send_response(answer.status_code)
            for key, value in answer.raw.headers.items():
                if key.lower() not in ("transfer-encoding", "connection"):
                    self.send_header(key, value.replace(proxy.upstream, f"http://{proxy.host}"))
            chunked = self.command != "HEAD" and "Content-Length" not in answer.raw.headers
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            received = 0
            if self.command != "HEAD":
                for data in answer.raw.stream(CHUNK, decode_content=False):
                    received += len(data)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            answer.close()
            proxy.counter.add(path, self.sent, received)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


class _ExactBody:
    """A request body of known length read from the client as the upstream request streams it (so requests
    sends a Content-Length, not chunks)."""

    def __init__(self, handler: Any, length: int) -> None:
        self.handler, self.left, self.length = handler, length, length

    def __len__(self) -> int:
        return self.length

    def read(self, size: int = -1) -> bytes:
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.handler.rfile.read(size) if size else b""
        self.left -= len(data)
        self.handler.sent += len(data)
        return data


# --------------------------------------------------------------------------------------------- images


def random_layer(path: Path, size: int) -> tuple[str, str, int]:
    """A gzip (stored, level 0) tar of one ``size``-byte random file at ``path``: (digest, diff_id, bytes)."""
    raw = hashlib.sha256()
    packed = hashlib.sha256()

    class Tee(io.RawIOBase):
        def __init__(self, sink: Any) -> None:
            self.sink = sink

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            raw.update(data)
            return self.sink.write(data)

    class Hashing(io.RawIOBase):
        def __init__(self, sink: Any) -> None:
            self.sink = sink

        def writable(self) -> bool:
            return True

        def write(self, data: Any) -> int:
            packed.update(data)
            return self.sink.write(data)

    with path.open("wb") as out:
        hashed = Hashing(out)
        with gzip.GzipFile(fileobj=hashed, mode="wb", compresslevel=0, mtime=0) as gz, \
                tarfile.open(fileobj=Tee(gz), mode="w|", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo("payload.bin")
            info.size, info.mode, info.mtime = size, 0o644, 0
            tar.addfile(info, _RandomFile(size))
    return "sha256:" + packed.hexdigest(), "sha256:" + raw.hexdigest(), path.stat().st_size


class _RandomFile(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return os.urandom(n)


def push_image(client: RegistryClient, repo: str, tag: str, size: int, work: Path) -> str:
    """Push an image with one random layer of ``size`` bytes under ``repo:tag``; its manifest digest."""
    layer = work / f"{tag}.tar.gz"
    digest, diff_id, length = random_layer(layer, size)
    with layer.open("rb") as data:
        client.upload_blob(repo, data, digest)
    layer.unlink()
    config = json.dumps({
        "architecture": "amd64", "os": "linux", "created": "2024-05-01T12:00:00Z",
        "config": {"Labels": {"imagectl.framework": "torch", "imagectl.framework.version": "2.3.1",
                              "imagectl.cuda": "12.1", "imagectl.python": "3.11"}, "Cmd": ["/payload.bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "2024-05-01T12:00:00Z", "created_by": "bench"}],
    }, sort_keys=True).encode()
    config_digest = client.upload_blob(repo, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest, "size": length}],
    }).encode()
    return client.put_manifest(repo, tag, Manifest.from_bytes(manifest, "application/vnd.oci.image.manifest.v1+json"))


# --------------------------------------------------------------------------------------------- scenarios


@dataclass
class Sample:
    seconds: float
    blob_up: int
    other_up: int
    down: int


def measure(proxy: CountingProxy, action: Callable[[], None]) -> Sample:
    proxy.counter.reset()
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    return Sample(seconds, *proxy.counter.snapshot())


def run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-800:]}")


@dataclass
class Setup:
    proxy: CountingProxy
    client: RegistryClient  # straight to the registry: set-up and checks are not counted
    repo: str
    tags: dict[str, str]  # "prev"/"cur" -> immutable tag
    digests: dict[str, str]
    workdir: Path
    env: dict[str, str]

    @property
    def ref(self) -> str:
        return f"{self.proxy.host}/{self.repo}"

    def reset(self) -> None:
        """latest back on cur and logged as a build (so the log explains where it points), not measured."""
        store = RegistryTagStore(self.client, parse_reference(f"{self.client.host}/{self.repo}"))
        guarded_move(store, "latest", self.digests["cur"], self.tags["cur"], store.digest("latest"), "build")

    def check(self) -> None:
        """latest is the prev image: the same manifest, or (docker push rewrites it) the same config."""
        now = self.client.get_manifest(self.repo, "latest")
        prev = self.client.get_manifest(self.repo, self.digests["prev"])
        if (
            now.digest != prev.digest
            and now.config() != prev.config()
            and (now.config() or 0).digest != (prev.config() or 0).digest
        ):
            raise SystemExit(f"latest is on {now.digest}, expected the image of prev {prev.digest}")


def prepare(proxy: CountingProxy, registry_host: str, size: int, label: str, root: Path) -> Setup:
    repo = f"{NAMESPACE}{label}/{PROFILE}"
    direct = RegistryClient(registry_host, insecure=True)
    tags = {
        "prev": f"2.3.1-cu121-py3.11-20240101T120000-{1:010d}",
        "cur": f"2.3.1-cu121-py3.11-20240102T120000-{2:010d}",
    }
    digests = {}
    store = RegistryTagStore(direct, parse_reference(f"{registry_host}/{repo}"))
    for name in ("prev", "cur"):
        print(f"  pushing {size // 2**20} MiB image {name}", file=sys.stderr, flush=True)
        digests[name] = push_image(direct, repo, tags[name], size, root)
        guarded_move(store, "latest", digests[name], tags[name], store.digest("latest"), "build")
    workdir = root / f"work{label}"
    workdir.mkdir()
    (workdir / "imagectl.toml").write_text(f'[registry]\nurl = "{proxy.host}"\nnamespace = "{NAMESPACE}{label}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env["DOCKER_CONFIG"] = str(root / "docker-config")
    return Setup(proxy, direct, repo, tags, digests, workdir, env)


def imagectl_rollback(s: Setup) -> Callable[[], None]:
    return lambda: run([sys.executable, "-m", "imagectl", "rollback", PROFILE], s.workdir, s.env)


def library_rollback(s: Setup) -> Callable[[], None]:
    def act() -> None:
        client = RegistryClient(s.proxy.host, insecure=True)
        rollback(RegistryTagStore(client, parse_reference(s.ref)))
    return act


def docker_pull_tag_push(s: Setup) -> Callable[[], None]:
    def act() -> None:
        run(["docker", "pull", "-q", f"{s.ref}:{s.tags['prev']}"], env=s.env)
        run(["docker", "tag", f"{s.ref}:{s.tags['prev']}", f"{s.ref}:latest"], env=s.env)
        run(["docker", "push", "-q", f"{s.ref}:latest"], env=s.env)
    return act


def skopeo_copy(s: Setup) -> Callable[[], None]:
    return lambda: run(["skopeo", "copy", "-q", "--src-tls-verify=false", "--dest-tls-verify=false",
                        f"docker://{s.ref}:{s.tags['prev']}", f"docker://{s.ref}:latest"], env=s.env)


def forget_local(s: Setup) -> None:
    """Remove the pulled images from the engine so the next pull downloads again."""
    for ref in (f"{s.ref}:{s.tags['prev']}", f"{s.ref}:latest"):
        subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)


def start_up(s: Setup) -> Callable[[], None]:
    code = (
        "import imagectl.cli, imagectl.cli.tags_cmd, imagectl.tags.managed, imagectl.tags.moves,"
        " imagectl.registry.access"
    )
    return lambda: run([sys.executable, "-c", code], s.workdir, s.env)


@dataclass
class Scenario:
    """One line of the table: what runs, against which setup, and its samples."""

    name: str
    size_mb: int  # 0: not about an image
    setup: Setup
    action: Callable[[], None]
    before: Callable[[], None] | None = None
    check: bool = True
    samples: list[Sample] = field(default_factory=list)

    def sample(self) -> None:
        self.setup.reset()
        if self.before:
            self.before()
        self.samples.append(measure(self.setup.proxy, self.action))
        if self.check:
            self.setup.check()

    def median(self) -> Sample:
        mid = sorted(self.samples, key=lambda x: x.seconds)[len(self.samples) // 2]
        return Sample(statistics.median(x.seconds for x in self.samples), mid.blob_up, mid.other_up, mid.down)


def run_interleaved(scenarios: list[Scenario], runs: int) -> None:
    """``runs`` rounds, each sampling every scenario once, so a slow moment of the machine hits all alike."""
    for _ in range(runs):
        for scenario in scenarios:
            scenario.sample()
    for scenario in scenarios:
        seconds = ", ".join(f"{x.seconds:.3f}s" for x in scenario.samples)
        print(f"  {scenario.name} {scenario.size_mb or ''}: " + seconds, file=sys.stderr, flush=True)


def human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--small-mb", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for tool in ("docker-registry", "skopeo", "docker"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="imagectl-bench-"))
    (root / "docker-config").mkdir()
    (root / "docker-config" / "config.json").write_text('{"auths": {}}')
    server = start_registry(root / "registry")
    proxy = CountingProxy(server.url)
    rows: list[tuple[str, int, Sample]] = []
    try:
        print(f"preparing {args.size_mb} MB and {args.small_mb} MB images", file=sys.stderr, flush=True)
        large = prepare(proxy, server.host, args.size_mb * 10**6, "large", root)
        small = prepare(proxy, server.host, args.small_mb * 10**6, "small", root)
        docker = Scenario(
            "(b) docker pull+tag+push", args.size_mb, large, docker_pull_tag_push(large), lambda: forget_local(large)
        )
        run_interleaved([docker], args.runs)  # long: alone, before the short ones
        forget_local(large)
        quick = [
            Scenario("(a) imagectl rollback", args.size_mb, large, imagectl_rollback(large)),
            Scenario("(a) imagectl rollback", args.small_mb, small, imagectl_rollback(small)),
            Scenario("(a') rollback() in-process", args.size_mb, large, library_rollback(large)),
            Scenario("(a') rollback() in-process", args.small_mb, small, library_rollback(small)),
            Scenario("(c) skopeo copy", args.size_mb, large, skopeo_copy(large)),
            Scenario("(c) skopeo copy", args.small_mb, small, skopeo_copy(small)),
            Scenario("(s) start-up: imports only", 0, large, start_up(large), check=False),
        ]
        run_interleaved(quick, args.runs)
        order = [*quick[:4], docker, *quick[4:]]
        rows = [(x.name, x.size_mb, x.median()) for x in order]
    finally:
        proxy.stop()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(rows, args, time.perf_counter() - started)
    return 0


def report(rows: list[tuple[str, int, Sample]], args: argparse.Namespace, total: float) -> None:
    print(
        f"rollback of latest to the previous image, median of {args.runs} runs,"
        " registry on loopback behind a counting proxy"
    )
    print(
        f"{'scenario':28} {'image':>7} {'seconds':>8} {'blob bytes up':>14} {'other bytes up':>15}"
        f" {'bytes down':>11}"
    )
    for name, size, x in rows:
        image = f"{size} MB" if size else "-"
        print(
            f"{name:28} {image:>7} {x.seconds:8.3f} {human(x.blob_up):>14} {human(x.other_up):>15}"
            f" {human(x.down):>11}"
        )
    t = {(name[:4].strip(), size): x.seconds for name, size, x in rows}
    big, small = args.size_mb, args.small_mb
    print()
    print(f"(a)/(c) at {big} MB: {t[('(a)', big)] / t[('(c)', big)]:.2f}  (target <= 2)")
    print(f"(a)/(c) at {small} MB: {t[('(a)', small)] / t[('(c)', small)]:.2f}")
    inproc = t[("(a')", big)]
    print(f"(a') in-process / (c) at {big} MB: {inproc / t[('(c)', big)]:.2f}")
    print(f"(b)/(a) at {big} MB: {t[('(b)', big)] / t[('(a)', big)]:.1f}")
    print(f"(a) {big} MB / {small} MB: {t[('(a)', big)] / t[('(a)', small)]:.2f}  (flat: about 1)")
    print(f"(c) {big} MB / {small} MB: {t[('(c)', big)] / t[('(c)', small)]:.2f}")
    print(f"(a) minus start-up (s) at {big} MB: {t[('(a)', big)] - t[('(s)', 0)]:.3f} s vs (c) {t[('(c)', big)]:.3f} s")
    print(f"total bench time {total:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
