"""Secrets out of every line imagectl makes: the one redaction function, used by every error and log path.

Two kinds of secret are masked: the userinfo of any URL in the text (``https://user:token@host`` becomes
``https://***@host``), and known secret values (build-arg values, index passwords) wherever they appear,
which become ``***``.  Values shorter than :data:`MIN_SECRET_LENGTH` are not masked as values (masking every
``1`` of a build log would destroy it); URL userinfo is masked whatever its length.
"""

from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import unquote

MASK = "***"
MIN_SECRET_LENGTH = 4
# scheme://userinfo@ : greedy up to the last '@' before the host ends, so a raw '@' in a password is covered
_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#'\"<>]+@")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every URL's userinfo replaced by ``***@`` and each of ``secrets`` (as written and
    percent-decoded) by ``***``; raises nothing."""
    values = {form for secret in secrets if secret for form in (secret, unquote(secret))}
    for value in sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True):
        text = text.replace(value, MASK)
    return _USERINFO_RE.sub(rf"\1{MASK}@", text)


def userinfo_secrets(value: str) -> tuple[str, ...]:
    """The userinfo of a URL-like ``value`` (``user:pw@host/...``, with or without a scheme) and its password
    (a userinfo without ``:`` is a token), to pass to :func:`redact` where a value that may lack its scheme
    is echoed; raises nothing."""
    authority = value.split("://", 1)[-1].split("/", 1)[0]
    if "@" not in authority:
        return ()
    userinfo = authority.rpartition("@")[0]
    return (userinfo, userinfo.partition(":")[2] or userinfo)
