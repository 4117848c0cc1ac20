"""The one place an HTTP answer (or a failed connection) becomes a typed imagectl error.

Every message is one line naming the registry, what was asked for and what the registry answered, e.g.
``registry ghcr.io: GET manifest team/torch:2.3: 404 Not Found (MANIFEST_UNKNOWN: manifest unknown)``.
Nothing from the request goes into a message: no headers, so no Authorization and no token.
"""

from __future__ import annotations

import json

import requests

from ..errors import AuthError, NotFoundError, RegistryError

_MAX_DETAIL = 300


def error_from_response(response: requests.Response, registry: str, what: str, hint: str = "") -> RegistryError:
    """The typed error for a failed ``response``: NotFoundError (404), AuthError (401, 403) or RegistryError.

    ``registry`` is the host as the user knows it, ``what`` the operation and reference (``GET manifest
    team/torch:2.3``).  The OCI error code and message of a JSON body are quoted when present, and
    ``hint`` (what the user might do) is added last.
    """
    status = response.status_code
    message = f"registry {registry}: {what}: {status} {response.reason or ''}".rstrip()
    detail = oci_error_detail(response)
    if detail:
        message += f" ({detail})"
    if hint:
        message += f"; {hint}"
    if status == 404:
        return NotFoundError(message)
    if status in (401, 403):
        return AuthError(message)
    return RegistryError(message)


def unreachable_error(registry: str, exc: BaseException, hint: str = "") -> RegistryError:
    """The error for a registry that could not be reached (connection refused, TLS failure, timeout)."""
    suffix = f"; {hint}" if hint else ""
    return RegistryError(f"registry {registry} unreachable: {_one_line(_describe(exc))}{suffix}")


def timeout_error(registry: str, what: str, seconds: float, detail: str) -> RegistryError:
    """The error for a request that did not finish within its deadline (the ``[registry] timeout``)."""
    return RegistryError(
        f"registry {registry}: {what}: no complete answer within {seconds:g} s ({_one_line(detail)}); "
        "[registry] timeout sets how long to wait"
    )


def too_large_error(registry: str, what: str, limit: int) -> RegistryError:
    """The error for an answer whose body is over ``limit`` bytes (reading stopped there)."""
    return RegistryError(f"registry {registry}: {what}: answer larger than {limit} bytes; stopped reading it")


def oci_error_detail(response: requests.Response) -> str:
    """``CODE: message`` of the errors in an OCI JSON error body, joined by "; "; "" when there are none."""
    parts = [": ".join(p for p in (code, text) if p) for code, text in _oci_errors(response)]
    return _one_line("; ".join(p for p in parts if p))


def oci_error_codes(response: requests.Response) -> set[str]:
    """The error codes (``MANIFEST_UNKNOWN``, ``UNSUPPORTED``, ...) of an OCI JSON error body."""
    return {code for code, _ in _oci_errors(response) if code}


def _oci_errors(response: requests.Response) -> list[tuple[str, str]]:
    """(code, message) pairs of the body ``{"errors": [{"code": ..., "message": ...}]}``; [] if it is not one."""
    try:
        errors = json.loads(response.content or b"null").get("errors") or []
    except (ValueError, AttributeError, RuntimeError):
        return []
    if not isinstance(errors, list):
        return []
    return [(str(e.get("code") or ""), str(e.get("message") or "")) for e in errors if isinstance(e, dict)]


def _describe(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 exception, without the long URL-bearing wrapper text."""
    reason: BaseException = exc
    for _ in range(5):
        inner = getattr(reason, "reason", None) or (reason.args[0] if reason.args else None)
        if not isinstance(inner, BaseException):
            break
        reason = inner
    text = str(reason)
    if "Failed to establish a new connection" in text:
        text = text.split("Failed to establish a new connection:", 1)[1].strip()
    return f"{type(reason).__name__}: {text}" if text else type(reason).__name__


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_DETAIL else flat[: _MAX_DETAIL - 3] + "..."
