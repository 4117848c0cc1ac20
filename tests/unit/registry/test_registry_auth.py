"""Challenge parsing, scopes, basic headers, the token cache and where credentials may go: pieces of the auth flow.

The flow itself (401, token server, retry once, cache per scope) is tested against a real registry and
token server in tests/integration/test_registry_client.py.
"""

from __future__ import annotations

import base64

import pytest
import requests

from imagectl.errors import AuthError
from imagectl.registry.auth import (
    Authenticator,
    Challenge,
    Origin,
    TokenCache,
    basic_header,
    credentials_given,
    merge_scopes,
    parse_challenge,
    realm_may_get_credentials,
    realm_origin,
    repository_scope,
)
from imagectl.registry.credentials import Credentials
from imagectl.registry.deadline import Deadline


def test_bearer_challenge_with_quoted_commas_in_scope() -> None:
    header = ('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
              'scope="repository:library/ubuntu:pull,push"')
    challenge = parse_challenge(header)
    assert challenge == Challenge("bearer", {
        "realm": "https://auth.docker.io/token", "service": "registry.docker.io",
        "scope": "repository:library/ubuntu:pull,push",
    })
    assert challenge.scopes == ("repository:library/ubuntu:pull,push",)


def test_challenge_with_several_scopes_spaces_and_unquoted_values() -> None:
    challenge = parse_challenge('BEARER  realm=https://r.example/token , scope="repository:a:pull repository:b:pull"')
    assert challenge is not None and challenge.scheme == "bearer"
    assert challenge.realm == "https://r.example/token" and challenge.service == ""
    assert challenge.scopes == ("repository:a:pull", "repository:b:pull")


def test_basic_challenge() -> None:
    challenge = parse_challenge('Basic realm="Registry Realm"')
    assert challenge is not None and challenge.scheme == "basic" and challenge.realm == "Registry Realm"


@pytest.mark.parametrize("header", ["", "   ", 'realm="x"'])
def test_no_challenge(header: str) -> None:
    assert parse_challenge(header) is None


def test_scopes() -> None:
    assert repository_scope("team/torch", "pull", "push") == "repository:team/torch:pull,push"
    assert merge_scopes(("repository:a:pull", "repository:b:pull"), ("repository:b:pull",), ()) == (
        "repository:a:pull", "repository:b:pull"
    )


def test_scopes_merge_per_resource_whatever_the_order_of_actions() -> None:
    ours = (repository_scope("team/x", "pull", "push"),)
    assert merge_scopes(ours, ("repository:team/x:push,pull",)) == merge_scopes(ours) == ours
    assert merge_scopes(("repository:team/x:pull",), ("repository:team/x:delete", "registry:catalog:*")) == (
        "repository:team/x:delete,pull", "registry:catalog:*"
    )
    assert merge_scopes(("repository:host:5000/x:pull",)) == ("repository:host:5000/x:pull",)


def test_basic_header_encodes_user_and_password() -> None:
    header = basic_header(Credentials("alice", "p:w"))
    assert header.startswith("Basic ") and base64.b64decode(header[6:]) == b"alice:p:w"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_cache_is_keyed_by_realm_service_and_scopes() -> None:
    cache = TokenCache(Clock())
    pull = ("https://auth/token", "svc", ("repository:a:pull",))
    cache.put(pull, "tok-pull", 300)
    assert cache.get(pull) == "tok-pull"
    assert cache.get(("https://auth/token", "svc", ("repository:a:pull,push",))) is None
    assert cache.get(("https://auth/token", "other", ("repository:a:pull",))) is None
    assert cache.get(("https://other/token", "svc", ("repository:a:pull",))) is None


def test_token_cache_drops_tokens_before_they_expire_and_on_forget() -> None:
    clock = Clock()
    cache = TokenCache(clock)
    key = ("r", "s", ("x",))
    cache.put(key, "tok", 60)
    clock.now += 54
    assert cache.get(key) == "tok"
    clock.now += 2  # within the safety margin of the 60 s lifetime
    assert cache.get(key) is None
    cache.put(key, "tok2", 60)
    cache.forget(key)
    assert cache.get(key) is None


def test_token_cache_repr_shows_no_token() -> None:
    cache = TokenCache(Clock())
    cache.put(("r", "s", ()), "very-secret-token", 60)
    assert "very-secret-token" not in repr(cache)


def test_escaped_quotes_in_a_quoted_value() -> None:
    challenge = parse_challenge('Bearer realm="https://r/token",service="say \\"hi\\", twice"')
    assert challenge is not None and challenge.service == 'say "hi", twice'


# ---- where credentials may go (issue 9, item 6); the flow against a real registry: test_hostile_registry.py

@pytest.mark.parametrize(("realm", "registry", "insecure", "allowed"), [
    ("https://auth.example.com/token", "registry.example.com", False, True),  # https: anywhere
    ("https://auth.example.com/token", "127.0.0.1:5000", True, True),
    ("http://127.0.0.1:5001/token", "127.0.0.1:5000", True, True),  # the registry's own loopback host
    ("http://localhost:5001/token", "localhost:5000", True, True),
    ("http://[::1]:5001/token", "[::1]:5000", True, True),
    ("http://127.0.0.1:5001/token", "127.0.0.1:5000", False, False),  # a registry used securely: never http
    ("http://127.0.0.2:5001/token", "127.0.0.1:5000", True, False),  # another (loopback) host
    ("http://localhost:5001/token", "127.0.0.1:5000", True, False),
    ("http://other-host:5001/token", "127.0.0.1:5000", True, False),
    ("http://reg.lan:5001/token", "reg.lan:5000", True, False),  # marked insecure, but not loopback
    ("ftp://127.0.0.1/token", "127.0.0.1:5000", True, False),
])
def test_credentials_go_only_over_https_or_to_the_registrys_own_loopback_host(realm, registry, insecure, allowed):
    assert realm_may_get_credentials(realm, registry, insecure=insecure) is allowed


class TokenSend:
    """The client's send function as the authenticator sees it: records what it is asked, answers a token."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, str]]] = []

    def __call__(self, url, deadline, *, params=None, headers=None):
        self.asked.append((url, dict(headers or {})))
        response = requests.Response()
        response.status_code, response._content = 200, b'{"token": "tok", "expires_in": 300}'
        return response


def _challenge(realm: str) -> requests.Response:
    response = requests.Response()
    response.status_code = 401
    quoted = realm.replace("\\", "\\\\").replace('"', '\\"')  # as distribution quotes it (Go's %q)
    response.headers["WWW-Authenticate"] = f'Bearer realm="{quoted}",service="svc"'
    return response


ALICE = Credentials("alice", "pa55-w0rd")


def _answer(realm: str, registry: str = "127.0.0.1:5000", insecure: bool = True,
            credentials: Credentials | None = ALICE) -> tuple[object, TokenSend]:
    send = TokenSend()
    auth = Authenticator(registry, send, credentials_given(credentials) if credentials else None, insecure=insecure)
    deadline = Deadline.after(30, registry, "GET manifest team/x:v1")
    try:
        return auth.answer(_challenge(realm), ("repository:team/x:pull",), deadline), send
    except AuthError as exc:
        return exc, send


def test_a_plain_http_realm_on_another_host_gets_no_credentials_and_no_request() -> None:
    error, send = _answer("http://127.0.0.2:9000/token")
    assert isinstance(error, AuthError) and send.asked == []
    message = str(error)
    assert message.startswith("registry 127.0.0.1:5000: token realm 127.0.0.2:9000 is plain http")
    assert "refusing to send credentials" in message and "pa55-w0rd" not in message


# ---- realms two parsers read differently (issue 24, item 1); against real servers: test_hostile_registry.py

@pytest.mark.parametrize(("realm", "connects_to"), [
    ("http://127.0.0.2:5104\\@127.0.0.1/token", "127.0.0.2:5104"),  # urlsplit says 127.0.0.1
    ("http://127.0.0.2:5104%5C@127.0.0.1/token", "127.0.0.1"),
    ("http://u:hidden@127.0.0.2:9000/token", "127.0.0.2:9000"),
    ("http://127.0.0.1:5001@127.0.0.2/token", "127.0.0.2"),
    ("http://ex%41mple.com/token", "ex%41mple.com"),  # urllib3 decodes it, urlsplit does not
    ("http://127.0.0.1 :5001/token", "127.0.0.1 :5001"),
    ("http://127.0.0.1:5001/to\tken", "127.0.0.1:5001"),
    ("http://127.0.0.1:99999/token", "(unparsable)"),
])
def test_an_odd_realm_is_refused_with_or_without_credentials(realm: str, connects_to: str) -> None:
    assert realm_origin(realm) is None
    for credentials in (ALICE, None):
        error, send = _answer(realm, credentials=credentials)
        assert isinstance(error, AuthError) and send.asked == []
        assert str(error).startswith(f"registry 127.0.0.1:5000: token realm {connects_to} is not a plain URL")
        assert "hidden" not in str(error) and "pa55-w0rd" not in str(error)


@pytest.mark.parametrize(("realm", "origin"), [
    ("https://auth.docker.io/token", Origin("https", "auth.docker.io", 443)),
    ("HTTPS://Auth.Example.com:443/token?x=1", Origin("https", "auth.example.com", 443)),
    ("http://[::1]:5001/token", Origin("http", "::1", 5001)),
    ("http://localhost/token", Origin("http", "localhost", 80)),
])
def test_the_origin_of_a_plain_realm_is_where_requests_connects(realm: str, origin: Origin) -> None:
    assert realm_origin(realm) == origin


def test_a_quoted_pair_in_a_challenge_stands_for_its_character() -> None:
    """RFC 9110 quoted-string: ``\\@`` is ``@``, ``\\\\`` one backslash."""
    challenge = parse_challenge('Bearer realm="http://a:1\\@b/t",service="x\\\\y"')
    assert challenge is not None and challenge.realm == "http://a:1@b/t" and challenge.service == "x\\y"


def test_a_realm_that_may_have_them_gets_basic_credentials() -> None:
    for realm in ("http://127.0.0.1:9000/token", "https://auth.example.com/token"):
        header, send = _answer(realm)
        assert header == "Bearer tok"
        assert [url for url, _ in send.asked] == [realm]
        assert base64.b64decode(send.asked[0][1]["Authorization"][6:]) == b"alice:pa55-w0rd"


def test_without_credentials_any_realm_is_asked_anonymously() -> None:
    header, send = _answer("http://other-host:9000/token", credentials=None)
    assert header == "Bearer tok" and send.asked == [("http://other-host:9000/token", {})]


def test_a_registry_used_securely_never_sends_credentials_over_http() -> None:
    error, send = _answer("http://127.0.0.1:9000/token", insecure=False)
    assert isinstance(error, AuthError) and send.asked == []
