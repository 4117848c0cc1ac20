"""Reading an answer's body within a size cap and a deadline, one socket read at a time.

``requests`` reads a whole body before its caller can look at the size, and its read timeout bounds each
socket read, not the body: an endless manifest would fill memory, and a registry sending one byte a second
would never time out.  So the client sends every request with ``stream=True`` and reads bodies here:
:func:`read_some` makes at most one socket read (``read1``) and first cuts the socket's timeout to the time
the :class:`~.deadline.Deadline` leaves; :func:`read_body` stops as soon as a body is over its cap.
"""

from __future__ import annotations

import math
import socket

import requests
import urllib3

from .deadline import Deadline

ERROR_BODY_BYTES = 64 * 1024  # of an error answer, only this much is read (and quoted from)
_READ_BYTES = 64 * 1024


def read_body(response: requests.Response, limit: int, deadline: Deadline, *, truncate: bool = False,
              stall_s: float = math.inf) -> bytes:
    """Read ``response``'s body, at most ``limit`` bytes, before ``deadline``; it becomes ``response.content``.

    With ``truncate`` a longer body is cut at ``limit`` (an error answer, quoted only in part); without, it is
    an error.  Either way no more than ``limit + 1`` bytes are read, and no socket read waits longer than
    ``stall_s`` (nor than the deadline leaves).  Raises the deadline's errors (RegistryError for a registry)
    when the body is too large or the deadline passes, and ``requests.exceptions.ConnectionError`` (or
    ``ReadTimeout``) when the connection breaks off or stalls: a transient failure, which the caller may try
    again.
    """
    if not truncate and _declared_length(response) > limit:
        response.close()
        raise deadline.too_large(limit)
    data = bytearray()
    try:
        while len(data) <= limit:
            want = min(_READ_BYTES, limit + 1 - len(data))
            chunk = read_some(response.raw, want, deadline, decode=True, stall_s=stall_s)
            if not chunk:
                break
            data += chunk
    except BaseException:
        response.close()
        raise
    if len(data) > limit:
        response.close()
        if not truncate:
            raise deadline.too_large(limit)
        del data[limit:]
    return _keep(response, bytes(data))


def read_some(  # noqa: PLR0913 - one socket read and the keyword-only limits of its wait
        raw: urllib3.BaseHTTPResponse, size: int, deadline: Deadline, *, decode: bool, stall_s: float = math.inf,
        late: str = "the answer was still arriving") -> bytes:
    """Up to ``size`` bytes from at most one socket read of ``raw`` (b"" at the end of the body).

    The read waits no longer than the deadline leaves, nor than ``stall_s``.  ``decode`` undoes a
    Content-Encoding.  Raises RegistryError (saying ``late``) when the deadline passes,
    ``requests.exceptions.ReadTimeout`` when no byte came for ``stall_s`` seconds, and
    ``requests.exceptions.ConnectionError`` when the connection broke.
    """
    left = deadline.left(late)
    wait = min(left, stall_s)
    _limit_socket_wait(raw, wait)
    try:
        read1 = getattr(raw, "read1", None)  # urllib3 >= 2; with 1.26 a read may wait for all of ``size``
        return (read1(size, decode_content=decode) if read1 else raw.read(size, decode_content=decode)) or b""
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if not _is_timeout(exc):
            raise requests.exceptions.ConnectionError(exc) from None
        if wait >= left:
            raise deadline.error(late) from None
        raise requests.exceptions.ReadTimeout(exc) from None


def is_read(response: requests.Response) -> bool:
    """True once the body of ``response`` has been read into ``response.content``; never raises."""
    return response._content is not False  # requests' own marker for "not read yet"


def _keep(response: requests.Response, data: bytes) -> bytes:
    """Make ``data`` the body of ``response`` (``.content``, ``.json()``), as requests does after a read."""
    response._content = data
    response._content_consumed = True
    return data


def _declared_length(response: requests.Response) -> int:
    """The Content-Length of an answer that has a body (0 for HEAD, absent or malformed); never raises."""
    if response.request is not None and response.request.method == "HEAD":
        return 0
    try:
        return int(response.headers.get("Content-Length") or 0)
    except ValueError:
        return 0


def _limit_socket_wait(raw: urllib3.BaseHTTPResponse, seconds: float) -> None:
    """Let the next socket read of ``raw`` wait at most ``seconds`` (when its connection is still open)."""
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is not None and math.isfinite(seconds):
        sock.settimeout(max(seconds, 0.001))


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (urllib3.exceptions.ReadTimeoutError, socket.timeout, TimeoutError))
