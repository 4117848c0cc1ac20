"""Credentials from a Docker config and credential helpers (real files, a real helper script on PATH)."""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
from pathlib import Path

import pytest

from imagectl.errors import ConfigError
from imagectl.registry.credentials import (
    DOCKER_HUB_KEY,
    Credentials,
    docker_config_path,
    load_credentials,
)

SECRET = "s3cr3t-p4ss"


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def _config(tmp_path: Path, data: object) -> dict[str, str]:
    (tmp_path / "config.json").write_text(json.dumps(data))
    return {"DOCKER_CONFIG": str(tmp_path)}


def _helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, script: str) -> None:
    """A real docker-credential-<name> executable on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    path = folder / f"docker-credential-{name}"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_repr_and_str_hide_the_password() -> None:
    creds = Credentials("alice", SECRET)
    assert SECRET not in repr(creds) and SECRET not in str(creds) and "alice" in repr(creds)
    assert SECRET not in repr([creds]) and SECRET not in f"{creds}"
    with pytest.raises(AttributeError):
        creds.password = "x"  # type: ignore[misc]


def test_config_path_follows_docker_config(tmp_path: Path) -> None:
    assert docker_config_path({"DOCKER_CONFIG": str(tmp_path)}) == tmp_path / "config.json"
    assert docker_config_path({}) == Path.home() / ".docker" / "config.json"


def test_no_config_file_means_no_credentials(tmp_path: Path) -> None:
    assert load_credentials("ghcr.io", {"DOCKER_CONFIG": str(tmp_path)}) is None


@pytest.mark.parametrize("key", ["registry.example.com:5000", "https://registry.example.com:5000",
                                 "http://registry.example.com:5000/v2/"])
def test_auths_entry_with_base64_auth_under_any_key_spelling(tmp_path: Path, key: str) -> None:
    env = _config(tmp_path, {"auths": {key: {"auth": _auth("bob", SECRET)}}})
    assert load_credentials("registry.example.com:5000", env) == Credentials("bob", SECRET)
    assert load_credentials("registry.example.com", env) is None


def test_auths_entry_with_username_and_password(tmp_path: Path) -> None:
    env = _config(tmp_path, {"auths": {"ghcr.io": {"username": "carol", "password": SECRET}}})
    assert load_credentials("ghcr.io", env) == Credentials("carol", SECRET)


def test_password_may_contain_colons(tmp_path: Path) -> None:
    env = _config(tmp_path, {"auths": {"ghcr.io": {"auth": _auth("dan", "a:b:c")}}})
    assert load_credentials("ghcr.io", env) == Credentials("dan", "a:b:c")


@pytest.mark.parametrize("key", [DOCKER_HUB_KEY, "docker.io", "index.docker.io"])
@pytest.mark.parametrize("host", ["docker.io", "registry-1.docker.io"])
def test_docker_hub_credentials(tmp_path: Path, key: str, host: str) -> None:
    env = _config(tmp_path, {"auths": {key: {"auth": _auth("erin", SECRET)}}})
    assert load_credentials(host, env) == Credentials("erin", SECRET)


def test_empty_auths_entry_means_no_credentials(tmp_path: Path) -> None:
    assert load_credentials("ghcr.io", _config(tmp_path, {"auths": {"ghcr.io": {}}})) is None


def test_bad_config_is_a_config_error_without_secrets(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"auths": {"ghcr.io": {"auth": "' + SECRET)
    with pytest.raises(ConfigError, match="config.json") as caught:
        load_credentials("ghcr.io", {"DOCKER_CONFIG": str(tmp_path)})
    assert SECRET not in str(caught.value)
    env = _config(tmp_path, {"auths": {"ghcr.io": {"auth": "!!not base64!!"}}})
    with pytest.raises(ConfigError, match="ghcr.io"):
        load_credentials("ghcr.io", env)
    with pytest.raises(ConfigError, match="not a JSON object"):
        load_credentials("ghcr.io", _config(tmp_path, ["a list"]))


def test_cred_helper_gets_the_host_on_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _helper(tmp_path, monkeypatch, "fake", f"""
read server
[ "$1" = get ] || exit 3
printf '{{"ServerURL": "%s", "Username": "helper-user", "Secret": "{SECRET}-%s"}}' "$server" "$server"
""")
    env = _config(tmp_path, {"credHelpers": {"gcr.io": "fake"}, "auths": {"gcr.io": {"auth": _auth("no", "no")}}})
    assert load_credentials("gcr.io", env) == Credentials("helper-user", f"{SECRET}-gcr.io")
    assert load_credentials("quay.io", env) is None


def test_creds_store_serves_every_host_and_docker_hub_by_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _helper(tmp_path, monkeypatch, "store", """
read server
printf '{"Username": "u", "Secret": "%s"}' "$server"
""")
    env = _config(tmp_path, {"credsStore": "store", "auths": {"quay.io": {}}})
    assert load_credentials("quay.io", env) == Credentials("u", "quay.io")
    assert load_credentials("docker.io", env) == Credentials("u", DOCKER_HUB_KEY)


def test_helper_without_credentials_is_none_and_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _helper(tmp_path, monkeypatch, "empty", "echo 'credentials not found in native keychain'; exit 1\n")
    env = _config(tmp_path, {"credsStore": "empty"})
    with caplog.at_level(logging.WARNING):
        assert load_credentials("ghcr.io", env) is None
    assert caplog.text == ""


def test_broken_or_missing_helper_warns_without_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _helper(tmp_path, monkeypatch, "broken", f"echo 'oops {SECRET}'; exit 2\n")
    with caplog.at_level(logging.WARNING):
        assert load_credentials("ghcr.io", _config(tmp_path, {"credsStore": "broken"})) is None
        assert load_credentials("ghcr.io", _config(tmp_path, {"credsStore": "not-installed-anywhere"})) is None
    assert "docker-credential-broken exited with status 2" in caplog.text
    assert "docker-credential-not-installed-anywhere could not run" in caplog.text
    assert SECRET not in caplog.text
