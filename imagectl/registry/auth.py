"""Answering a registry's 401 challenge: anonymous, HTTP basic, or the bearer-token flow.

A registry that wants credentials answers ``401`` with ``WWW-Authenticate: Basic realm=...`` or
``WWW-Authenticate: Bearer realm="https://auth.example/token",service="registry",scope="repository:x:pull"``.
For bearer, the :class:`Authenticator` asks the realm for a token for the scope (with basic credentials when
it has some, anonymously otherwise), caches it keyed by realm + service + scope until it expires, and hands
out ``Authorization`` values.  Once a registry's challenge is known, later requests carry a header from the
start, so each scope costs one token request, not one 401 per call.

Credentials go to a token realm only over https, or over plain http to the registry's own loopback host
when the registry is used insecurely (a test or development registry with its token server beside it);
any other realm is refused with an error naming its host (:func:`realm_may_get_credentials`).  Over https
to another host the certificate is always verified (``insecure`` covers the registry's own host only, see
:mod:`.client`).  The realm is read as the request will go: :func:`realm_origin` takes the scheme, host and
port from the URL ``requests`` prepares, as urllib3 parses it to connect, and refuses a realm that holds a
backslash, user info, a control character or space, or that the standard library's ``urlsplit`` reads
differently (``http://a:1\\@b/`` connects to ``a``, not ``b``), whether or not there are credentials.  A
token answer is read with a cap (``MAX_TOKEN_BYTES``) within the request's deadline.

Tokens and passwords stay inside this module's objects: no repr, log line or error message shows them.
"""

from __future__ import annotations

import base64
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol
from urllib.parse import urlsplit

import requests
import urllib3

from ..errors import AuthError
from .credentials import Credentials
from .deadline import Deadline
from .error_factory import error_from_response, oci_error_detail
from .loopback import hostname, is_loopback_name

log = logging.getLogger(__name__)

_PARAM_RE = re.compile(r'([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')
_QUOTED_PAIR_RE = re.compile(r"\\(.)")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_DEFAULT_TOKEN_LIFETIME_S = 60
_EXPIRY_MARGIN_S = 5.0
MAX_TOKEN_BYTES = 1024 * 1024

CredentialsLookup = Callable[[str], "Credentials | None"]


class TokenGet(Protocol):
    """How the authenticator reaches a token server: a GET through the client's retrying, TLS-aware request path,
    which reads the answer's body (at most ``MAX_TOKEN_BYTES``) before ``deadline``."""

    def __call__(self, url: str, deadline: Deadline, *, params: object = None,
                 headers: Mapping[str, str] | None = None) -> requests.Response: ...


def credentials_given(credentials: Credentials) -> CredentialsLookup:
    """The lookup of credentials given up front: it answers them for any registry."""
    return lambda registry: credentials


@dataclass(frozen=True)
class Challenge:
    """A parsed ``WWW-Authenticate`` challenge: scheme (lower case) and its parameters."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str:
        return self.params.get("realm", "")

    @property
    def service(self) -> str:
        return self.params.get("service", "")

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.params.get("scope", "").split())


def parse_challenge(header: str) -> Challenge | None:
    """The challenge in a ``WWW-Authenticate`` value, or None if the value is empty or has no scheme."""
    scheme, _, rest = header.strip().partition(" ")
    if not scheme or "=" in scheme:
        return None
    params = {}
    for match in _PARAM_RE.finditer(rest):
        quoted, bare = match.group(2), match.group(3)
        params[match.group(1).lower()] = _QUOTED_PAIR_RE.sub(r"\1", quoted) if quoted is not None else bare
    return Challenge(scheme.lower(), params)


def repository_scope(repository: str, *actions: str) -> str:
    """The token scope ``repository:<name>:<actions>`` (``repository:team/torch:pull,push``)."""
    return f"repository:{repository}:{','.join(actions)}"


def merge_scopes(*groups: tuple[str, ...]) -> tuple[str, ...]:
    """The scopes of ``groups`` merged per resource, actions sorted: one spelling for one access.

    ``repository:a:push,pull`` and ``repository:a:pull`` become ``repository:a:pull,push``, so a token
    cached for the scopes imagectl asked for is found again whatever order a registry's challenge uses.
    """
    actions: dict[str, set[str]] = {}
    for scope in (scope for group in groups for scope in group):
        resource, sep, wanted = scope.rpartition(":")
        if not sep:
            resource, wanted = scope, ""
        actions.setdefault(resource, set()).update(a for a in wanted.split(",") if a)
    return tuple(f"{res}:{','.join(sorted(acts))}" if acts else res for res, acts in actions.items())


@dataclass(frozen=True)
class Origin:
    """Where a request to a URL goes: scheme, host (lower case, no IPv6 brackets) and port."""

    scheme: str
    host: str
    port: int


def realm_origin(realm: str) -> Origin | None:
    """Where ``requests`` will connect for a GET of ``realm``: read from the URL it prepares, parsed as urllib3
    parses it to pick the connection; None for a realm that is not a plain http(s) URL or that two parsers
    read differently (see the module docstring).  Never raises."""
    if "\\" in realm or "@" in realm or any(c.isspace() or not c.isprintable() for c in realm):
        return None
    try:
        prepared = requests.models.PreparedRequest()
        prepared.prepare_url(realm, None)
        parsed = urllib3.util.parse_url(prepared.url or "")
        split = urlsplit(realm)
        split_port = split.port
    except (requests.RequestException, urllib3.exceptions.HTTPError, ValueError):
        return None
    scheme, host = (parsed.scheme or "").lower(), (parsed.host or "").lower().strip("[]")
    if scheme not in _DEFAULT_PORTS or not host or parsed.auth:
        return None
    port = parsed.port or _DEFAULT_PORTS[scheme]
    if (split.scheme.lower(), (split.hostname or ""), split_port or _DEFAULT_PORTS[scheme]) != (scheme, host, port):
        return None
    return Origin(scheme, host, port)


def realm_may_get_credentials(realm: str, registry: str, *, insecure: bool) -> bool:
    """True if credentials may be sent to token ``realm`` (a URL) for ``registry`` (``host[:port]``).

    Only to a realm :func:`realm_origin` can read, over https, or over plain http when the registry is used
    ``insecure``-ly and the realm is on the registry's own loopback host (any port).  Never raises.
    """
    origin = realm_origin(realm)
    if origin is None:
        return False
    if origin.scheme == "https":
        return True
    return insecure and origin.host == hostname(registry) and is_loopback_name(origin.host)


def realm_host(realm: str) -> str:
    """The ``host[:port]`` of a realm URL, without user info (for messages); never raises."""
    return urlsplit(realm).netloc.rpartition("@")[2] or realm[:80]


def _connect_host(realm: str) -> str:
    """The ``host[:port]`` requests would connect to for an odd ``realm`` (for messages); never raises."""
    try:
        parsed = urllib3.util.parse_url(realm)
    except (urllib3.exceptions.HTTPError, ValueError):
        return "(unparsable)"
    return f"{parsed.host}:{parsed.port}" if parsed.port else str(parsed.host or "(no host)")


def basic_header(credentials: Credentials) -> str:
    """The ``Authorization`` value for HTTP basic authentication."""
    pair = f"{credentials.username}:{credentials.password}".encode()
    return "Basic " + base64.b64encode(pair).decode("ascii")


@dataclass
class _Token:
    value: str = field(repr=False)
    expires_at: float


class TokenCache:
    """Bearer tokens keyed by (realm, service, scopes), each dropped when it expires; one per client."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tokens: dict[tuple[str, str, tuple[str, ...]], _Token] = {}

    def __repr__(self) -> str:
        return f"TokenCache({len(self._tokens)} tokens)"

    def get(self, key: tuple[str, str, tuple[str, ...]]) -> str | None:
        """The cached token for ``key`` if it has not expired, else None."""
        token = self._tokens.get(key)
        if token is None or token.expires_at <= self._clock():
            self._tokens.pop(key, None)
            return None
        return token.value

    def put(self, key: tuple[str, str, tuple[str, ...]], value: str, lifetime_s: float) -> None:
        """Remember ``value`` for ``key`` for ``lifetime_s`` seconds (less a small safety margin)."""
        margin = min(_EXPIRY_MARGIN_S, lifetime_s / 10)
        self._tokens[key] = _Token(value, self._clock() + lifetime_s - margin)

    def forget(self, key: tuple[str, str, tuple[str, ...]]) -> None:
        """Drop the token for ``key`` (the registry refused it)."""
        self._tokens.pop(key, None)


class Authenticator:
    """Hands out ``Authorization`` values for one registry and answers its 401 challenges.

    ``lookup(registry)`` is called once, on the first challenge that needs credentials (so an anonymous registry
    never runs a credential helper; credentials given up front come as :func:`credentials_given`); without one
    there are none.  ``insecure`` (the registry is loopback or marked insecure) permits sending credentials to a
    plain-http token realm on the registry's own loopback host, and nowhere else
    (:func:`realm_may_get_credentials`).
    """

    def __init__(self, registry: str, get_token: TokenGet, lookup: CredentialsLookup | None = None, *,
                 insecure: bool = False, cache: TokenCache | None = None) -> None:
        self.registry = registry
        self._get_token = get_token
        self._credentials: Credentials | None = None
        self._lookup = lookup
        self._insecure = insecure
        self._cache = cache or TokenCache()
        self._challenge: Challenge | None = None

    def __repr__(self) -> str:
        scheme = self._challenge.scheme if self._challenge else "unknown"
        return f"Authenticator(registry={self.registry!r}, scheme={scheme!r})"

    def header_for(self, scopes: tuple[str, ...], deadline: Deadline) -> str | None:
        """The ``Authorization`` value to send up front for ``scopes``; None until a challenge is known.

        A token request it needs must finish before ``deadline``.  Raises AuthError if the token server refuses
        the credentials or the realm may not get them, RegistryError if it cannot be reached in time.
        """
        if self._challenge is None:
            return None
        return self._header(self._challenge, merge_scopes(scopes), deadline)

    def answer(self, response: requests.Response, scopes: tuple[str, ...], deadline: Deadline) -> str | None:
        """The ``Authorization`` value to retry a 401 ``response`` with; None if there is nothing to try.

        A bearer token cached for these scopes is dropped first (the registry refused it).  Raises
        AuthError if the token server refuses the credentials or the realm may not get them, RegistryError if
        it cannot be reached before ``deadline``.
        """
        challenge = parse_challenge(response.headers.get("WWW-Authenticate", ""))
        if challenge is None or challenge.scheme not in ("basic", "bearer"):
            return None
        self._challenge = Challenge(challenge.scheme, {k: v for k, v in challenge.params.items() if k != "scope"})
        wanted = merge_scopes(scopes, challenge.scopes)
        self._cache.forget(self._key(challenge, wanted))
        return self._header(challenge, wanted, deadline)

    def credentials(self) -> Credentials | None:
        """The credentials for this registry, looked up at most once; None when there are none."""
        if self._lookup is not None:
            self._credentials, self._lookup = self._lookup(self.registry), None
        return self._credentials

    def _header(self, challenge: Challenge, scopes: tuple[str, ...], deadline: Deadline) -> str | None:
        if challenge.scheme == "basic":
            credentials = self.credentials()
            return basic_header(credentials) if credentials else None
        key = self._key(challenge, scopes)
        token = self._cache.get(key)
        if token is None:
            token, lifetime = self._fetch_token(challenge, scopes, deadline)
            self._cache.put(key, token, lifetime)
        return f"Bearer {token}"

    @staticmethod
    def _key(challenge: Challenge, scopes: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
        return (challenge.realm, challenge.service, scopes)

    def _fetch_token(self, challenge: Challenge, scopes: tuple[str, ...], deadline: Deadline) -> tuple[str, float]:
        """Ask the realm for a token; returns (token, lifetime in seconds). Raises AuthError or RegistryError."""
        realm = challenge.realm
        if not realm.startswith(("https://", "http://")) or not urlsplit(realm).hostname:
            raise AuthError(f"registry {self.registry}: bearer challenge has no usable realm ({realm[:80]!r})")
        if realm_origin(realm) is None:
            raise AuthError(f"registry {self.registry}: token realm {_connect_host(realm)} is not a plain URL (it "
                            "holds a backslash, user info, a space or something parsers read differently); refusing it")
        credentials = self.credentials()
        if credentials and not realm_may_get_credentials(realm, self.registry, insecure=self._insecure):
            raise AuthError(
                f"registry {self.registry}: token realm {realm_host(realm)} is plain http and not this registry's "
                "own loopback host; refusing to send credentials there (a token realm must be https)"
            )
        headers = {"Authorization": basic_header(credentials)} if credentials else {}
        params = [("service", challenge.service)] if challenge.service else []
        params += [("scope", scope) for scope in scopes]
        log.debug("requesting a token from %s for %s", realm_host(realm), " ".join(scopes) or "no scope")
        response = self._get_token(realm, deadline, params=params, headers=headers)
        if response.status_code in (401, 403):
            raise self._refused(response, realm, credentials)
        if response.status_code != 200:
            raise error_from_response(response, self.registry, f"token from {realm}")
        return _parse_token_answer(response, self.registry, realm)

    def _refused(self, response: requests.Response, realm: str, credentials: Credentials | None) -> AuthError:
        who = f"user {credentials.username!r}" if credentials else "anonymous access (no credentials found)"
        detail = oci_error_detail(response)
        suffix = f" ({detail})" if detail else ""
        status = response.status_code
        return AuthError(f"registry {self.registry}: token server {realm} refused {who}: {status}{suffix}")


def _parse_token_answer(response: requests.Response, registry: str, realm: str) -> tuple[str, float]:
    try:
        answer = response.json()
        token = answer.get("token") or answer.get("access_token")
        lifetime = float(answer.get("expires_in") or _DEFAULT_TOKEN_LIFETIME_S)
    except (ValueError, AttributeError, TypeError):
        raise AuthError(f"registry {registry}: token server {realm} answered something that is not a token") from None
    if not isinstance(token, str) or not token:
        raise AuthError(f"registry {registry}: token server {realm} answered no token")
    return token, lifetime
