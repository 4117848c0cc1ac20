"""Grammars for every value that can reach a Dockerfile, a label, a shell or a URL.

Each ``check_*`` function returns the (normalised) value or raises :class:`ValidationError` with one line that
names the value, where it came from (``what``) and what was expected, redacted (:mod:`imagectl.redact`): a
URL's credentials are never part of it.  Templates only ever see values that went through one of these.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from packaging.version import InvalidVersion, Version

from .errors import ValidationError
from .redact import redact, userinfo_secrets

_URL_RE = re.compile(r"^https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%/+@:=,-]*)?$")
_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?$")
_PYTHON_RE = re.compile(r"^3\.[0-9]{1,2}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_TOKEN_RE = re.compile(r"^[a-z0-9](?:[a-z0-9._-]*[a-z0-9])?$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_TEXT_RE = re.compile(r"^[^\x00-\x1f\x7f\"'`$\\]*$")
_DRIVER_RE = re.compile(r"^[0-9]{2,4}(?:\.[0-9]{1,3}){0,2}$")
# user:password of URL characters (others percent-encoded); decoded, no character a netrc file cannot hold
_USERINFO_RE = re.compile(r"^[A-Za-z0-9._~%!*+,;=-]+:[A-Za-z0-9._~%!*+,;=-]+$")
_NETRC_UNSAFE_RE = re.compile(r"[\x00-\x20\x7f\"'`$\\#]")


def is_safe_text(text: str) -> bool:
    """Whether ``text`` holds no control character, quote, backtick, ``$`` or backslash."""
    return bool(_SAFE_TEXT_RE.fullmatch(text))


def refusal(what: str, value: object, expected: str) -> ValidationError:
    """The ValidationError for ``value`` (given as ``what``) that is not ``expected``, redacted."""
    return _fail(what, value, expected)


def _error(message: str, value: object) -> ValidationError:
    """A ValidationError whose message went through :func:`redact` (the value may hold credentials)."""
    return ValidationError(redact(message, userinfo_secrets(value) if isinstance(value, str) else ()))


def _fail(what: str, value: object, expected: str) -> ValidationError:
    return _error(f"{what}: {value!r} is not {expected}", value)


def check_version(value: object, what: str = "version") -> str:
    """Return a PEP 440 version string (as written); raises ValidationError otherwise."""
    if not isinstance(value, str) or not value or value.strip() != value:
        raise _fail(what, value, "a version string")
    try:
        Version(value)
    except InvalidVersion:
        raise _fail(what, value, "a PEP 440 version") from None
    if not re.fullmatch(r"[0-9A-Za-z.+!_-]+", value):
        raise _fail(what, value, "a plain version")
    return value


def check_python(value: object, what: str = "python") -> str:
    """Return a ``3.X`` Python version; raises ValidationError otherwise."""
    if not isinstance(value, str) or not _PYTHON_RE.fullmatch(value):
        raise _fail(what, value, "a Python version like 3.11")
    return value


def check_driver(value: object, what: str = "driver") -> str:
    """Return an NVIDIA driver version such as ``535.104.05``; raises ValidationError otherwise."""
    if not isinstance(value, str) or not _DRIVER_RE.fullmatch(value):
        raise _fail(what, value, "a driver version like 535.104.05")
    return value


def driver_key(version: str) -> tuple[int, ...]:
    """Order driver versions numerically (``535.104.05`` -> ``(535, 104, 5)``)."""
    return tuple(int(part) for part in version.split("."))


def driver_branch(version: str) -> int:
    """The branch of a driver version: 570 for 570.86.16."""
    return driver_key(version)[0]


def major_minor(version: object) -> str | None:
    """``12.1`` for ``12.1.105``, ``3.11`` for ``3.11.7`` (None for an empty value; text that is not a
    version keeps its first two dot-separated parts)."""
    if not version:
        return None
    try:
        release = release_numbers(str(version))
    except InvalidVersion:
        return ".".join(str(version).split(".")[:2])
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def release_numbers(version: str) -> tuple[int, ...]:
    """The release segment of PEP 440 ``version`` as numbers (``2.3.1rc1`` -> ``(2, 3, 1)``); raises
    InvalidVersion (a ValueError) for text that is not a version."""
    return Version(version).release


def versions_equal(a: str, b: str) -> bool:
    """Whether PEP 440 versions ``a`` and ``b`` are equal (``2.3`` == ``2.3.0``; ``2.3.1`` != ``2.3.1+cu121``);
    raises InvalidVersion (a ValueError) for text that is not a version."""
    return Version(a) == Version(b)


def check_package_name(value: object, what: str = "package name") -> str:
    """Return a PEP 508 distribution name; raises ValidationError otherwise."""
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise _fail(what, value, "a package name")
    return value


def check_token(value: object, what: str) -> str:
    """Return a lower-case identifier (``runtime``, ``ubuntu22.04``, ``torch``); raises ValidationError."""
    if not isinstance(value, str) or not _TOKEN_RE.fullmatch(value):
        raise _fail(what, value, "a lower-case name of [a-z0-9._-]")
    return value


def check_url(value: object, what: str = "URL", credentials: bool = False) -> str:
    """Return an http(s) URL of safe characters (``{cuda_tag}`` allowed); with ``credentials`` (pip indexes
    only) it may carry ``user:password@`` (see :func:`url_credentials`).  Raises ValidationError, whose message
    never shows the credentials."""
    bare, userinfo = split_userinfo(value) if isinstance(value, str) else ("", None)
    if not _URL_RE.fullmatch(bare.replace("{cuda_tag}", "cuda")) or not port_in_range(_authority(bare)):
        raise _fail(what, value, "an http(s) URL of plain characters (a port of 1-65535)")
    if userinfo is not None and not credentials:
        raise _fail(what, value, "a URL without credentials (user:password@ is allowed in [pip] index URLs only)")
    if userinfo is not None and not _USERINFO_RE.fullmatch(userinfo):
        raise _fail(what, value, "a URL whose credentials are user:password of URL characters (percent-encode others)")
    if userinfo is not None and any(_NETRC_UNSAFE_RE.search(unquote(part)) for part in userinfo.split(":", 1)):
        raise _fail(what, value, "a URL whose credentials are free of spaces, quotes, '#', '$' and backslashes")
    return value


def _authority(url: str) -> str:
    """``host:port`` of ``scheme://host:port/path``."""
    return url.partition("://")[2].split("/", 1)[0]


def split_userinfo(url: str) -> tuple[str, str | None]:
    """``(url without its userinfo, userinfo or None)``: ``https://u:p@host/x`` -> ``("https://host/x", "u:p")``."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if not sep or "@" not in authority:
        return url, None
    userinfo, _, host = authority.rpartition("@")
    return f"{scheme}://{host}{slash}{path}", userinfo


def url_credentials(url: str) -> tuple[str, str, str] | None:
    """``(host, user, password)``, percent-decoded, of a URL that passed ``check_url(..., credentials=True)``
    (host without port, as netrc names machines); None for a URL without credentials.  Raises nothing."""
    bare, userinfo = split_userinfo(url)
    if userinfo is None:
        return None
    user, _, password = userinfo.partition(":")
    host = bare.split("://", 1)[1].split("/", 1)[0].split(":", 1)[0]
    return host, unquote(user), unquote(password)


def check_host(value: object, what: str = "host") -> str:
    """Return ``host`` or ``host:port`` (a port of 1-65535); raises ValidationError otherwise."""
    if not isinstance(value, str) or not _HOST_RE.fullmatch(value) or not port_in_range(value):
        raise _fail(what, value, "a host or host:port (port 1-65535)")
    return value


def port_in_range(authority: str) -> bool:
    """Whether the port of ``host:port`` (if any; ``[v6]:port`` too) is 1-65535."""
    _, colon, port = authority.rpartition(":")
    if not colon or not port.isdigit() or authority.endswith("]"):
        return True
    return 1 <= int(port) <= 65535


def check_env_name(value: object, what: str = "variable name") -> str:
    """Return a shell-safe environment variable or build-arg name; raises ValidationError otherwise."""
    if not isinstance(value, str) or not _ENV_NAME_RE.fullmatch(value):
        raise _fail(what, value, "a variable name of [A-Za-z0-9_]")
    return value


def check_text(value: object, what: str) -> str:
    """Return one line of text with no quotes, backslashes, '$' or control characters."""
    if not isinstance(value, str) or not _SAFE_TEXT_RE.fullmatch(value):
        raise _fail(what, value, "one line of text without quotes, backslashes or '$'")
    return value


# Debian Policy 5.6.7: lower-case letters, digits, '+', '-' and '.', two characters at least, alphanumeric first
_DEB_PACKAGE_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+")


def check_deb_package(value: object, what: str = "OS package") -> str:
    """Return a Debian/Ubuntu binary package name (``g++``, ``python3.11-dev``: shell-safe, no version or
    option); raises ValidationError otherwise."""
    if not isinstance(value, str) or not _DEB_PACKAGE_RE.fullmatch(value):
        raise _fail(what, value, "a Debian package name of [a-z0-9+.-]")
    return value


# A size as a person writes it: a whole number of bytes, or a number and a unit (decimal kB/MB/GB/TB as the engines
# print sizes, binary KiB/MiB/GiB/TiB); at most MAX_BYTE_SIZE
_BYTE_SIZE_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?) ?([a-zA-Z]*)")
_BYTE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,  # units compared in lower case
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
MAX_BYTE_SIZE = 10**15  # 1 PB: more than any image; a bigger number is a typo


def check_byte_size(value: object, what: str = "") -> int:
    """Return a size in bytes from a whole number of bytes (``8000000000``) or text with a unit (``"8GB"``,
    ``"7.5 GiB"``, ``"500MB"``; units in any case): more than 0 and at most :data:`MAX_BYTE_SIZE`; raises
    ValidationError otherwise (its line starts with ``what``, when given)."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        match = _BYTE_SIZE_RE.fullmatch(value.strip()) if isinstance(value, str) else None
        unit = (match.group(2) or "b").lower() if match else ""
        plain = match is not None and unit in _BYTE_UNITS and not (unit == "b" and "." in match.group(1))
        size = int(float(match.group(1)) * _BYTE_UNITS[unit]) if plain and match else 0
    if not 0 < size <= MAX_BYTE_SIZE:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        line = f"{shown} is not a size such as \"8GB\", \"7.5GiB\" or a whole number of bytes (above 0, at most 1 PB)"
        raise _error(f"{what}: {line}" if what else line, value)
    return size
