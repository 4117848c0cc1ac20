"""The one error factory: HTTP answers and connection failures to typed, one-line errors."""

from __future__ import annotations

import json
import socket

import pytest
import requests

from imagectl.errors import AuthError, NotFoundError, RegistryError
from imagectl.registry.error_factory import error_from_response, oci_error_codes, unreachable_error


def _response(status: int, reason: str, body: object = None, text: str | None = None) -> requests.Response:
    response = requests.Response()
    response.status_code, response.reason = status, reason
    response._content = (text if text is not None else json.dumps(body) if body is not None else "").encode()
    return response


@pytest.mark.parametrize(
    ("status", "kind"),
    [(404, NotFoundError), (401, AuthError), (403, AuthError), (400, RegistryError), (500, RegistryError),
     (405, RegistryError)],
)
def test_status_picks_the_error_type(status: int, kind: type[RegistryError]) -> None:
    error = error_from_response(_response(status, "Why"), "ghcr.io", "GET manifest team/torch:2.3")
    assert type(error) is kind
    assert str(error) == f"registry ghcr.io: GET manifest team/torch:2.3: {status} Why"


def test_oci_error_codes_and_messages_are_quoted_on_one_line() -> None:
    body = {"errors": [
        {"code": "MANIFEST_UNKNOWN", "message": "manifest unknown", "detail": {"Tag": "2.3"}},
        {"code": "DENIED", "message": "requested access\nis denied"},
    ]}
    response = _response(404, "Not Found", body)
    error = error_from_response(response, "127.0.0.1:5000", "GET manifest team/torch:2.3")
    assert str(error) == (
        "registry 127.0.0.1:5000: GET manifest team/torch:2.3: 404 Not Found "
        "(MANIFEST_UNKNOWN: manifest unknown; DENIED: requested access is denied)"
    )
    assert oci_error_codes(response) == {"MANIFEST_UNKNOWN", "DENIED"}


@pytest.mark.parametrize("text", ["<html>oops</html>", "[1]", '{"errors": "nope"}', '{"errors": [1]}', ""])
def test_bodies_that_are_not_oci_errors_are_left_out(text: str) -> None:
    response = _response(502, "Bad Gateway", text=text)
    assert str(error_from_response(response, "r", "x")) == "registry r: x: 502 Bad Gateway"
    assert oci_error_codes(response) == set()


def test_long_messages_are_cut() -> None:
    body = {"errors": [{"code": "X", "message": "m" * 5000}]}
    assert len(str(error_from_response(_response(500, "E", body), "r", "x"))) < 400


def test_connection_failure_names_the_host_and_the_reason() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(requests.ConnectionError) as caught:
        requests.get(f"http://{host}/v2/", timeout=2)
    error = unreachable_error(host, caught.value)
    assert type(error) is RegistryError
    message = str(error)
    assert message.startswith(f"registry {host} unreachable: ") and "\n" not in message
    assert "refused" in message.lower()
