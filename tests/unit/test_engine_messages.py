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
