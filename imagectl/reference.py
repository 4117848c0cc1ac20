"""Image references: parsing by the Docker reference grammar, normalising, and mirror rewriting.

The grammar is the one the distribution project documents (``reference.go``)::

    reference      := name [ ":" tag ] [ "@" digest ]
    name           := [domain "/"] path-component ["/" path-component]*
    path-component := [a-z0-9]+ (separator [a-z0-9]+)*      separator := "." | "_" | "__" | "-"+
    tag            := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest         := algorithm ":" hex          sha256: 64 hex digits, sha384: 96, sha512: 128 (lower case)

A first component is a domain when it contains "." or ":", is "localhost" or has upper case; otherwise the image is on
Docker Hub (``docker.io``), whose one-component names live under ``library/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from .errors import ValidationError
from .grammar import port_in_range

DEFAULT_DOMAIN = "docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_DOMAIN = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"  # host name
    r"|\[[0-9a-fA-F:]+\])"  # or a bracketed IPv6 address
    r"(?::[0-9]{1,5})?"  # optional port
)
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
# The algorithms the engines accept (go-digest's registered ones), each with its exact length of lower-case hex.
DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
_DIGEST = "(?:" + "|".join(f"{algo}:[a-f0-9]{{{n}}}" for algo, n in DIGEST_HEX_LENGTHS.items()) + ")"
_PATH_RE = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_DOMAIN_RE = re.compile(rf"^{_DOMAIN}$")
_TAG_RE = re.compile(rf"^{_TAG}$")
_DIGEST_RE = re.compile(rf"^{_DIGEST}$")
_MAX_NAME = 255


@dataclass(frozen=True)
class Reference:
    """A parsed, normalised image reference (``domain/path[:tag][@digest]``)."""

    domain: str
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def repository(self) -> str:
        """``domain/path``, the name without tag or digest."""
        return f"{self.domain}/{self.path}"

    def with_tag(self, tag: str) -> "Reference":
        """The same repository with ``tag`` and no digest; raises ValidationError for a bad tag."""
        return Reference(self.domain, self.path, check_tag(tag), None)

    def with_digest(self, digest: str) -> "Reference":
        """The same repository and tag pinned to ``digest``."""
        return Reference(self.domain, self.path, self.tag, check_digest(digest))

    def __str__(self) -> str:
        out = self.repository
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    @property
    def familiar(self) -> str:
        """The short form people type (``nvidia/cuda:12.1.1-runtime-ubuntu22.04``)."""
        full = str(self)
        if self.domain != DEFAULT_DOMAIN:
            return full
        short = full[len(DEFAULT_DOMAIN) + 1 :]
        return short[len("library/") :] if short.startswith("library/") else short


def check_tag(tag: str) -> str:
    """Return ``tag`` if it is a valid tag; raises ValidationError otherwise."""
    if not _TAG_RE.fullmatch(tag or ""):
        raise ValidationError(f"invalid image tag {tag!r}: tags are 1-128 of [A-Za-z0-9_.-], not starting with . or -")
    return tag


def check_digest(digest: str) -> str:
    """Return ``digest`` if it is ``sha256:`` and exactly 64 lower-case hex digits (or sha384:96, sha512:128);
    raises ValidationError otherwise."""
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest):
        algo = digest.partition(":")[0] if isinstance(digest, str) else ""
        want = DIGEST_HEX_LENGTHS.get(algo)
        expected = f"{algo}: and exactly {want} lower-case hex digits" if want else "sha256: and 64 hex digits"
        raise ValidationError(f"invalid image digest {digest!r}: expected {expected}")
    return digest


def _is_domain(first: str) -> bool:
    """The one rule for "this first component is a registry host" (distribution's ``splitDockerDomain``)."""
    return "." in first or ":" in first or first == "localhost" or first != first.lower()


def _split_domain(name: str) -> tuple[str, str]:
    first, sep, rest = name.partition("/")
    if sep and _is_domain(first):
        return first, rest
    return DEFAULT_DOMAIN, name


def names_registry(text: str) -> bool:
    """Whether reference ``text`` names its registry (``ghcr.io/x``, ``127.0.0.1:5000/x``, ``localhost/x``)
    rather than leaving it implicit (``team/img``, which may be a local engine image)."""
    first, sep, _ = text.partition("/")
    return bool(sep) and _is_domain(first)


def _userinfo_end(text: str) -> int:
    """Where the ``user:password@`` a reference must not carry ends (the index after its ``@``), or 0: an ``@``
    before the first ``/``, or the only ``@`` with no ``/`` at all that is not followed by a digest."""
    at, slash = text.find("@"), text.find("/")
    if at < 0 or (slash != -1 and slash < at):
        return 0
    if slash == -1 and _DIGEST_RE.fullmatch(text[at + 1:]):
        return 0  # ``ubuntu@sha256:...``
    return (text.rfind("@", 0, slash) if slash != -1 else at) + 1


def parse_reference(text: str) -> Reference:
    """Parse and normalise an image reference; raises ValidationError naming what is wrong.  A reference with
    credentials (``user:password@host/repo``) is refused without being echoed: registries are logged in to with
    ``docker login`` (the engine's credential store), never through a reference."""
    if not isinstance(text, str) or not text or text != text.strip() or any(c.isspace() for c in text):
        raise ValidationError(f"invalid image reference {text!r}: empty or contains whitespace")
    userinfo = _userinfo_end(text)
    if userinfo:
        raise ValidationError(f"invalid image reference '***@{text[userinfo:]}': an image reference carries no "
                              "credentials (log in to the registry with 'docker login' instead)")
    rest, _, digest = text.partition("@")
    tag = None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
    domain, path = _split_domain(rest)
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = f"library/{path}"
    if not _DOMAIN_RE.fullmatch(domain) or not port_in_range(domain):
        raise ValidationError(f"invalid image reference {text!r}: bad registry host {domain!r} (a port is 1-65535)")
    if not _PATH_RE.fullmatch(path) or len(path) + len(domain) + 1 > _MAX_NAME:
        raise ValidationError(
            f"invalid image reference {text!r}: repository {path!r} must be lower-case components of "
            "[a-z0-9] joined by '.', '_', '__' or '-', separated by '/'"
        )
    if tag is not None:
        try:
            check_tag(tag)
        except ValidationError:
            raise ValidationError(f"invalid image reference {text!r}: bad tag {tag!r}") from None
    if digest:
        try:
            check_digest(digest)
        except ValidationError:
            raise ValidationError(f"invalid image reference {text!r}: bad digest {digest!r}") from None
    return Reference(domain, path, tag, digest or None)


def apply_mirror(ref: Reference, mirrors: Mapping[str, str]) -> Reference:
    """Rewrite ``ref`` to be pulled through the mirror configured for its domain, if any.

    ``mirrors`` maps a registry domain (``docker.io``) to a mirror prefix (``mirror.example.com/dockerhub``);
    the image's path is appended to the prefix.  References of other domains come back unchanged.
    """
    prefix = mirrors.get(ref.domain)
    if not prefix:
        return ref
    mirrored = parse_reference(f"{prefix.rstrip('/')}/{ref.path}")
    return Reference(mirrored.domain, mirrored.path, ref.tag, ref.digest)


# A Dockerfile's FROM line whose image is pinned by digest: (the line up to the image)(where it is pulled from)
# (@sha256:...).  The buildah engine names such a base by its digest (engine/buildah.py), the build key leaves out
# where it is pulled from (images/build_key.py).
PINNED_FROM = re.compile(r"^(FROM\s+(?:--platform=\S+\s+)?)(\S+)(@sha256:[0-9a-f]{64})(?=\s|$)",
                         re.MULTILINE | re.IGNORECASE)
