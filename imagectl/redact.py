"""Secrets out of every line imagectl makes: the one redaction function, used by every error and log path.

What is masked:

- known secret values (build-arg values, index passwords) wherever they appear, as written, percent-decoded and
  base64-encoded (alone and as ``user:password``, the form of a Basic Authorization header), each as ``***``;
- the userinfo of any URL (``https://user:token@host`` becomes ``https://***@host``);
- credentials an answer may quote: the value of an ``Authorization:`` header, a ``Basic``/``Bearer`` token, and
  any base64 word that decodes to ``user:password`` (a registry's error body that echoes the request's header).

Values shorter than :data:`MIN_SECRET_LENGTH` are not masked as values (masking every ``1`` of a build log would
destroy it); URL userinfo and quoted credentials are masked whatever their length.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Iterable
from urllib.parse import unquote

MASK = "***"
MIN_SECRET_LENGTH = 4
# scheme://userinfo@ : greedy up to the last '@' before the host ends, so a raw '@' in a password is covered
_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#'\"<>]+@")
# an Authorization header's value as an answer may quote it (JSON, a header dump, a form)
_AUTHORIZATION_RE = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:(basic|bearer)\s+)?[^\s\"',;}]+")
_SCHEME_TOKEN_RE = re.compile(r"(?i)\b(basic|bearer)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_BASE64_WORD_RE = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` (as written, percent-decoded and base64-encoded) by ``***``, every URL's
    userinfo by ``***@``, and every credential an answer may quote masked (see the module docstring); raises
    nothing."""
    values = {form for secret in secrets if secret for form in _forms(secret)}
    for value in sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True):
        text = text.replace(value, MASK)
    text = _AUTHORIZATION_RE.sub(lambda m: f"{m[1]}{m[2] + ' ' if m[2] else ''}{MASK}", text)
    text = _SCHEME_TOKEN_RE.sub(rf"\1\2{MASK}", text)
    text = _BASE64_WORD_RE.sub(_mask_user_password, text)
    return _USERINFO_RE.sub(rf"\1{MASK}@", text)


def _forms(secret: str) -> set[str]:
    """A secret as it may appear: as written, percent-decoded, and each of those base64-encoded (a
    ``user:password`` secret's base64 is a Basic Authorization value)."""
    plain = {secret, unquote(secret)}
    encoded = {base64.b64encode(p.encode()).decode() for p in plain}
    return plain | encoded | {e.rstrip("=") for e in encoded}


def _mask_user_password(match: re.Match[str]) -> str:
    """``***`` for a base64 word that decodes to ``user:password`` (printable, one colon or more), else the word."""
    word = match[0]
    try:
        decoded = base64.b64decode(word + "=" * (-len(word) % 4), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return word
    user, colon, password = decoded.partition(":")
    return MASK if colon and user and password and decoded.isprintable() else word


def userinfo_secrets(value: str) -> tuple[str, ...]:
    """The userinfo of a URL-like ``value`` (``user:pw@host/...``, with or without a scheme) and its password
    (a userinfo without ``:`` is a token), to pass to :func:`redact` where a value that may lack its scheme
    is echoed; raises nothing."""
    authority = value.split("://", 1)[-1].split("/", 1)[0]
    if "@" not in authority:
        return ()
    userinfo = authority.rpartition("@")[0]
    return (userinfo, userinfo.partition(":")[2] or userinfo)
