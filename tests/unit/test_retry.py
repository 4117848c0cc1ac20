"""The one retry policy (imagectl.retry), and proof that the registry client and the index reader both use it.

The policy is tested on its own with built responses; the two clients against a small scripted HTTP server
on 127.0.0.1 that answers 503 with ``Retry-After: <HTTP date>`` before the real answer.  Every sleep is
injected and recorded, so no test waits.
"""

from __future__ import annotations

import io
import json
import socket
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from imagectl.errors import InputError, NotFoundError, PackageIndexError, RegistryError
from imagectl.pypi import IndexSettings, project_files
from imagectl.registry import RegistryClient
from imagectl.retry import RetryPolicy, loggable_url, retry_after_seconds, send_with_retries

Answer = tuple[int, dict[str, str], bytes]


def _response(status: int, retry_after: str | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.raw = io.BytesIO(b"")
    if retry_after is not None:
        response.headers["Retry-After"] = retry_after
    return response


def _http_date(seconds_from_now: float) -> str:
    return format_datetime(datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now), usegmt=True)


# --- the policy ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 505, 599])
def test_transient_statuses_are_retried(status: int) -> None:
    assert RetryPolicy().should_retry(status)


@pytest.mark.parametrize("status", [200, 201, 400, 401, 403, 404, 405, 409, 501])
def test_definite_answers_are_not_retried(status: int) -> None:
    assert not RetryPolicy().should_retry(status)


def test_connection_errors_and_timeouts_are_retried_but_not_tls_or_bad_urls() -> None:
    policy = RetryPolicy()
    assert policy.retries_error(requests.ConnectionError("refused"))
    assert policy.retries_error(requests.Timeout("slow"))
    assert not policy.retries_error(requests.exceptions.SSLError("bad certificate"))
    assert not policy.retries_error(requests.exceptions.InvalidURL("nope"))


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_s=0.5, max_s=3.0)
    assert [policy.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    policy = RetryPolicy(max_retry_after_s=10.0)
    assert policy.delay(0, _response(429, "4")) == 4.0
    assert policy.delay(0, _response(429, " 0 ")) == 0.0
    assert policy.delay(0, _response(429, "3600")) == 10.0
    assert policy.delay(2, _response(503, "soon")) == policy.delay(2)
    assert policy.delay(1, _response(503)) == policy.delay(1)


def test_retry_after_as_an_http_date() -> None:
    seconds = retry_after_seconds(_response(503, _http_date(20)))
    assert seconds is not None and 15 < seconds <= 20
    assert retry_after_seconds(_response(503, _http_date(-60))) == 0.0
    assert RetryPolicy(max_retry_after_s=5.0).delay(0, _response(503, _http_date(3600))) == 5.0


@pytest.mark.parametrize("value", ["", "soon", "-5", "1.5", "Mon, 99 Foo 2024"])
def test_malformed_retry_after_is_no_hint(value: str) -> None:
    assert retry_after_seconds(_response(503, value)) is None


@pytest.mark.parametrize("bad", [{"attempts": 0}, {"base_s": -1.0}, {"max_s": -1.0}, {"max_retry_after_s": -1.0}])
def test_a_policy_that_cannot_work_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(InputError, match="retry policy"):
        RetryPolicy(**bad)


def test_once_keeps_everything_but_the_attempts() -> None:
    policy = RetryPolicy(attempts=5, base_s=2.0, max_s=4.0)
    assert policy.once() == RetryPolicy(attempts=1, base_s=2.0, max_s=4.0)


def test_loggable_url_drops_credentials_and_query() -> None:
    url = "https://user:secret@pypi.example/simple/torch/?token=abc"
    assert loggable_url(url) == "https://pypi.example/simple/torch/"


# --- the loop ------------------------------------------------------------------------------------


def _scripted(*outcomes: requests.Response | Exception) -> tuple[list[int], Any]:
    calls: list[int] = []

    def send() -> requests.Response:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return calls, send


def test_loop_retries_transient_answers_then_returns_the_good_one() -> None:
    sleeps: list[float] = []
    calls, send = _scripted(_response(503), _response(429, "7"), _response(200))
    assert send_with_retries(send, RetryPolicy(sleep=sleeps.append), "GET x").status_code == 200
    assert len(calls) == 3 and sleeps == [0.5, 7.0]


def test_loop_returns_the_last_transient_answer_when_the_tries_are_used_up() -> None:
    sleeps: list[float] = []
    calls, send = _scripted(*[_response(502) for _ in range(3)])
    assert send_with_retries(send, RetryPolicy(attempts=3, sleep=sleeps.append), "GET x").status_code == 502
    assert len(calls) == 3 and sleeps == [0.5, 1.0]


def test_loop_raises_the_last_transient_error_and_any_other_error_at_once() -> None:
    sleeps: list[float] = []
    calls, send = _scripted(*[requests.ConnectionError(f"refused {n}") for n in range(4)])
    with pytest.raises(requests.ConnectionError, match="refused 3"):
        send_with_retries(send, RetryPolicy(sleep=sleeps.append), "GET x")
    assert len(calls) == 4 and sleeps == [0.5, 1.0, 2.0]
    calls, send = _scripted(requests.exceptions.SSLError("bad certificate"))
    with pytest.raises(requests.exceptions.SSLError):
        send_with_retries(send, RetryPolicy(sleep=sleeps.append), "GET x")
    assert len(calls) == 1 and len(sleeps) == 3


def test_loop_never_retries_a_definite_answer() -> None:
    sleeps: list[float] = []
    calls, send = _scripted(_response(404, "1"))
    assert send_with_retries(send, RetryPolicy(sleep=sleeps.append), "GET x").status_code == 404
    assert len(calls) == 1 and sleeps == []


# --- both clients use it, over real HTTP ---------------------------------------------------------


class ScriptedServer:
    """Answers GET on 127.0.0.1: each path's answers once each, in order (the last one then stays).

    A TLS handshake is hung up on, so an insecure registry client settles on plain http.  :attr:`hits`
    lists the paths asked for, in order.
    """

    def __init__(self, script: dict[str, list[Answer]]) -> None:
        self.script = {path: list(answers) for path, answers in script.items()}
        self.hits: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._server.server_port}"

    def answer(self, path: str) -> Answer:
        with self._lock:
            self.hits.append(path)
            answers = self.script.get(path)
            if not answers:
                return 404, {}, b"not found"
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle(self) -> None:
            if self.request.recv(1, socket.MSG_PEEK) == b"\x16":  # a TLS ClientHello: not spoken here
                return
            super().handle()

        def do_GET(self) -> None:
            status, headers, body = server.answer(self.path.split("?", 1)[0])
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _busy() -> Answer:
    return 503, {"Retry-After": _http_date(20)}, b"busy"


TAGS: Answer = (200, {"Content-Type": "application/json"}, json.dumps({"name": "team/x", "tags": ["a"]}).encode())
PAGE: Answer = (
    200,
    {"Content-Type": "application/vnd.pypi.simple.v1+json"},
    json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": [
        {"filename": "demo-1.0-py3-none-any.whl", "url": "/files/demo-1.0-py3-none-any.whl", "hashes": {}},
    ]}).encode(),
)


@pytest.fixture
def sleeps() -> list[float]:
    return []


def _registry(server: ScriptedServer, policy: RetryPolicy) -> RegistryClient:
    return RegistryClient(server.host, insecure=True, retry=policy)


def _wait_is_the_http_date(sleeps: list[float]) -> None:
    assert len(sleeps) == 1 and 15 < sleeps[0] <= 20


def test_registry_client_honours_an_http_date_retry_after(sleeps: list[float]) -> None:
    with ScriptedServer({"/v2/team/x/tags/list": [_busy(), TAGS]}) as server:
        with _registry(server, RetryPolicy(sleep=sleeps.append)) as client:
            assert client.list_tags("team/x") == ["a"]
    assert server.hits == ["/v2/team/x/tags/list"] * 2
    _wait_is_the_http_date(sleeps)


def test_registry_client_retries_505_and_never_a_404(sleeps: list[float]) -> None:
    with ScriptedServer({"/v2/team/x/tags/list": [(505, {}, b""), TAGS]}) as server:
        with _registry(server, RetryPolicy(sleep=sleeps.append)) as client:
            assert client.list_tags("team/x") == ["a"]
            with pytest.raises(NotFoundError, match="404"):
                client.list_tags("team/gone")
    assert server.hits == ["/v2/team/x/tags/list"] * 2 + ["/v2/team/gone/tags/list"]
    assert sleeps == [0.5]


def test_index_reader_honours_an_http_date_retry_after(sleeps: list[float]) -> None:
    settings = IndexSettings(timeout=5.0, retry=RetryPolicy(sleep=sleeps.append))
    with ScriptedServer({"/simple/demo/": [_busy(), PAGE]}) as server:
        files = project_files(f"http://{server.host}/simple", "demo", settings=settings)
    assert [f.filename for f in files] == ["demo-1.0-py3-none-any.whl"]
    assert server.hits == ["/simple/demo/"] * 2
    _wait_is_the_http_date(sleeps)


def test_index_reader_retries_505_and_never_a_404(sleeps: list[float]) -> None:
    settings = IndexSettings(timeout=5.0, retry=RetryPolicy(sleep=sleeps.append))
    with ScriptedServer({"/simple/demo/": [(505, {}, b""), PAGE]}) as server:
        assert len(project_files(f"http://{server.host}/simple", "demo", settings=settings)) == 1
        with pytest.raises(PackageIndexError, match="not found \\(HTTP 404"):
            project_files(f"http://{server.host}/simple", "gone", settings=settings)
    assert server.hits == ["/simple/demo/"] * 2 + ["/simple/gone/"]
    assert sleeps == [0.5]


def test_both_clients_stop_at_the_same_budget(sleeps: list[float]) -> None:
    policy = RetryPolicy(attempts=3, sleep=sleeps.append)
    with ScriptedServer({"/v2/team/x/tags/list": [(502, {}, b"")], "/simple/demo/": [(502, {}, b"")]}) as server:
        with _registry(server, policy) as client:
            with pytest.raises(RegistryError, match="502"):
                client.list_tags("team/x")
        with pytest.raises(PackageIndexError, match="HTTP 502"):
            project_files(f"http://{server.host}/simple", "demo", settings=IndexSettings(retry=policy))
    assert server.hits == ["/v2/team/x/tags/list"] * 3 + ["/simple/demo/"] * 3
    assert sleeps == [0.5, 1.0] * 2
