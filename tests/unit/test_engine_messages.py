"""The one-line messages of the Docker engine seam (no engine needed)."""

from __future__ import annotations

from imagectl.engine.docker import push_failure


def test_a_refused_push_names_the_registry_and_where_the_credentials_came_from(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "cfg"))
    line = push_failure("registry.example.com:5000/ml/torch", "latest", "unauthorized: authentication\nrequired")
    assert line.startswith("push of registry.example.com:5000/ml/torch:latest failed: the registry "
                           "registry.example.com:5000 refused the credentials (unauthorized: authentication required)")
    assert str(tmp_path / "cfg" / "config.json") in line and "docker login registry.example.com:5000" in line
    assert "\n" not in line


def test_another_push_failure_is_said_as_it_is():
    assert push_failure("r/x", "t", "connection reset by peer") == "push of r/x:t failed: connection reset by peer"


def test_an_ssh_engine_needs_paramiko_and_says_so(monkeypatch):
    import builtins
    import sys
    import types

    import pytest

    from imagectl.engine.docker import ssh_options
    from imagectl.errors import EngineError

    assert ssh_options("unix:///var/run/docker.sock") == {} and ssh_options("") == {}
    real_import = builtins.__import__

    def no_paramiko(name, *args, **kwargs):
        if name == "paramiko":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_paramiko)
    with pytest.raises(EngineError, match=r"DOCKER_HOST=ssh://\*\*\*@builder: .*paramiko.*imagectl\[ssh\]"):
        ssh_options("ssh://ci:pw@builder", which=lambda name: "/usr/bin/ssh")
    monkeypatch.setattr(builtins, "__import__", real_import)
    monkeypatch.setitem(sys.modules, "paramiko", types.ModuleType("paramiko"))
    assert ssh_options("ssh://ci@builder", which=lambda name: "/usr/bin/ssh") == {"use_ssh_client": True}
    assert ssh_options("ssh://ci@builder", which=lambda name: None) == {}


def test_build_against_an_unreachable_ssh_engine_is_one_line(run_cli, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "ssh://nobody@127.0.0.1:1")
    r = run_cli("build", "torch-2.3-cu121", "--progress", "quiet")
    assert r.code == 1 and "Traceback" not in r.err
    assert r.err.strip().splitlines()[-1].startswith("imagectl: torch-2.3-cu121: ")
