"""Secrets planted in every place a configuration holds one, run through the failure paths that quote what they were
given or what a server answered: no output line, no cache file and no state file holds any form of any of them
(issue 24, item 2).

Forms searched: as written, percent-decoded, and base64 of each (alone and as ``user:password``, the value of a
Basic Authorization header).  The servers are real sockets on loopback: an index answering 404 or 500, a closed
port, and a registry whose 403 body quotes the request's Authorization header.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

import pytest

PROFILE = "torch-2.3-cu121"
UNLOCKED = "torch-2.3-cu121-py3.11"  # no shipped lock: render and build --plan lock it against the index
INDEX_USER, INDEX_PW = "ind3xuser", "P%40ssInd3xW0rd"  # percent-encoded: the password is P@ssInd3xW0rd
EXTRA_USER, EXTRA_PW = "xtrauser", "Extr4Secr3tW0rd"
ARG_SECRET, PROXY_PW = "Bu1ldArgSecr3t", "Pr0xySecr3tW0rd"
REGISTRY_USER, REGISTRY_PW = "reguser", "Reg1stryPassW0rd"
REF_PW = "RefSecr3tW0rd"
PLANTED = {INDEX_USER: INDEX_PW, EXTRA_USER: EXTRA_PW, "arg": ARG_SECRET, "proxyuser": PROXY_PW,
           REGISTRY_USER: REGISTRY_PW, "refuser": REF_PW}


def forms() -> set[str]:
    """Every form of every planted password that must never appear."""
    out = set()
    for user, secret in PLANTED.items():
        for plain in (secret, unquote(secret)):
            out |= {plain, base64.b64encode(plain.encode()).decode().rstrip("="),
                    base64.b64encode(f"{user}:{plain}".encode()).decode().rstrip("=")}
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:  # a client that hung up: not the test's business
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def answering(status: int) -> type[BaseHTTPRequestHandler]:
    class Index(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = f"error {status} for {self.path}; you sent {self.headers.get('Authorization')}".encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Index


class Registry(BaseHTTPRequestHandler):
    """Asks for Basic credentials, then refuses them with a body that quotes the Authorization header."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        sent = self.headers.get("Authorization")
        if not sent:
            self._answer(401, {"errors": [{"code": "UNAUTHORIZED", "message": "log in"}]},
                         {"WWW-Authenticate": 'Basic realm="registry"'})
        else:
            self._answer(403, {"errors": [{"code": "DENIED", "message": f"denied: Authorization: {sent}",
                                           "detail": {"raw": sent.split()[-1]}}]}, {})

    do_HEAD = do_GET

    def _answer(self, status: int, body: dict, headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


@pytest.fixture
def servers() -> Iterator[dict[str, str]]:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    found = {"closed": closed}
    generators = {"404": serve(answering(404)), "500": serve(answering(500)), "registry": serve(Registry)}
    for name, generator in generators.items():
        found[name] = next(generator)
    yield found
    for generator in generators.values():
        next(generator, None)


def config_text(index: str, registry: str, extra: str) -> str:
    return (f'[pip]\nindex_url = "http://{INDEX_USER}:{INDEX_PW}@{index}/simple"\n'
            f'extra_index_urls = ["http://{EXTRA_USER}:{EXTRA_PW}@{extra}/simple"]\n'
            f'[build]\nargs = {{ TOKEN = "{ARG_SECRET}", PIP_PROXY = "http://proxyuser:{PROXY_PW}@proxy:3128" }}\n'
            f'[registry]\nurl = "{registry}"\nnamespace = "ml"\n')


CASES = {
    "lock-index-404": (("lock", PROFILE, "--as-of", "release"), "404"),
    "lock-index-500": (("lock", PROFILE, "--as-of", "release"), "500"),
    "lock-index-closed": (("lock", PROFILE, "--as-of", "release"), "closed"),
    "render-locks-at-build-time": (("render", UNLOCKED), "404"),
    "plan-refused": (("build", UNLOCKED, "--plan"), "500"),
    "plan-refused-json": (("build", UNLOCKED, "--plan", "--json"), "500"),
    "show": (("show", PROFILE, "--json"), "404"),
    "history-registry-403": (("history", PROFILE), "404"),
    "rollback-registry-403": (("rollback", PROFILE), "404"),
    "verify-index-500": (("matrix", "verify", "--framework", "torch"), "500"),
    "base-with-userinfo": (("build", PROFILE, "--extra", "einops", "--base", f"refuser:{REF_PW}@host/x:1",
                            "--plan"), "404"),
    "import-with-userinfo": (("import", f"refuser:{REF_PW}@host/x:1", "--name", PROFILE, "--no-check"), "404"),
    "config-bad-value": (("show", PROFILE), "bad-config"),
}


@pytest.mark.real_resolver  # the lock paths really read the (failing) index
@pytest.mark.parametrize("case", list(CASES))
def test_no_form_of_a_planted_secret_reaches_output_cache_or_state(run_cli, tmp_path, monkeypatch, servers, case):
    args, index = CASES[case]
    docker = tmp_path / "docker"
    docker.mkdir()
    auth = base64.b64encode(f"{REGISTRY_USER}:{REGISTRY_PW}".encode()).decode()
    (docker / "config.json").write_text(json.dumps({"auths": {servers["registry"]: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(docker))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # no engine: builds are refused
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("IMAGECTL_REGISTRY_TIMEOUT", "5")
    text = config_text(servers.get(index, servers["404"]), servers["registry"], servers["500"])
    if index == "bad-config":  # a password in a value the configuration refuses
        text = text.replace("/simple\"\nextra", "/simple with space\"\nextra", 1)
    (tmp_path / "imagectl.toml").write_text(text)
    if args[0] == "matrix":
        args = (*args, "--index", f"http://{INDEX_USER}:{INDEX_PW}@{servers['500']}/simple")
    result = run_cli(*args)
    assert result.code != 0 or case == "show", (case, result.err)  # each case is a failure path (show: a view)
    seen = {"stdout": result.out, "stderr": result.err}
    for folder in (tmp_path / "cache", tmp_path / "state"):
        for path in folder.rglob("*") if folder.exists() else ():
            if path.is_file() and path.name != "cache.secret":
                seen[str(path)] = path.read_bytes().decode("utf-8", "replace")
    leaks = {(where, form) for where, content in seen.items() for form in forms() if form in content}
    assert leaks == set(), (case, result.err[-1500:])


def test_redact_masks_quoted_credentials_and_leaves_digests_and_versions():
    from imagectl.redact import redact

    basic = base64.b64encode(b"u:RealmPw5xyz").decode()
    assert redact(f'{{"message": "denied for Authorization: Basic {basic}"}}') == \
        '{"message": "denied for Authorization: Basic ***"}'
    assert redact("authorization=Bearer eyJhbGciOi.eyJzdWIiOi.c2ln") == "authorization=Bearer ***"
    assert redact(f"the token was {basic} here") == "the token was *** here"
    assert redact("pw S3cr3tPw and " + base64.b64encode(b"S3cr3tPw").decode(), ["S3cr3tPw"]) == "pw *** and ***"
    kept = "sha256:" + "ab" * 32 + " nvidia-cudnn-cu12==8.9.2.26 layer 3f2a9c8b7d6e5f4a QmFzZTY0VGV4dA"
    assert redact(kept) == kept  # hex digests, versions, and base64 that is not user:password stay
