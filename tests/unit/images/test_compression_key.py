"""The layer compression of the pushed image is part of the build key where it changes the image (buildah), and only
when it is not gzip: a zstd build does not reuse a gzip image of the same inputs, nor share its immutable tag; every
gzip build keeps its key."""

from __future__ import annotations

from imagectl.config import Config
from imagectl.images import builder
from imagectl.images.build_key import build_key
from imagectl.images.builder import base_resolver
from imagectl.images.plan import BuildOptions, BuildRequest, plan_build, pushed_compression
from imagectl.images.trace import Trace
from imagectl.matrix.names import resolve_profile
from enginefake import FakeEngine, FakeRegistry

FILES = {"Dockerfile": b"FROM x\n", "requirements.txt": b"torch==2.3.1\n"}
BASE = "sha256:" + "a" * 64


def test_zstd_changes_the_key_and_gzip_keeps_it():
    key = build_key(FILES, BASE, {})
    assert build_key(FILES, BASE, {}, compression="gzip") == key  # every gzip build's key is as it was
    assert key == "80b2c7e4ad02eec35970cfe1e79038c48858db488255ec90857c0df220fed8d3"  # the key before zstd counted
    assert build_key(FILES, BASE, {}, compression="zstd") != key


def test_the_compression_a_build_pushes():
    assert pushed_compression(Config(build_engine="buildah", registry_compression="zstd")) == "zstd"
    assert pushed_compression(Config(build_engine="buildah")) == "gzip"
    assert pushed_compression(Config(build_engine="docker", registry_compression="zstd")) == "gzip"  # Docker: gzip


def plan_key(matrix, monkeypatch, config: Config) -> str:
    registry = FakeRegistry()
    monkeypatch.setattr(builder, "resolve_base_digest", lambda base, config, engine: "sha256:" + "b" * 64)
    engine = FakeEngine(registry)
    plan = plan_build(BuildRequest(resolve_profile("torch-2.3-cu121", matrix), BuildOptions()), config,
                      base_resolver(config, engine), Trace(lambda line: None))
    return plan.key


def test_a_zstd_plan_on_buildah_has_another_key_than_a_gzip_one(matrix, monkeypatch):
    gzip = plan_key(matrix, monkeypatch, Config(build_engine="buildah"))
    zstd = plan_key(matrix, monkeypatch, Config(build_engine="buildah", registry_compression="zstd"))
    assert gzip != zstd
    docker = plan_key(matrix, monkeypatch, Config(build_engine="docker"))
    assert plan_key(matrix, monkeypatch, Config(build_engine="docker", registry_compression="zstd")) == docker
