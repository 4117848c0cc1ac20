"""Cache mounts: rendered only for an engine that runs them (buildah; Docker's legacy builder refuses --mount), with
pip's files and apt's lists and packages in the mount, never in a layer; [build] cache validated.  The pip steps are
buildah's with ``[build] install = "pip"`` (an assembled build has none: tests/unit/test_assembled_render.py)."""

from __future__ import annotations

import pytest

from imagectl.config import Config, load_config
from imagectl.engine.features import has_cache_mounts, picks_buildah
from imagectl.errors import ConfigError
from imagectl.image_spec import ImageSpec
from imagectl.matrix.names import resolve_profile
from imagectl.render.dockerfile import context_files
from tests.unit.render.test_render import check_golden

BUILDAH = Config(build_engine="buildah", build_install="pip")


def dockerfile(matrix, config: Config, name: str = "torch-2.3-cu121", **spec) -> str:
    return context_files(ImageSpec(resolve_profile(name, matrix), **spec), config)["Dockerfile"].decode()


def test_which_engine_has_cache_mounts():
    assert has_cache_mounts("buildah", lambda _: None)
    assert not has_cache_mounts("docker", lambda _: "/usr/bin/buildah")
    assert has_cache_mounts("auto", lambda _: "/usr/bin/buildah") and not has_cache_mounts("auto", lambda _: None)
    assert picks_buildah("auto", lambda _: "/usr/bin/buildah")


def test_a_docker_build_renders_no_mount(matrix):
    assert "--mount" not in dockerfile(matrix, Config(build_engine="docker"))


def test_a_buildah_build_downloads_through_cache_mounts(matrix):
    text = dockerfile(matrix, BUILDAH)
    check_golden("torch-2.3-cu121.buildah.Dockerfile", text)
    assert ("RUN --mount=type=cache,id=imagectl-pip,target=/var/cache/imagectl/pip,sharing=locked \\\n"
            "    pip download --no-cache-dir --no-deps --require-hashes --only-binary :all: "
            "--dest /var/cache/imagectl/pip/wheels -r /opt/imagectl/lock-1-packages.txt \\\n"
            "    && pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: --no-index "
            "--find-links /var/cache/imagectl/pip/wheels -r /opt/imagectl/lock-1-packages.txt\n") in text
    apt_run = "RUN --mount=type=cache,id=imagectl-apt,target=/var/cache/imagectl/apt,sharing=locked set -eu"
    assert text.count(apt_run) == 2
    assert ("apt-get -o Dir::Cache::Archives=/var/cache/imagectl/apt/archives "
            "-o Dir::State::Lists=/var/cache/imagectl/apt/lists update") in text
    assert "apt-get clean" not in text  # it would empty the mount; the packages never were in the layer


def test_the_credentials_stage_and_extras_use_the_mount_too(matrix):
    config = Config(build_engine="buildah", build_install="pip",
                    pip_index_url="https://user:s3cr3tpw@pypi.example.com/simple")
    text = dockerfile(matrix, config)
    assert ("NETRC=/opt/imagectl-secrets/.netrc HOME=/opt/imagectl-secrets pip download --no-cache-dir" in text)
    assert "s3cr3tpw" not in text


@pytest.mark.parametrize("value", ["cache", "registry.example.com/cache:tag",
                                   "registry.example.com/c@sha256:" + "a" * 64, "registry.example.com/",
                                   "REGISTRY.example.com/Cache", "1"])
def test_a_cache_that_is_no_registry_repository_is_a_config_error(tmp_path, value):
    (tmp_path / "imagectl.toml").write_text(f'[build]\ncache = "{value}"\n')
    with pytest.raises(ConfigError, match=r"\[build\] cache: "):
        load_config(cwd=tmp_path, env={})


def test_the_cache_repository(tmp_path):
    (tmp_path / "imagectl.toml").write_text('[build]\ncache = "127.0.0.1:5000/cache/imagectl"\n')
    assert load_config(cwd=tmp_path, env={}).build_cache == "127.0.0.1:5000/cache/imagectl"


def test_buildah_reads_and_writes_the_registry_layer_cache():
    from imagectl.engine import EngineBuild
    from imagectl.engine.buildah import BuildahEngine

    argv = BuildahEngine._bud_options(EngineBuild({}, cache_repo="registry.example.com/cache/imagectl"))
    assert argv[argv.index("--cache-from") + 1] == "registry.example.com/cache/imagectl"
    assert argv[argv.index("--cache-to") + 1] == "registry.example.com/cache/imagectl"
    assert "--cache-from" not in BuildahEngine._bud_options(EngineBuild({}))
