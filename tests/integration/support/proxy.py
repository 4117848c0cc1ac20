"""A forwarding proxy in front of a real registry that holds requests back or rewrites answers on purpose.

:class:`TamperingProxy` passes every request to ``upstream`` and its answer back, with three faults a test can
arm: :meth:`~TamperingProxy.hold` keeps the next request of a method and path waiting (its
:class:`Hold` says when one arrived; the test releases it), so a test can let another writer finish in
between, as a slow network would; :meth:`~TamperingProxy.rewrite` changes a header of every answer to
requests under a path (a proxy that lies about ``Docker-Content-Digest``); :meth:`~TamperingProxy.fail` answers every
request of a method under a path with an error status itself, without asking the registry (a registry front that
answers 500), until :meth:`~TamperingProxy.heal`; :meth:`~TamperingProxy.once` runs a test's function on the next
request of a method under a path, in place of the registry's answer when it returns a status (a registry that did
part of the work and then failed).  Everything is bounded: a held request goes on by itself after
``MAX_HOLD_S``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import requests

MAX_HOLD_S = 30.0


@dataclass
class Hold:
    """One held request: ``reached`` is set when it arrives; ``release()`` lets it go on to the registry."""

    method: str
    path: str
    reached: threading.Event = field(default_factory=threading.Event)
    gate: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.gate.set()


class TamperingProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (``http://host:port``); see the module docstring."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._holds: list[Hold] = []
        self._rewrites: list[tuple[str, str, Callable[[str], str]]] = []
        self._failures: list[tuple[str, str, int]] = []
        self._once: list[tuple[str, str, Callable[[str], int | None]]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.host = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True).start()

    def hold(self, method: str, path: str) -> Hold:
        """Hold the next ``method`` request of exactly ``path`` until the test releases it."""
        hold = Hold(method, path)
        with self._lock:
            self._holds.append(hold)
        return hold

    def rewrite(self, path_prefix: str, header: str, change: Callable[[str], str]) -> None:
        """Answer every request under ``path_prefix`` with ``header`` changed by ``change`` (when present)."""
        with self._lock:
            self._rewrites.append((path_prefix, header.lower(), change))

    def fail(self, method: str, path_prefix: str, status: int = 500) -> None:
        """Answer every ``method`` request under ``path_prefix`` with ``status`` (the registry never sees it)."""
        with self._lock:
            self._failures.append((method, path_prefix, status))

    def once(self, method: str, path_prefix: str, act: Callable[[str], int | None]) -> None:
        """Call ``act(path)`` on the next ``method`` request under ``path_prefix``; when it returns a status, answer
        that status (the registry never sees the request), else forward it."""
        with self._lock:
            self._once.append((method, path_prefix, act))

    def heal(self) -> None:
        """Forget every :meth:`fail`."""
        with self._lock:
            self._failures.clear()

    def failure_for(self, method: str, path: str) -> int | None:
        """The status a :meth:`fail` (or an armed :meth:`once`) gives this request, if any."""
        with self._lock:
            armed = next((o for o in self._once if o[0] == method and path.startswith(o[1])), None)
            if armed is not None:
                self._once.remove(armed)
            failure = next((status for m, prefix, status in self._failures if m == method and path.startswith(prefix)),
                           None)
        status = armed[2](path) if armed is not None else None
        return status if status is not None else failure

    def stop(self) -> None:
        """Release what is held and stop serving."""
        with self._lock:
            holds = list(self._holds)
        for hold in holds:
            hold.release()
        self._server.shutdown()
        self._server.server_close()

    def arrived(self, method: str, path: str) -> None:
        """Note a request; wait while a hold for it is armed (bounded)."""
        with self._lock:
            self.seen.append((method, path))
            hold = next((h for h in self._holds if (h.method, h.path) == (method, path)), None)
            if hold is not None:
                self._holds.remove(hold)
        if hold is not None:
            hold.reached.set()
            hold.gate.wait(MAX_HOLD_S)

    def headers_for(self, path: str, headers: dict[str, str]) -> dict[str, str]:
        with self._lock:
            rewrites = [(h, c) for p, h, c in self._rewrites if path.startswith(p)]
        for header, change in rewrites:
            for key in [k for k in headers if k.lower() == header]:
                headers[key] = change(headers[key])
        return headers


def _handler(proxy: TamperingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            path = urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            proxy.arrived(self.command, path)
            failure = proxy.failure_for(self.command, path)
            if failure is not None:
                body = b'{"errors":[{"code":"UNKNOWN","message":"injected by the test proxy"}]}'
                self.send_response(failure)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            answer = requests.request(self.command, proxy.upstream + self.path, headers=headers, data=body,
                                      allow_redirects=False, timeout=30)
            content = b"" if self.command == "HEAD" else answer.content
            skip = ("content-length", "transfer-encoding", "connection", "content-encoding")
            passed = {k: v.replace(proxy.upstream, f"http://{proxy.host}") for k, v in answer.headers.items()
                      if k.lower() not in skip}
            self.send_response(answer.status_code)
            for key, value in proxy.headers_for(path, passed).items():
                self.send_header(key, value)
            size = answer.headers.get("Content-Length") if self.command == "HEAD" else str(len(content))
            self.send_header("Content-Length", size or "0")
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
