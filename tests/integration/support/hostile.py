"""A small fake registry for what a real one cannot be made to do: endless or dripping bodies, silence, loops.

:class:`FakeRegistry` is an HTTP/1.1 server on a loopback address (``127.0.0.1`` by default; ``127.0.0.2`` and
the like stand for "another host").  ``route(request)`` picks a *behavior* for each request: a function of the
:class:`Wire` (the connection) that answers and says whether the connection may carry another request.  The
behaviors here: :func:`answer`, :func:`endless`, :func:`drip`, :func:`silence`.

Everything is bounded: an endless body stops after ``MAX_BYTES`` or ``MAX_SECONDS``, a silent or dripping
answer after ``MAX_SECONDS``, and :meth:`FakeRegistry.stop` shuts every connection.  A TLS ClientHello is
answered by closing the connection, so an insecure client settles on plain http at once; a server made with
``tls=`` (:func:`self_signed_tls`) speaks https instead, with a certificate nobody trusts.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

MAX_BYTES = 256 * 1024 * 1024
MAX_SECONDS = 30.0
_CHUNK = b"a" * (64 * 1024)


@dataclass(frozen=True)
class Request:
    """One request the fake registry read: method, path with query, headers (lower-case names)."""

    method: str
    path: str
    headers: dict[str, str]

    @property
    def route(self) -> str:
        return self.path.split("?", 1)[0]


class Wire:
    """The connection a behavior answers on; counts the body bytes it sends."""

    def __init__(self, sock: socket.socket, server: FakeRegistry) -> None:
        self.sock = sock
        self.server = server

    def head(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        """Send the status line and headers (and ``body`` with them, in one write)."""
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Whatever')}"] + [f"{k}: {v}" for k, v in headers.items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        self.server.count(len(body))

    def body(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.server.count(len(data))


Behavior = Callable[[Wire], bool]


def answer(status: int, body: bytes | dict[str, Any] = b"", headers: dict[str, str] | None = None) -> Behavior:
    """A whole answer with a Content-Length (a dict body is sent as JSON); the connection stays open."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body

    def act(wire: Wire) -> bool:
        wire.head(status, {"Content-Type": "application/json", **(headers or {}), "Content-Length": str(len(data))},
                  data)
        return True

    return act


def endless(status: int = 200, headers: dict[str, str] | None = None, declared: int | None = None) -> Behavior:
    """An answer whose body never ends (chunked; or raw after a Content-Length of ``declared``)."""

    def act(wire: Wire) -> bool:
        framing = {"Content-Length": str(declared)} if declared is not None else {"Transfer-Encoding": "chunked"}
        wire.head(status, {"Content-Type": "application/json", **(headers or {}), **framing})
        started = time.monotonic()
        while wire.server.sent < MAX_BYTES and time.monotonic() - started < MAX_SECONDS:
            wire.body(_CHUNK if declared is not None else b"%x\r\n%s\r\n" % (len(_CHUNK), _CHUNK))
        return False

    return act


def drip(length: int, every_s: float = 1.0, status: int = 200, headers: dict[str, str] | None = None) -> Behavior:
    """An answer that declares ``length`` bytes and sends one byte every ``every_s`` seconds."""

    def act(wire: Wire) -> bool:
        wire.head(status, {"Content-Type": "application/json", **(headers or {}), "Content-Length": str(length)})
        started = time.monotonic()
        for _ in range(length):
            if wire.server.stopped.wait(every_s) or time.monotonic() - started > MAX_SECONDS:
                break
            wire.body(b" ")
        return False

    return act


def silence() -> Behavior:
    """Read the request and never answer (until the server stops or ``MAX_SECONDS`` pass)."""

    def act(wire: Wire) -> bool:
        wire.server.stopped.wait(MAX_SECONDS)
        return False

    return act


def self_signed_tls(root: Path, address: str) -> ssl.SSLContext:
    """A server-side TLS context with a fresh self-signed certificate for IP ``address`` (files under ``root``)."""
    cert, key = root / f"tls-{address}.crt", root / f"tls-{address}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={address}",
         "-addext", f"subjectAltName=IP:{address}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


class FakeRegistry:
    """An HTTP/1.1 server on ``address`` (loopback) answering each request as ``route(request)`` says; with ``tls``
    it speaks https (a TLS handshake a client refuses ends the connection before any request is read)."""

    def __init__(self, route: Callable[[Request], Behavior], address: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None) -> None:
        self.route = route
        self.tls = tls
        self.requests: list[Request] = []
        self.sent = 0
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server((address, 0))
        self._listener.settimeout(0.2)
        self.host = f"{address}:{self._listener.getsockname()[1]}"
        self._start(self._accept_loop)

    def __enter__(self) -> FakeRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hits(self, prefix: str = "/") -> int:
        """Requests read so far whose path starts with ``prefix``."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.startswith(prefix))

    def count(self, size: int) -> None:
        with self._lock:
            self.sent += size

    def stop(self) -> None:
        """Close the listener and every connection; wait (bounded) for the threads."""
        self.stopped.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept loop now, not at its next 0.2 s timeout
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in list(self._threads):
            thread.join(timeout=5)

    def _start(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self.stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                self._socks.append(sock)
            self._start(self._serve, sock)

    def _serve(self, sock: socket.socket) -> None:
        try:
            if self.tls is not None:
                sock.settimeout(MAX_SECONDS)
                sock = self.tls.wrap_socket(sock, server_side=True)
                with self._lock:
                    self._socks.append(sock)  # the plain socket is detached now: stop() shuts this one
            elif self._is_tls_hello(sock):
                return
            sock.settimeout(MAX_SECONDS)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader = sock.makefile("rb")
            while not self.stopped.is_set():
                request = _read_request(reader)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                if not self.route(request)(Wire(sock, self)):
                    return
        except OSError:
            return
        finally:
            sock.close()

    def _is_tls_hello(self, sock: socket.socket) -> bool:
        sock.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                return sock.recv(1, socket.MSG_PEEK) in (b"\x16", b"")
            except socket.timeout:
                continue
        return True


def _read_request(reader: BinaryIO) -> Request | None:
    """The next request on the connection (its body read and dropped); None at the end."""
    line = reader.readline(65536).decode("latin-1").strip()
    if not line:
        return None
    method, path = line.split(" ")[:2]
    headers: dict[str, str] = {}
    while (header := reader.readline(65536).decode("latin-1").strip()):
        name, _, value = header.partition(":")
        headers[name.strip().lower()] = value.strip()
    reader.read(int(headers.get("content-length") or 0))
    return Request(method, path, headers)


_REASONS = {200: "OK", 201: "Created", 202: "Accepted", 307: "Temporary Redirect", 401: "Unauthorized",
            404: "Not Found", 429: "Too Many Requests", 503: "Service Unavailable"}
