"""The registry client against registries that misbehave: bodies without end, pagination without end, silence,
slow drips, and token realms that would take credentials elsewhere (issue 9, items 6 to 9).

Most of these a real registry cannot be made to do, so small fake servers on loopback stand in
(:mod:`tests.integration.support.hostile`); the token realm tests run a real CNCF distribution registry whose
challenge names a realm on another host.  The CLI tests run ``imagectl`` in a child process: exit status 1, one
line naming the host, in bounded time and memory.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagectl.errors import AuthError, NotFoundError, RegistryError
from imagectl.registry import Credentials, RegistryClient, RetryPolicy, Timeouts, sha256_digest
from imagectl.registry import client as client_module
from imagectl.registry.body import ERROR_BODY_BYTES
from imagectl.registry.client import MAX_CONFIG_BYTES, MAX_MANIFEST_BYTES, MAX_TAG_PAGE_BYTES
from imagectl.registry.index_walk import MAX_INDEX_DEPTH
from imagectl.registry.referrers import list_referrers
from tests.integration.support.hostile import (
    Behavior,
    FakeRegistry,
    Request,
    Wire,
    answer,
    drip,
    endless,
    self_signed_tls,
    silence,
)
from tests.integration.support.registry import free_port
from tests.integration.support.skips import require_binary
from tests.integration.support.upstream import Upstream, artifact, image, nested_index, referrers_index
from tests.integration.support.sleeps import Sleeps

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "torch-2.3-cu121"
SLACK_S = 3.0  # a slow shared CI machine: how much later than its deadline a request may end
DEADLINE_S = 1.0  # the deadline of the tests that wait for one for real: short, these are the suite's real sleeps
BUFFERS = 32 * 1024 * 1024  # what may sit in socket buffers when a reader stops: loopback, both sides
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
# A child process's own peak RSS in KiB: VmHWM of its memory after exec.  Not ru_maxrss, which a child of a large
# pytest process (one that just held a ``docker save``) inherits from the fork: measured 1.1 GB for a 30 MB child.
PEAK_KIB = "int(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))"


def _client(host: str, timeout: float | None = None, real_sleep: bool = False, **kwargs: object) -> RegistryClient:
    retry = RetryPolicy() if real_sleep else RetryPolicy(sleep=Sleeps())
    timeouts = Timeouts(request_s=timeout) if timeout else Timeouts()
    return RegistryClient(host, insecure=True, retry=retry, timeouts=timeouts, **kwargs)  # type: ignore[arg-type]


def _one_line(error: BaseException, host: str) -> str:
    message = str(error)
    assert "\n" not in message and message.startswith(f"registry {host}"), message
    return message


def _fake(routes: dict[str, Behavior], address: str = "127.0.0.1") -> FakeRegistry:
    """A fake registry answering by path prefix (the longest that matches; no query), else 404."""

    def route(request: Request) -> Behavior:
        for prefix in sorted(routes, key=len, reverse=True):
            if request.route.startswith(prefix):
                return routes[prefix]
        return answer(404, {"errors": [{"code": "NAME_UNKNOWN", "message": "no such thing"}]})

    return FakeRegistry(route, address)


@pytest.fixture
def fakes() -> Iterator[list[FakeRegistry]]:
    """Fake registries a test starts (append them); all stopped afterwards."""
    started: list[FakeRegistry] = []
    yield started
    for server in started:
        server.stop()


def _start(fakes: list[FakeRegistry], routes: dict[str, Behavior], address: str = "127.0.0.1") -> FakeRegistry:
    server = _fake(routes, address)
    fakes.append(server)
    return server


# ------------------------------------------------------------------------------------ item 7: unbounded bodies

DIGEST = sha256_digest(b"config")
ENDLESS_CASES = {
    # name: (route, call, cap)
    "manifest": ("/v2/team/x/manifests/", lambda c: c.get_manifest("team/x", "v1"), MAX_MANIFEST_BYTES),
    "config blob": (f"/v2/team/x/blobs/{DIGEST}", lambda c: c.read_blob("team/x", DIGEST), MAX_CONFIG_BYTES),
    "tag list": ("/v2/team/x/tags/list", lambda c: c.list_tags("team/x"), MAX_TAG_PAGE_BYTES),
}


@pytest.mark.parametrize("kind", sorted(ENDLESS_CASES))
@pytest.mark.parametrize("declared", [None, 10**12], ids=["chunked", "huge-content-length"])
def test_an_endless_body_is_cut_at_its_cap(fakes, kind: str, declared: int | None) -> None:
    route, call, cap = ENDLESS_CASES[kind]
    server = _start(fakes, {route: endless(headers={"Content-Type": MANIFEST}, declared=declared)})
    started = time.monotonic()
    with pytest.raises(RegistryError) as caught:
        call(_client(server.host))
    assert f"answer larger than {cap} bytes; stopped reading it" in _one_line(caught.value, server.host)
    assert time.monotonic() - started < 20
    assert server.sent <= (cap if declared is None else 0) + BUFFERS
    assert server.hits(route) == 1  # too large is not worth another try


def test_an_endless_token_answer_is_cut_at_its_cap(fakes) -> None:
    tokens = _start(fakes, {"/token": endless()})
    realm = f'Bearer realm="http://{tokens.host}/token",service="fake"'
    server = _start(fakes, {"/v2/": answer(401, {"errors": []}, {"WWW-Authenticate": realm})})
    with pytest.raises(RegistryError) as caught:
        _client(server.host).get_manifest("team/x", "v1")
    assert "answer larger than 1048576 bytes" in _one_line(caught.value, server.host)
    assert tokens.sent <= 1024 * 1024 + BUFFERS


def test_an_endless_error_body_is_read_only_in_part(fakes) -> None:
    server = _start(fakes, {"/v2/team/x/manifests/": endless(status=404)})
    with pytest.raises(NotFoundError) as caught:
        _client(server.host).get_manifest("team/x", "v1")
    assert _one_line(caught.value, server.host).startswith(f"registry {server.host}: GET manifest team/x:v1: 404")
    assert server.sent <= ERROR_BODY_BYTES + BUFFERS


def test_the_body_of_a_redirect_is_never_read(fakes) -> None:
    config = b'{"architecture": "amd64", "os": "linux"}'
    target = _start(fakes, {"/blob": answer(200, config)}, address="127.0.0.2")
    server = _start(fakes, {"/v2/team/x/blobs/": endless(307, {"Location": f"http://{target.host}/blob"})})
    assert _client(server.host).read_blob("team/x", sha256_digest(config)) == config
    assert server.sent <= BUFFERS and target.hits("/blob") == 1


def test_an_endless_manifest_keeps_the_memory_of_the_process_bounded(fakes, tmp_path: Path) -> None:
    """In a child process, so its peak RSS is its own: without the cap it would hold the whole 256 MiB."""
    server = _start(fakes, {"/v2/": endless(headers={"Content-Type": MANIFEST})})
    code = (
        "from imagectl.registry import RegistryClient; from imagectl.errors import RegistryError\n"
        f"try:\n    RegistryClient({server.host!r}, insecure=True).get_manifest('team/x', 'v1')\n"
        "except RegistryError as exc:\n    print(exc)\n"
        f"print({PEAK_KIB})\n"
    )
    done = _python(["-c", code], tmp_path)
    message, peak_kib = done.stdout.strip().splitlines()
    assert "answer larger than 4194304 bytes" in message, done.stderr
    assert int(peak_kib) < 150 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"


def test_history_on_an_endless_tag_list_is_one_line_in_bounded_memory(fakes, tmp_path: Path) -> None:
    server = _start(fakes, {f"/v2/ml/{PROFILE}/tags/list": endless()})
    done = _imagectl(["history", PROFILE], tmp_path, server.host, report_peak=True)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"imagectl: registry {server.host}: GET tags of ml/{PROFILE}: answer larger than "
                                  f"{MAX_TAG_PAGE_BYTES} bytes")
    assert int(done.stdout.split()[-1]) < 200 * 1024, "peak RSS over 200 MiB"


def test_a_body_that_breaks_off_is_tried_again(fakes) -> None:
    raw = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST, "config": {}, "layers": []}).encode()

    def half(wire: Wire) -> bool:  # half of the body, then it hangs up
        wire.head(200, {"Content-Type": MANIFEST, "Content-Length": str(len(raw))})
        wire.body(raw[: len(raw) // 2])
        return False

    answers = iter([half, answer(200, raw, {"Content-Type": MANIFEST})])
    server = _start(fakes, {})
    server.route = lambda request: next(answers)
    assert _client(server.host).get_manifest("team/x", "v1").raw == raw
    assert server.hits("/v2/team/x/manifests/") == 2


# ------------------------------------------------------------------------------------ item 8: endless pagination


def _tag_page(tags: list[str], next_url: str | None) -> Behavior:
    headers = {"Link": f'<{next_url}>; rel="next"'} if next_url else {}
    return answer(200, {"name": "team/x", "tags": tags}, headers)


def test_a_next_link_to_the_same_page_fails_at_once(fakes) -> None:
    server = _start(fakes, {"/v2/team/x/tags/list": _tag_page(["a"], "/v2/team/x/tags/list")})
    with pytest.raises(RegistryError) as caught:
        _client(server.host).list_tags("team/x")
    assert "the next-page link leads back to a page already read" in _one_line(caught.value, server.host)
    assert server.hits("/v2/team/x/tags/list") == 1


def test_a_cursor_that_comes_back_fails(fakes) -> None:
    pages = {"": (["a"], "/v2/team/x/tags/list?last=a&n=1"), "last=a&n=1": (["b"], "/v2/team/x/tags/list?last=b"),
             "last=b": (["c"], "/v2/team/x/tags/list?n=7&last=a")}  # another URL, but the cursor of page 2
    server = _start(fakes, {})
    server.route = lambda r: _tag_page(*pages[r.path.partition("?")[2]])
    with pytest.raises(RegistryError, match="leads back to a page already read"):
        _client(server.host).list_tags("team/x")
    assert server.hits("/v2/team/x/tags/list") == 3


def test_ever_new_cursors_stop_at_the_page_limit(fakes) -> None:
    server = _start(fakes, {})

    def page(request: Request) -> Behavior:
        n = int(request.path.partition("last=t")[2] or 0) + 1
        return _tag_page([f"t{n}"], f"/v2/team/x/tags/list?last=t{n}")

    server.route = page
    with pytest.raises(RegistryError) as caught:
        _client(server.host).list_tags("team/x")
    assert f"more than {client_module.MAX_TAG_PAGES} pages; stopped listing" in _one_line(caught.value, server.host)
    assert server.hits("/v2/team/x/tags/list") == client_module.MAX_TAG_PAGES == 1000


def test_too_many_tags_or_entries_that_are_not_tags_fail(fakes) -> None:
    many = [f"t{i}" for i in range(client_module.MAX_TAGS + 1)]
    server = _start(fakes, {"/v2/team/many/": _tag_page(many, None),
                            "/v2/team/odd/": _tag_page(["ok", "x" * 129], None),
                            "/v2/team/str/": answer(200, {"name": "team/str", "tags": "abc"})})
    with pytest.raises(RegistryError, match=f"more than {client_module.MAX_TAGS} tags"):
        _client(server.host).list_tags("team/many")
    for repository in ("team/odd", "team/str"):
        with pytest.raises(RegistryError, match="entries are not all tags"):
            _client(server.host).list_tags(repository)


def test_history_on_a_looping_registry_is_one_line_exit_1(fakes, tmp_path: Path) -> None:
    route = f"/v2/ml/{PROFILE}/tags/list"
    server = _start(fakes, {})
    server.route = lambda r: _tag_page(["b"], route) if "n=5" in r.path else _tag_page(["a"], route + "?n=5")
    done = _imagectl(["history", PROFILE], tmp_path, server.host)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"imagectl: registry {server.host}: GET tags of ml/{PROFILE}: the next-page link")
    assert len(done.stderr.splitlines()) == 1 and server.hits(route) == 2


# ------------------------------------------------------------------------------------ item 9: hangs


def _fails_in_time(call, host: str, timeout: float) -> str:
    started = time.monotonic()
    with pytest.raises(RegistryError) as caught:
        call()
    elapsed = time.monotonic() - started
    assert elapsed < timeout + SLACK_S, f"took {elapsed:.1f} s"
    message = _one_line(caught.value, host)
    assert f"no complete answer within {timeout:g} s" in message and "[registry] timeout" in message
    return message


def test_a_registry_that_never_answers_fails_within_the_timeout(fakes) -> None:
    server = _start(fakes, {"/v2/": silence()})
    client = _client(server.host, timeout=DEADLINE_S, real_sleep=True)  # the real policy: 4 tries, real waits
    message = _fails_in_time(lambda: client.get_manifest("team/x", "v1"), server.host, DEADLINE_S)
    assert "GET manifest team/x:v1" in message and server.hits("/v2/team/x/manifests/v1") == 1


@pytest.mark.parametrize("kind", ["manifest", "tag list", "config blob"])
def test_a_body_dripping_a_byte_at_a_time_fails_within_the_timeout(fakes, kind: str) -> None:
    """A byte every quarter second: the answer keeps coming (no socket read waits long), so only the request's
    deadline can end it."""
    route, call, _ = ENDLESS_CASES[kind]
    server = _start(fakes, {route: drip(1000, every_s=DEADLINE_S / 4, headers={"Content-Type": MANIFEST})})
    client = _client(server.host, timeout=DEADLINE_S, real_sleep=True)
    message = _fails_in_time(lambda: call(client), server.host, DEADLINE_S)
    assert "the answer was still arriving" in message and server.sent >= 2  # bytes did arrive before the deadline


def test_a_blob_download_must_bring_a_mib_within_the_timeout(fakes) -> None:
    digest = sha256_digest(b"big")
    server = _start(fakes, {"/v2/team/x/blobs/": drip(10 * 1024 * 1024, every_s=0.2)})
    reader = _client(server.host, timeout=DEADLINE_S).open_blob("team/x", digest)
    with reader:
        message = _fails_in_time(lambda: reader.read(), server.host, DEADLINE_S)
    assert "less than 1 MiB of the blob came in that time" in message


def test_a_token_server_that_never_answers_counts_against_the_same_deadline(fakes) -> None:
    tokens = _start(fakes, {"/token": silence()})
    realm = f'Bearer realm="http://{tokens.host}/token",service="fake"'
    server = _start(fakes, {"/v2/": answer(401, {"errors": []}, {"WWW-Authenticate": realm})})
    client = _client(server.host, timeout=DEADLINE_S, real_sleep=True)
    _fails_in_time(lambda: client.list_tags("team/x"), server.host, DEADLINE_S)


def test_a_retry_after_past_the_deadline_fails_at_once(fakes) -> None:
    server = _start(fakes, {"/v2/": answer(503, {"errors": []}, {"Retry-After": "20"})})
    message = _fails_in_time(lambda: _client(server.host, timeout=5, real_sleep=True).list_tags("team/x"),
                             server.host, 5)
    assert "last answer: 503" in message and "no time left to try again" in message
    assert server.hits("/v2/team/x/tags/list") == 1


def test_retries_stop_at_the_deadline(fakes) -> None:
    server = _start(fakes, {"/v2/": answer(503, {"errors": []}, {"Retry-After": "1"})})
    client = RegistryClient(server.host, insecure=True, retry=RetryPolicy(attempts=50),
                            timeouts=Timeouts(request_s=2.5))
    _fails_in_time(lambda: client.list_tags("team/x"), server.host, 2.5)
    assert 2 <= server.hits("/v2/team/x/tags/list") <= 3


def test_an_unreachable_port_still_fails_as_unreachable() -> None:
    host = f"127.0.0.1:{free_port()}"
    with pytest.raises(RegistryError) as caught:
        _client(host, timeout=5).get_manifest("team/x", "v1")
    assert _one_line(caught.value, host).startswith(f"registry {host} unreachable: ")


@pytest.mark.parametrize("where", ["file", "environment"])
def test_history_on_a_hung_registry_fails_within_the_configured_timeout(fakes, tmp_path: Path, where: str) -> None:
    server = _start(fakes, {"/v2/": silence()})
    extra = {"IMAGECTL_REGISTRY_TIMEOUT": "1"} if where == "environment" else {}
    started = time.monotonic()
    done = _imagectl(["history", PROFILE], tmp_path, server.host, timeout=None if extra else 1, env=extra)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"imagectl: registry {server.host}: GET tags of ml/{PROFILE}: no complete answer "
                                  "within 1 s")  # the configured deadline, not the default
    assert elapsed < 1 + 10, f"took {elapsed:.1f} s"  # the deadline, plus starting Python and imagectl


# ------------------------------------------------------------------------------------ item 6: realm on another host


class TokenRegistry:
    """A real ``docker-registry`` on 127.0.0.1 whose bearer challenge names ``realm`` (wherever that is)."""

    def __init__(self, root: Path, realm: str) -> None:
        cert, key = root / "token.crt", root / "token.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                        "/CN=imagectl-test", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
        self.host = f"127.0.0.1:{free_port()}"
        config = {"version": 0.1, "log": {"level": "error", "accesslog": {"disabled": True}},
                  "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
                  "http": {"addr": self.host, "secret": "not-a-secret"},
                  "auth": {"token": {"realm": realm, "service": "svc", "issuer": "iss", "rootcertbundle": str(cert)}}}
        (root / "config.yml").write_text(json.dumps(config))
        self._log = (root / "registry.log").open("wb")
        self._process = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")], stdout=self._log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._wait_until_up(root)

    def _wait_until_up(self, root: Path) -> None:
        import requests

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self._process.poll() is None:
            try:
                if requests.get(f"http://{self.host}/v2/", timeout=1).status_code == 401:
                    return
            except requests.RequestException:
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"docker-registry did not start: {(root / 'registry.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)
        self._log.close()

    def __enter__(self) -> TokenRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def other_host_realm(fakes, tmp_path: Path) -> Iterator[tuple[TokenRegistry, FakeRegistry]]:
    """A real registry on 127.0.0.1 whose realm is plain http on 127.0.0.2, where a fake token server records."""
    require_binary("docker-registry")
    require_binary("openssl")
    tokens = _start(fakes, {"/token": answer(200, {"token": "anonymous-token"})}, address="127.0.0.2")
    registry = TokenRegistry(tmp_path, f"http://{tokens.host}/token")
    yield registry, tokens
    registry.stop()


PASSWORD = "s3cret-Pa55"


def test_credentials_never_go_to_a_plain_http_realm_on_another_host(other_host_realm) -> None:
    registry, tokens = other_host_realm
    client = _client(registry.host, credentials=Credentials("imagectl", PASSWORD))
    with pytest.raises(AuthError) as caught:
        client.get_manifest("team/x", "v1")
    message = _one_line(caught.value, registry.host)
    assert f"token realm {tokens.host} is plain http" in message and "refusing to send credentials" in message
    assert PASSWORD not in message and tokens.requests == []


def test_anonymous_token_requests_may_go_to_another_host(other_host_realm) -> None:
    registry, tokens = other_host_realm
    with pytest.raises(AuthError, match="401"):  # the fake token is refused by the real registry
        _client(registry.host).get_manifest("team/x", "v1")
    assert tokens.hits("/token") == 1 and all("authorization" not in r.headers for r in tokens.requests)


def test_cli_with_logged_in_credentials_refuses_the_realm_in_one_line(other_host_realm, tmp_path: Path) -> None:
    registry, tokens = other_host_realm
    docker = tmp_path / "docker"
    docker.mkdir()
    auth = base64.b64encode(f"imagectl:{PASSWORD}".encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    done = _imagectl(["history", PROFILE], tmp_path, registry.host, env={"DOCKER_CONFIG": str(docker)})
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"token realm {tokens.host} is plain http" in done.stderr and PASSWORD not in done.stderr + done.stdout
    assert tokens.requests == []


# ------------------------------------------------------------------------------------ issue 24, item 1


def _token_server(fakes: list[FakeRegistry], tmp_path: Path | None = None, address: str = "127.0.0.2") -> FakeRegistry:
    """A fake token server on ``address`` that records every request (https with a self-signed certificate when
    ``tmp_path`` is given, for its files)."""
    tls = self_signed_tls(tmp_path, address) if tmp_path is not None else None
    server = FakeRegistry(lambda request: answer(200, {"token": "anonymous-token"}), address, tls=tls)
    fakes.append(server)
    return server


def _refused_without_sending(client: RegistryClient, tokens: FakeRegistry, host: str) -> str:
    """The one-line error of a manifest GET whose realm must get nothing; asserts nothing reached ``tokens``."""
    with pytest.raises(RegistryError) as caught:
        client.get_manifest("team/x", "v1")
    assert tokens.requests == [], [r.headers for r in tokens.requests]
    message = _one_line(caught.value, host)
    assert PASSWORD not in message and base64.b64encode(f"imagectl:{PASSWORD}".encode()).decode() not in message
    return message


def test_a_backslash_realm_from_a_real_registry_gets_no_credentials(fakes, tmp_path: Path) -> None:
    """distribution quotes the realm (Go's %q: the backslash doubled); urlsplit reads the host after the @,
    requests connects to the one before the backslash."""
    require_binary("docker-registry")
    require_binary("openssl")
    tokens = _token_server(fakes)
    with TokenRegistry(tmp_path, f"http://{tokens.host}\\@127.0.0.1/token") as registry:
        client = _client(registry.host, credentials=Credentials("imagectl", PASSWORD))
        message = _refused_without_sending(client, tokens, registry.host)
    assert "token realm" in message and "refus" in message


@pytest.mark.parametrize("realm", [
    "http://{other}\\@127.0.0.1/token",  # the header: a quoted-pair, so the realm holds an @ (user info)
    "http://{other}\\\\@127.0.0.1/token",  # a backslash in the realm itself
    "http://{other}%5C@127.0.0.1/token",
    "http://127.0.0.1@{other}/token",
    "http://ex%41mple@{other}/token",
])
def test_an_odd_realm_on_a_fake_registry_gets_no_credentials(fakes, realm: str) -> None:
    tokens = _token_server(fakes)
    header = f'Bearer realm="{realm.format(other=tokens.host)}",service="svc"'
    server = _start(fakes, {"/v2/": answer(401, {"errors": []}, {"WWW-Authenticate": header})})
    client = _client(server.host, credentials=Credentials("imagectl", PASSWORD))
    message = _refused_without_sending(client, tokens, server.host)
    assert "token realm" in message and "refus" in message


def test_an_https_realm_on_another_host_must_have_a_valid_certificate(fakes, tmp_path: Path) -> None:
    """``insecure`` is for the registry's own host: a realm elsewhere with a self-signed certificate gets nothing."""
    require_binary("docker-registry")
    require_binary("openssl")
    tokens = _token_server(fakes, tmp_path)
    with TokenRegistry(tmp_path, f"https://{tokens.host}/token") as registry:
        client = _client(registry.host, credentials=Credentials("imagectl", PASSWORD))
        message = _refused_without_sending(client, tokens, tokens.host)
    assert "certificate" in message.lower() and f"insecure covers only {registry.host}" in message


def test_an_https_realm_on_the_registrys_own_host_is_used_insecurely_like_the_registry(fakes, tmp_path: Path) -> None:
    require_binary("docker-registry")
    require_binary("openssl")
    tokens = _token_server(fakes, tmp_path, address="127.0.0.1")
    registry = TokenRegistry(tmp_path, f"https://{tokens.host}/token")
    try:
        with pytest.raises(AuthError, match="401"):  # the fake token is refused by the real registry
            _client(registry.host, credentials=Credentials("imagectl", PASSWORD)).get_manifest("team/x", "v1")
    finally:
        registry.stop()
    (asked,) = tokens.requests
    assert base64.b64decode(asked.headers["authorization"][6:]).decode() == f"imagectl:{PASSWORD}"


def test_authorization_is_not_carried_to_another_host_by_a_redirect(fakes) -> None:
    config = b'{"os": "linux"}'
    target = _start(fakes, {"/blob": answer(200, config)}, address="127.0.0.2")

    def blob(request: Request) -> Behavior:
        if "authorization" not in request.headers:
            return answer(401, {"errors": []}, {"WWW-Authenticate": 'Basic realm="fake"'})
        return answer(307, b"", {"Location": f"http://{target.host}/blob"})

    server = _start(fakes, {})
    server.route = blob
    client = _client(server.host, credentials=Credentials("imagectl", PASSWORD))
    assert client.read_blob("team/x", sha256_digest(config)) == config
    assert [("authorization" in r.headers) for r in server.requests] == [False, True]
    assert target.hits("/blob") == 1 and "authorization" not in target.requests[0].headers


def test_a_redirect_loop_stops(fakes) -> None:
    server = _start(fakes, {"/v2/": answer(307, b"", {"Location": "/v2/team/x/manifests/v1"})})
    with pytest.raises(RegistryError, match="more than 10 redirects"):
        _client(server.host).get_manifest("team/x", "v1")
    assert server.hits("/v2/team/x/manifests/v1") == 11


# ------------------------------------------------------------------------------------ helpers


def _python(args: list[str], cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], cwd=cwd, env={**base, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _imagectl(argv: list[str], cwd: Path, host: str, timeout: float | None = None,
              env: dict[str, str] | None = None, report_peak: bool = False) -> subprocess.CompletedProcess[str]:
    """``imagectl ARGV`` with a config naming registry ``host`` (namespace ml, and ``timeout`` if given).

    With ``report_peak`` the last word of stdout is the process's peak RSS in KiB.
    """
    lines = ["[registry]", f'url = "{host}"', 'namespace = "ml"'] + ([f"timeout = {timeout}"] if timeout else [])
    (cwd / "imagectl.toml").write_text("\n".join(lines) + "\n")
    state = {name: str(cwd / name.lower()) for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME")}
    docker = {"DOCKER_CONFIG": str(cwd / "no-docker-config")}
    peak = (f"import sys; from imagectl.cli import main; status = main(sys.argv[1:]); print({PEAK_KIB}); "
            "sys.exit(status)")
    command = ["-c", peak, *argv] if report_peak else ["-m", "imagectl", *argv]
    return _python(command, cwd, {**state, **docker, **(env or {})})


# ------------------------------------------------------------------------------------ issue 36, item 4 and item 7
# A stand-in upstream (:mod:`tests.integration.support.upstream`) behind ``[mirrors]``; the team registry is a real
# CNCF distribution registry (the session's), a namespace of its own per test.

UP_REPO = "up/nvidia/cuda"  # docker.io/nvidia/cuda through the mirror prefix up/
BASE_TAG = "12.1.1-base-ubuntu22.04"  # the base of PROFILE
BASE = f"nvidia/cuda:{BASE_TAG}"


def _upstream(fakes: list[FakeRegistry], repository: str = UP_REPO) -> tuple[Upstream, FakeRegistry]:
    upstream = Upstream(repository)
    server = _start(fakes, {})
    server.route = upstream.route
    return upstream, server


def _bases_sync(cwd: Path, upstream: FakeRegistry, team: str, namespace: str, max_referrers: int | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``imagectl bases sync PROFILE`` from the stand-in ``upstream`` (the docker.io mirror) into ``team``."""
    lines = ["[registry]", f'url = "{team}"', f'namespace = "{namespace}"']
    lines += [f"max_referrers = {max_referrers}"] if max_referrers is not None else []
    lines += ["", "[mirrors]", f'"docker.io" = "{upstream.host}/up"', ""]
    (cwd / "imagectl.toml").write_text("\n".join(lines))
    env = {name: str(cwd / name.lower()) for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME")}
    env["DOCKER_CONFIG"] = str(cwd / "no-docker-config")
    return _python(["-m", "imagectl", "bases", "sync", PROFILE], cwd, env, timeout=timeout)


def _team(registry) -> RegistryClient:
    return RegistryClient(registry.host, insecure=True)


def test_bases_sync_refuses_1500_nested_indexes_in_one_line(fakes, registry, tmp_path: Path) -> None:
    upstream, server = _upstream(fakes)
    top = nested_index(upstream, image(upstream, "leaf"), 1500, BASE_TAG)
    done = _bases_sync(tmp_path, server, registry.host, "hostile-nest")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"imagectl: {BASE}: registry {server.host}: {UP_REPO}@{top.digest}: image indexes nest "
                           f"more than {MAX_INDEX_DEPTH} deep"), line
    # the walk stops at the limit (the team copy's mount walk and the copy's walk each read MAX_INDEX_DEPTH + 1)
    assert upstream.manifest_gets(server.requests, set(upstream.manifests)) <= 2 * (MAX_INDEX_DEPTH + 1)
    assert _team(registry).head_manifest("hostile-nest/bases/nvidia/cuda", BASE_TAG) is None


def test_verify_refuses_1500_nested_indexes_in_one_line(fakes, tmp_path: Path) -> None:
    upstream, server = _upstream(fakes)
    top = nested_index(upstream, image(upstream, "leaf"), 1500, BASE_TAG)
    done = _imagectl(["verify", f"{server.host}/{UP_REPO}:{BASE_TAG}"], tmp_path, server.host)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"imagectl: registry {server.host}: {UP_REPO}@{top.digest}: image indexes nest more than "
                           f"{MAX_INDEX_DEPTH} deep"), line


def test_bases_sync_copies_only_the_referrers_about_the_image(fakes, registry, tmp_path: Path) -> None:
    upstream, server = _upstream(fakes)
    base = image(upstream, "base", BASE_TAG, layers=1)
    other = image(upstream, "another image")
    ours = artifact(upstream, base.digest, "about the base")
    theirs = artifact(upstream, other.digest, "about another image")
    nobody = artifact(upstream, None, "about nothing")
    upstream.referrers[base.digest] = referrers_index([ours, theirs, nobody])
    done = _bases_sync(tmp_path, server, registry.host, "hostile-subject")
    assert done.returncode == 0, done.stderr
    team, repo = _team(registry), "hostile-subject/bases/nvidia/cuda"
    assert team.head_manifest(repo, BASE_TAG) == base.digest
    assert [r.digest for r in list_referrers(team, repo, base.digest)] == [ours.digest]
    assert team.head_manifest(repo, theirs.digest) is None and team.head_manifest(repo, nobody.digest) is None
    notes = [line for line in done.stderr.splitlines() if line.startswith(f"note: {BASE}: referrer ")]
    source = f"{server.host}/{UP_REPO}"
    assert sorted(notes) == sorted([
        f"note: {BASE}: referrer {theirs.digest} in {source}: its subject is {other.digest}, not the image copied "
        f"({base.digest}); not copied",
        f"note: {BASE}: referrer {nobody.digest} in {source}: it names no subject (the image copied is "
        f"{base.digest}); not copied"]), done.stderr


@pytest.mark.parametrize("listing", ["referrers API", "tag schema"])
def test_bases_sync_copies_at_most_max_referrers_of_20000(fakes, registry, tmp_path: Path, listing: str) -> None:
    """20,000 referrers about the image: the configured 5 are read and copied, the rest left, said in one line."""
    upstream, server = _upstream(fakes)
    base = image(upstream, "base", BASE_TAG)
    many = [artifact(upstream, base.digest, f"number {i}") for i in range(20_000)]
    if listing == "referrers API":
        upstream.referrers[base.digest] = referrers_index(many)
    else:  # no API and no referrers index: only the artifacts' own tags (sha256-<subject>.<16 hex>)
        upstream.tag_list = [f"sha256-{base.digest[7:]}.{a.digest[7:23]}" for a in many]
        upstream.tags.update({tag: a.digest for tag, a in zip(upstream.tag_list, many)})
    namespace = f"hostile-many-{listing.split()[0]}"
    done = _bases_sync(tmp_path, server, registry.host, namespace, max_referrers=5)
    assert done.returncode == 0, done.stderr
    team, repo = _team(registry), f"{namespace}/bases/nvidia/cuda"
    first = sorted(a.digest for a in many)[:5]
    assert [r.digest for r in list_referrers(team, repo, base.digest)] == first
    # 19,995 never asked for (by their own tags, the listing reads the 5 it takes, and the copy reads them again)
    reads = 5 if listing == "referrers API" else 10
    assert upstream.manifest_gets(server.requests, {a.digest for a in many}) <= reads
    (line,) = [line for line in done.stderr.splitlines() if "max_referrers" in line]
    assert line == (f"note: {BASE}: {server.host}/{UP_REPO}@{base.digest}: more referrers than [registry] "
                    "max_referrers allows: copied 5 of the first 5 listed, left 19995 uncopied")


def test_a_corrupt_upstream_blob_is_blamed_on_the_upstream(fakes, registry, tmp_path: Path) -> None:
    upstream, server = _upstream(fakes)
    base = image(upstream, "base", BASE_TAG, layers=1)
    layer = base.layers()[0]
    upstream.corrupt[layer.digest] = b"X" * layer.size  # as long as the blob, other bytes
    done = _bases_sync(tmp_path, server, registry.host, "hostile-corrupt")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"imagectl: {BASE}: registry {server.host}: GET blob {UP_REPO}@{layer.digest}: the "
                           f"{layer.size} bytes it sent have digest "), line
    assert "corrupt at this source" in line and registry.host not in line
    team, repo = _team(registry), "hostile-corrupt/bases/nvidia/cuda"
    assert not team.blob_exists(repo, layer.digest) and team.head_manifest(repo, BASE_TAG) is None
