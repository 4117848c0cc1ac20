"""Challenge parsing, scopes, basic headers and the token cache: pure pieces of the auth flow.

The flow itself (401, token server, retry once, cache per scope) is tested against a real registry and
token server in tests/integration/test_registry_client.py.
"""

from __future__ import annotations

import base64

import pytest

from imagectl.registry.auth import (
    Challenge,
    TokenCache,
    basic_header,
    merge_scopes,
    parse_challenge,
    repository_scope,
)
from imagectl.registry.credentials import Credentials


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
