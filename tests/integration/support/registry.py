"""Real registries for integration tests: CNCF distribution (Debian's ``docker-registry``) on loopback.

:func:`start_registry` runs ``docker-registry serve CONFIG.yml`` on a free ``127.0.0.1`` port, with data,
config and log under ``root`` and deletes enabled, and waits until ``/v2/`` answers.  Auth is one of:

- ``None``: anonymous;
- ``"htpasswd"``: HTTP basic against a bcrypt file made with ``htpasswd -Bbn``;
- ``"token"``: the bearer-token flow.  A small :class:`TokenServer` on loopback checks basic credentials
  and issues RS256 JWTs granting the scopes asked for; it signs with the ``openssl`` CLI using a key whose
  self-signed certificate is the registry's ``rootcertbundle`` (the certificate travels in the JWT's
  ``x5c`` header).  No Python crypto package is needed.

With ``tls=True`` it serves https with a self-signed certificate for 127.0.0.1 (``ca_cert``) instead.

:class:`FaultInjectingProxy` sits in front of a registry and answers scripted statuses (503, 429, ...)
before passing requests through, counting every hit, to test retries against real HTTP.

:func:`make_sample_image` / :func:`push_sample_image` build a tiny real image (gzipped tar layers, a
valid config, an OCI or Docker manifest) and push it through an imagectl ``RegistryClient``, no docker.

dockerd treats 127.0.0.0/8 registries as insecure on its own, so ``docker push 127.0.0.1:PORT/...`` works
over plain HTTP against these registries too.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import secrets
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import uuid
import warnings
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests

from tests.integration.support.logs import log_tail

REGISTRY_BIN = "docker-registry"
TOKEN_SERVICE = "imagectl-test-registry"
TOKEN_ISSUER = "imagectl-test-issuer"
_START_TIMEOUT_S = 20.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# --------------------------------------------------------------------------------------------- token server


@dataclass
class TokenRequest:
    """One request the token server saw: who asked (None if anonymous) and for which scopes."""

    username: str | None
    scopes: tuple[str, ...]
    granted: bool


class TokenServer:
    """A bearer-token issuer on loopback: checks basic credentials, answers signed JWTs, counts requests."""

    def __init__(self, root: Path, username: str, password: str) -> None:
        self.username, self.password = username, password
        self.key, self.cert = root / "token.key", root / "token.crt"
        _make_signing_cert(self.key, self.cert)
        self._x5c = base64.b64encode(_cert_der(self.cert)).decode("ascii")
        self.requests: list[TokenRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _token_handler(self))
        self.realm = f"http://127.0.0.1:{self._server.server_address[1]}/token"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    def hits(self) -> int:
        """How many token requests arrived so far."""
        with self._lock:
            return len(self.requests)

    def record(self, entry: TokenRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def issue(self, username: str, scopes: tuple[str, ...]) -> str:
        """A JWT for ``username`` granting every action of ``scopes``, signed RS256 with openssl."""
        now = int(time.time())
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        claims = {
            "iss": TOKEN_ISSUER, "sub": username, "aud": TOKEN_SERVICE, "exp": now + 300, "nbf": now - 30,
            "iat": now, "jti": uuid.uuid4().hex, "access": [_access(scope) for scope in scopes],
        }
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = subprocess.run(
            ["openssl", "dgst", "-sha256", "-sign", str(self.key)],
            input=signing_input.encode(), capture_output=True, check=True,
        ).stdout
        return f"{signing_input}.{_b64url(signature)}"

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def _access(scope: str) -> dict[str, Any]:
    kind, _, rest = scope.partition(":")
    name, _, actions = rest.rpartition(":")
    return {"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]}


def _make_signing_cert(key: Path, cert: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=imagectl-test-token",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )


def _cert_der(cert: Path) -> bytes:
    return subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-outform", "DER"], check=True, capture_output=True
    ).stdout


def _token_handler(server: TokenServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            query = parse_qs(urlsplit(self.path).query)
            scopes = tuple(query.get("scope", []))
            valid, user = _basic_user(self.headers.get("Authorization", ""), server.username, server.password)
            if not valid:
                server.record(TokenRequest(None, scopes, False))
                body = {"errors": [{"code": "UNAUTHORIZED", "message": "invalid username or password"}]}
                return self._answer(401, body)
            server.record(TokenRequest(user or None, scopes, bool(user)))
            token = server.issue(user, scopes if user else ())
            self._answer(200, {"token": token, "access_token": token, "expires_in": 300})

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _basic_user(header: str, username: str, password: str) -> tuple[bool, str]:
    """(True, user) for right basic credentials, (True, "") for none, (False, "") for wrong ones."""
    if not header:
        return True, ""
    scheme, _, value = header.partition(" ")
    try:
        user, _, secret = base64.b64decode(value).decode().partition(":")
    except ValueError:
        return False, ""
    valid = scheme.lower() == "basic" and (user, secret) == (username, password)
    return valid, user if valid else ""


# --------------------------------------------------------------------------------------------- registry


@dataclass
class RegistryServer:
    """A running ``docker-registry`` on loopback; ``stop()`` kills it (and its token server)."""

    host: str
    root: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    auth: str | None = None
    username: str = ""
    password: str = field(default="", repr=False)
    token_server: TokenServer | None = field(default=None, repr=False)
    ca_cert: Path | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ca_cert else 'http'}://{self.host}"

    def stop(self) -> None:
        """Stop the registry and its token server (idempotent)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.token_server is not None:
            self.token_server.stop()
            self.token_server = None

    def __enter__(self) -> "RegistryServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_registry(root: Path, auth: str | None = None, tls: bool = False) -> RegistryServer:
    """Start a CNCF distribution registry on 127.0.0.1 storing under ``root``; wait until ``/v2/`` answers.

    ``auth`` is None (anonymous), "htpasswd" (basic) or "token" (bearer challenge with a local token
    server).  With ``tls`` it serves https with a self-signed certificate for 127.0.0.1
    (``RegistryServer.ca_cert``).  Raises RuntimeError if docker-registry (or htpasswd/openssl) is
    missing, exits or does not answer.
    """
    if shutil.which(REGISTRY_BIN) is None:
        raise RuntimeError("docker-registry is not installed (apt-get install docker-registry)")
    if auth not in (None, "htpasswd", "token"):
        raise ValueError(f"auth must be None, 'htpasswd' or 'token', not {auth!r}")
    root.mkdir(parents=True, exist_ok=True)
    username, password = ("imagectl", secrets.token_urlsafe(12)) if auth else ("", "")
    token_server = TokenServer(root, username, password) if auth == "token" else None
    extra: dict[str, Any] = {"auth": _auth_config(root, auth, username, password, token_server)}
    ca_cert = _make_tls_cert(root) if tls else None
    for _ in range(3):
        port = free_port()
        process = _launch(root, port, extra, ca_cert)
        server = RegistryServer(f"127.0.0.1:{port}", root, process, auth, username, password, token_server, ca_cert)
        if _wait_until_up(server):
            return server
        process.kill()
        process.wait(timeout=10)
        if "address already in use" not in log_tail(root / "registry.log"):
            break
    if token_server is not None:
        token_server.stop()
    raise RuntimeError(f"docker-registry did not start:\n{log_tail(root / 'registry.log')}")


def _auth_config(
    root: Path, auth: str | None, username: str, password: str, token_server: TokenServer | None
) -> dict[str, Any]:
    if auth == "htpasswd":
        path = root / "htpasswd"
        line = subprocess.run(["htpasswd", "-Bbn", username, password], check=True, capture_output=True).stdout
        path.write_bytes(line.strip() + b"\n")
        return {"htpasswd": {"realm": "imagectl-test", "path": str(path)}}
    if token_server is not None:
        return {"token": {"realm": token_server.realm, "service": TOKEN_SERVICE, "issuer": TOKEN_ISSUER,
                          "rootcertbundle": str(token_server.cert)}}
    return {}


def _make_tls_cert(root: Path) -> Path:
    """A self-signed certificate (and key beside it, ``.key``) for 127.0.0.1."""
    cert, key = root / "tls.crt", root / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert


def _launch(root: Path, port: int, extra: dict[str, Any], ca_cert: Path | None) -> subprocess.Popen[bytes]:
    """Write the config (JSON is YAML) and start ``docker-registry serve`` on ``port``, logging under root."""
    http: dict[str, Any] = {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)}
    if ca_cert is not None:
        http["tls"] = {"certificate": str(ca_cert), "key": str(ca_cert.with_suffix(".key"))}
    config = {
        "version": 0.1,
        "log": {"level": "info", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(root / "data")}, "delete": {"enabled": True}},
        "http": http,
        **{key: value for key, value in extra.items() if value},
    }
    config_path = root / "config.yml"
    config_path.write_text(json.dumps(config, indent=2))
    with (root / "registry.log").open("ab") as log:
        return subprocess.Popen([REGISTRY_BIN, "serve", str(config_path)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)


def _wait_until_up(server: RegistryServer) -> bool:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if requests.get(f"{server.url}/v2/", timeout=1, verify=False).status_code in (200, 401):
                    return True
        except requests.RequestException:
            pass
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------------------------- fault proxy


@dataclass(frozen=True)
class Exchange:
    """One request the proxy passed to the registry: method, path, query (the first value of each key), the
    request body's bytes, and the status the registry answered."""

    method: str
    path: str
    query: dict[str, str]
    body: int
    status: int


class FaultInjectingProxy:
    """An HTTP proxy in front of ``upstream`` (``http://host:port``) that fails on purpose, then passes through.

    ``script(path_prefix, statuses)`` queues statuses (e.g. ``[503, 503]``) answered, in order, to requests
    whose path starts with the prefix before they are passed through; ``retry_after`` adds that header.
    ``hits(path_prefix)`` counts the requests seen for a prefix, faulted or passed; ``exchanges()`` lists those
    passed through, and ``uploaded_by_blob()`` the bytes sent into blob uploads per digest.

    It also pages tag lists as the distribution spec says (``?n=`` and ``?last=``, lexical order, a
    ``Link: <...>; rel="next"`` header while more remain), because distribution 2.8 ignores ``n``.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._lock = threading.Lock()
        self._faults: list[tuple[str, int, str | None]] = []
        self._seen: list[tuple[str, str]] = []
        self._bodies: list[tuple[str, str, int]] = []  # (method, path, request body bytes) of every request
        self._exchanges: list[Exchange] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(self))
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        self.url = f"http://{self.host}"
        threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True).start()

    def script(self, path_prefix: str, statuses: list[int], retry_after: str | None = None) -> None:
        """Answer the next ``len(statuses)`` requests under ``path_prefix`` with these statuses."""
        with self._lock:
            self._faults += [(path_prefix, status, retry_after) for status in statuses]

    def hits(self, path_prefix: str = "/", method: str | None = None) -> int:
        """Requests seen whose path starts with ``path_prefix`` (and of ``method``, if given)."""
        with self._lock:
            return sum(1 for m, p in self._seen if p.startswith(path_prefix) and method in (None, m))

    def body_bytes(self, path_part: str = "/", method: str | None = None) -> int:
        """Request body bytes seen (what clients sent: e.g. blob uploads are PATCH/PUT under ``/blobs/uploads/``)
        on paths containing ``path_part`` (and of ``method``, if given)."""
        with self._lock:
            return sum(n for m, p, n in self._bodies if path_part in p and method in (None, m))

    def exchanges(self) -> list[Exchange]:
        """The requests passed through to the registry (not the faulted ones), in the order answered."""
        with self._lock:
            return list(self._exchanges)

    def uploaded_by_blob(self) -> dict[str, int]:
        """Request body bytes sent into blob uploads (``/blobs/uploads/``) per digest: a session's POST, PATCH and
        PUT bodies count for the digest its closing PUT names (``?digest=``), a monolithic POST's for its own;
        bytes of a session never closed count under ``""``."""
        sessions: dict[str, int] = {}
        sent: dict[str, int] = {}
        for seen in self.exchanges():
            if "/blobs/uploads/" not in seen.path or seen.method not in ("POST", "PATCH", "PUT"):
                continue
            digest = seen.query.get("digest", "")
            if seen.method == "POST" and digest:  # a monolithic upload
                sent[digest] = sent.get(digest, 0) + seen.body
                continue
            sessions[seen.path] = sessions.get(seen.path, 0) + seen.body
            if seen.method == "PUT":
                sent[digest] = sent.get(digest, 0) + sessions.pop(seen.path)
        if any(sessions.values()):
            sent[""] = sent.get("", 0) + sum(sessions.values())
        return sent

    def passed(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges.append(exchange)

    def took_body(self, method: str, path: str, length: int) -> None:
        with self._lock:
            self._bodies.append((method, path, length))

    def take_fault(self, method: str, path: str) -> tuple[int, str | None] | None:
        with self._lock:
            self._seen.append((method, path))
            for i, (prefix, status, retry_after) in enumerate(self._faults):
                if path.startswith(prefix):
                    del self._faults[i]
                    return status, retry_after
        return None

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def _proxy_handler(proxy: FaultInjectingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            fault = proxy.take_fault(self.command, urlsplit(self.path).path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            proxy.took_body(self.command, urlsplit(self.path).path, len(body or b""))
            if fault is not None:
                return self._fault(*fault)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            answer = requests.request(self.command, proxy.upstream + self.path, headers=headers, data=body,
                                      allow_redirects=False, timeout=30)
            parts = urlsplit(self.path)
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            proxy.passed(Exchange(self.command, parts.path, query, len(body or b""), answer.status_code))
            content = b"" if self.command == "HEAD" else answer.content
            extra: dict[str, str] = {}
            if self.command == "GET" and answer.status_code == 200 and _is_tag_list(self.path):
                content, extra = _tag_page(self.path, content)
            self.send_response(answer.status_code)
            for key, value in answer.headers.items():
                if key.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(key, value.replace(proxy.upstream, proxy.url))
            for key, value in extra.items():
                self.send_header(key, value)
            size = answer.headers.get("Content-Length") if self.command == "HEAD" else str(len(content))
            self.send_header("Content-Length", size or "0")
            self.end_headers()
            self.wfile.write(content)

        def _fault(self, status: int, retry_after: str | None) -> None:
            body = json.dumps({"errors": [{"code": "UNAVAILABLE", "message": "injected fault"}]}).encode()
            self.send_response(status)
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _is_tag_list(path: str) -> bool:
    parts = urlsplit(path)
    return parts.path.endswith("/tags/list") and "n" in parse_qs(parts.query)


def _tag_page(path: str, content: bytes) -> tuple[bytes, dict[str, str]]:
    """One page of a full tag list: ``n`` tags after ``last`` in lexical order, and the next page's Link."""
    parts = urlsplit(path)
    query = parse_qs(parts.query)
    size, last = int(query["n"][0]), query.get("last", [""])[0]
    listing = json.loads(content)
    remaining = [tag for tag in sorted(listing.get("tags") or []) if tag > last]
    page, more = remaining[:size], len(remaining) > size
    listing["tags"] = page
    link = {"Link": f'<{parts.path}?n={size}&last={page[-1]}>; rel="next"'} if more and page else {}
    return json.dumps(listing).encode(), link


# --------------------------------------------------------------------------------------------- sample images


@dataclass(frozen=True)
class SampleImage:
    """A small, real image (gzipped tar layers, a valid config, an OCI or Docker manifest) built in memory."""

    config: bytes
    layers: tuple[bytes, ...]
    manifest: bytes
    media_type: str

    @property
    def blobs(self) -> tuple[bytes, ...]:
        return (self.config, *self.layers)


def make_sample_image(
    files: dict[str, bytes] | None = None,
    labels: dict[str, str] | None = None,
    created: str = "2024-05-01T12:00:00.123456789Z",
    docker_media_types: bool = False,
    architecture: str = "amd64",
) -> SampleImage:
    """An image with one layer per file in ``files`` (path -> content) and ``labels`` on its config, for
    ``linux/ARCHITECTURE``."""
    def layer(path: str, content: bytes) -> tuple[bytes, str]:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo(path)
            info.size, info.mtime, info.mode = len(content), 0, 0o644
            tar.addfile(info, io.BytesIO(content))
        tar_bytes = raw.getvalue()
        return gzip.compress(tar_bytes, mtime=0), "sha256:" + hashlib.sha256(tar_bytes).hexdigest()

    built = [layer(path, content) for path, content in sorted((files or {"hello.txt": b"hello\n"}).items())]
    config = json.dumps({
        "architecture": architecture, "os": "linux", "created": created,
        "config": {"Labels": labels or {}, "Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id for _, diff_id in built]},
        "history": [{"created": created, "created_by": "imagectl test"} for _ in built],
    }, sort_keys=True).encode()
    kinds = (
        ("application/vnd.docker.distribution.manifest.v2+json", "application/vnd.docker.container.image.v1+json",
         "application/vnd.docker.image.rootfs.diff.tar.gzip")
        if docker_media_types else
        ("application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.config.v1+json",
         "application/vnd.oci.image.layer.v1.tar+gzip")
    )

    def descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(blob).hexdigest(), "size": len(blob)}

    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": kinds[0], "config": descriptor(kinds[1], config),
        "layers": [descriptor(kinds[2], blob) for blob, _ in built],
    }, indent=3).encode()
    return SampleImage(config, tuple(blob for blob, _ in built), manifest, kinds[0])


def push_sample_image(client: Any, repository: str, tag: str, image: SampleImage | None = None) -> str:
    """Upload ``image``'s blobs and manifest through an imagectl RegistryClient (no docker); returns the digest."""
    from imagectl.registry import Manifest

    image = image or make_sample_image()
    for blob in image.blobs:
        client.upload_blob(repository, blob)
    return str(client.put_manifest(repository, tag, Manifest.from_bytes(image.manifest, image.media_type)))


CHANGE_MARK = b"\n# changed in the registry\n"


def change_a_file_in_the_top_layer(client: Any, repository: str, tag: str) -> str:
    """Replace the top layer of ``repository:tag`` in the registry by one where the first non-empty regular file
    ends with :data:`CHANGE_MARK` (labels and everything else kept; a new config and manifest under ``tag``), as if
    someone had changed the image after it was pushed; returns the path of the changed file."""
    from imagectl.registry import Manifest

    manifest = client.get_manifest(repository, tag)
    data = manifest.json()
    top = data["layers"][-1]
    with client.open_blob(repository, top["digest"]) as reader:
        original = gzip.decompress(reader.read())
    changed_path, out = "", io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(original)) as source, tarfile.open(fileobj=out, mode="w",
                                                                              format=tarfile.PAX_FORMAT) as target:
        for member in source.getmembers():
            content = source.extractfile(member).read() if member.isfile() else None
            if content is not None and not changed_path and member.size > 0:
                changed_path, content = member.name, content + CHANGE_MARK
                member.size = len(content)
            target.addfile(member, io.BytesIO(content) if content is not None else None)
    assert changed_path, "the top layer has no regular file to change"
    layer_tar = out.getvalue()
    layer = gzip.compress(layer_tar, mtime=0)
    config = json.loads(client.read_blob(repository, data["config"]["digest"]))
    config["rootfs"]["diff_ids"][-1] = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    config_bytes = json.dumps(config).encode()
    client.upload_blob(repository, layer)
    client.upload_blob(repository, config_bytes)
    top.update(digest="sha256:" + hashlib.sha256(layer).hexdigest(), size=len(layer))
    data["config"].update(digest="sha256:" + hashlib.sha256(config_bytes).hexdigest(), size=len(config_bytes))
    client.put_manifest(repository, tag, Manifest.from_bytes(json.dumps(data).encode(), manifest.media_type))
    return changed_path.removeprefix("./")
