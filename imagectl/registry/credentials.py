"""Registry credentials from the Docker client's config (``$DOCKER_CONFIG/config.json``, else ``~/.docker``).

Lookup follows the Docker CLI: a ``credHelpers`` entry for the host wins, then ``credsStore``, then the
``auths`` entry (base64 ``auth`` or ``username``/``password``).  Docker Hub's credentials live under the key
``https://index.docker.io/v1/``.  A helper is run as ``docker-credential-<name> get`` with the server on
stdin and answers JSON ``{"Username": ..., "Secret": ...}`` on stdout.

Secrets never leave this module in a message: :class:`Credentials` hides the password in its repr, and
helper failures are reported by exit status only (their output may hold the secret).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import paths
from ..errors import ConfigError

log = logging.getLogger(__name__)

DOCKER_HUB_KEY = "https://index.docker.io/v1/"
_DOCKER_HUB_HOSTS = ("docker.io", "index.docker.io", "registry-1.docker.io")
_HELPER_TIMEOUT_S = 30

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class Credentials:
    """A username and password (or token) for one registry; the password never shows in its repr."""

    username: str
    password: str = field(repr=False)

    def __repr__(self) -> str:
        return f"Credentials(username={self.username!r}, password='***')"

    __str__ = __repr__


def docker_config_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the Docker client's config.json is: ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``."""
    env = os.environ if env is None else env
    folder = env.get("DOCKER_CONFIG")
    return Path(folder) / "config.json" if folder else Path.home() / ".docker" / "config.json"


def load_credentials(
    host: str, env: Mapping[str, str] | None = None, run: Runner = subprocess.run
) -> Credentials | None:
    """The credentials the Docker config holds for registry ``host``, or None if it holds none.

    Raises ConfigError if the config file exists but is not a JSON object.  A credential helper that is
    missing or fails is logged as a warning and counts as "no credentials" (anonymous access may still work).
    """
    config = read_docker_config(docker_config_path(env))
    helpers = config.get("credHelpers") or {}
    helper = helpers.get(host) or helpers.get(server_key(host)) or config.get("credsStore")
    if helper:
        return credentials_from_helper(str(helper), server_key(host), run)
    return credentials_from_auths(config.get("auths") or {}, host)


def read_docker_config(path: Path) -> dict[str, Any]:
    """The parsed Docker config at ``path`` ({} if absent); raises ConfigError if unreadable or not an object."""
    if not paths.exists(path, ConfigError, "the Docker config"):
        return {}
    try:
        data = json.loads(paths.read_text(path, ConfigError, "the Docker config"))
    except ValueError as exc:
        raise ConfigError(f"cannot read Docker config {path}: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Docker config {path} is not a JSON object")
    return data


def server_key(host: str) -> str:
    """The name Docker stores ``host``'s credentials under (Docker Hub's is ``https://index.docker.io/v1/``)."""
    return DOCKER_HUB_KEY if host in _DOCKER_HUB_HOSTS else host


def credentials_from_auths(auths: Mapping[str, Any], host: str) -> Credentials | None:
    """The ``auths`` entry for ``host`` (keys may carry a scheme and path), decoded; None if there is none."""
    wanted = _normalise_key(server_key(host))
    for key, entry in auths.items():
        if _normalise_key(key) == wanted and isinstance(entry, dict):
            return _decode_entry(entry, key)
    return None


def credentials_from_helper(helper: str, server: str, run: Runner = subprocess.run) -> Credentials | None:
    """Ask ``docker-credential-<helper> get`` for ``server``'s credentials; None if it has none or fails."""
    program = f"docker-credential-{helper}"
    try:
        done = run([program, "get"], input=server, capture_output=True, text=True, timeout=_HELPER_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("credential helper %s could not run: %s", program, type(exc).__name__)
        return None
    if done.returncode != 0:
        if "not found" not in (done.stdout or "").lower():
            log.warning("credential helper %s exited with status %s", program, done.returncode)
        return None
    return _parse_helper_answer(done.stdout, program)


def _parse_helper_answer(stdout: str, program: str) -> Credentials | None:
    try:
        answer = json.loads(stdout)
        username, secret = answer.get("Username") or "", answer.get("Secret") or ""
    except (ValueError, AttributeError):
        log.warning("credential helper %s answered something that is not JSON credentials", program)
        return None
    return Credentials(str(username), str(secret)) if secret else None


def _normalise_key(key: str) -> str:
    """``https://host/v1/`` -> ``host``; Docker Hub's many spellings -> its one key."""
    if key == DOCKER_HUB_KEY:
        return key
    bare = key.split("://", 1)[-1].split("/", 1)[0]
    return server_key(bare)


def _decode_entry(entry: Mapping[str, Any], key: str) -> Credentials | None:
    if entry.get("username") and entry.get("password"):
        return Credentials(str(entry["username"]), str(entry["password"]))
    encoded = entry.get("auth")
    if not encoded:
        return None
    try:
        username, sep, password = base64.b64decode(str(encoded), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise ConfigError(f"Docker config entry {key!r}: 'auth' is not base64 of user:password") from None
    if not sep:
        raise ConfigError(f"Docker config entry {key!r}: 'auth' is not base64 of user:password")
    return Credentials(username, password)
