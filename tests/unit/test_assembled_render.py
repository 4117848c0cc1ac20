"""``[build] install``: which builds write the lock's layers themselves (buildah, this host's platform, no index
credentials or extra indexes, not ``--base``), and the Dockerfile they render: the system image alone."""

from __future__ import annotations

import pytest

from imagectl.config import Config, load_config
from imagectl.engine.features import assembles_wheels
from imagectl.errors import ConfigError
from imagectl.image_spec import ImageSpec
from imagectl.matrix.names import resolve_profile
from imagectl.reference import parse_reference
from imagectl.render.context import assembled
from imagectl.render.dockerfile import context_files

ASSEMBLED = Config(build_engine="buildah")


def spec(matrix, name: str = "torch-2.3-cu121", **more) -> ImageSpec:
    return ImageSpec(resolve_profile(name, matrix), **more)


def test_which_builds_assemble():
    buildah, none = (lambda _: "/usr/bin/buildah"), (lambda _: None)
    x86, arm = (lambda: "x86_64"), (lambda: "aarch64")
    assert assembles_wheels("buildah", "assembled", "linux/amd64", buildah, x86)
    assert assembles_wheels("auto", "assembled", "linux/amd64", buildah, x86)
    assert not assembles_wheels("auto", "assembled", "linux/amd64", none, x86)  # auto without buildah: Docker
    assert not assembles_wheels("docker", "assembled", "linux/amd64", buildah, x86)
    assert not assembles_wheels("buildah", "pip", "linux/amd64", buildah, x86)
    assert not assembles_wheels("buildah", "assembled", "linux/arm64", buildah, x86)  # a foreign platform: pip
    assert assembles_wheels("buildah", "assembled", "linux/arm64", buildah, arm)


def test_the_assembled_dockerfile_is_the_system_image(matrix, monkeypatch):
    monkeypatch.setattr("imagectl.engine.features.host.machine", lambda: "x86_64")
    text = context_files(spec(matrix), ASSEMBLED)["Dockerfile"].decode()
    steps = [line for line in text.splitlines() if line and not line.startswith(("#", " "))]
    assert not [line for line in steps if "pip" in line or line.startswith("COPY lock")], steps
    assert "imagectl writes its layers itself on top of this image" in text
    assert "lock-1-packages.txt" in text  # named in the comment: the layers imagectl writes
    assert 'ENTRYPOINT ["/bin/sh", "/opt/imagectl/entry.sh"]' in text
    assert "\nENV " in text and "\nLABEL " in text and " -m venv /opt/venv" in text
    pip = context_files(spec(matrix), Config(build_engine="buildah", build_install="pip"))["Dockerfile"].decode()
    assert "pip install" in pip and "imagectl writes its layers itself" not in pip


def test_credentials_extra_indexes_and_a_users_base_keep_the_pip_steps(matrix, monkeypatch):
    monkeypatch.setattr("imagectl.engine.features.host.machine", lambda: "x86_64")
    assert assembled(spec(matrix), ASSEMBLED)
    assert not assembled(spec(matrix), ASSEMBLED, netrc_file="imagectl-pip.netrc")
    assert not assembled(spec(matrix), Config(build_engine="buildah", pip_extra_index_urls=("https://x.example/s",)))
    on_base = spec(matrix, user_base=parse_reference("registry.example.com/team/own:v1"), extras=("einops==0.8.0",))
    assert not assembled(on_base, ASSEMBLED)
    with_credentials = Config(build_engine="buildah", pip_index_url="https://user:s3cr3tpw@pypi.example.com/simple")
    text = context_files(spec(matrix), with_credentials)["Dockerfile"].decode()
    assert "pip install" in text  # the netrc stage, as before


def test_install_is_assembled_or_pip(tmp_path):
    assert load_config(cwd=tmp_path, env={}).build_install == "assembled"
    (tmp_path / "imagectl.toml").write_text('[build]\ninstall = "pip"\n')
    assert load_config(cwd=tmp_path, env={}).build_install == "pip"
    (tmp_path / "imagectl.toml").write_text('[build]\ninstall = "uv"\n')
    with pytest.raises(ConfigError, match=r"\[build\] install: 'uv' is not one of assembled, pip"):
        load_config(cwd=tmp_path, env={})
