"""The tag commands' input errors: one line, exit 2, before any registry or engine is asked."""

from __future__ import annotations

import sys

import pytest
from tagfakes import FakeStore, digest_of, tag_on


@pytest.mark.parametrize("args, message", [
    (("prune", "torch-2.3-cu121"), "Missing option '--keep'"),
    (("prune", "torch-2.3-cu121", "--keep", "-1"), "--keep"),
    (("promote", "torch-2.3-cu121"), "Missing option '--channel'"),
    (("promote", "torch-2.3-cu121", "--channel", "latest"), "channel 'latest'"),
    (("promote", "torch-2.3-cu121", "--channel", "Stable"), "channel 'Stable'"),
    (("promote", "torch-2.3-cu121", "--channel", "imagectl-history"), "channel 'imagectl-history': tags starting"),
    (("promote", "torch-2.3-cu121", "--channel", "imagectl-move-1"), "reserved for imagectl's move log"),
    (("promote", "torch-2.3-cu121", "--channel", "stable", "--from", "imagectl-history"),
     "--from 'imagectl-history': tags starting"),
    (("rollback", "torch-2.3-cu121", "--to", "imagectl-move-x"), "--to 'imagectl-move-x'"),
    (("rollback", "torch-9.9-cu121"), "profile 'torch-9.9-cu121'"),
    (("history", "nonsense"), "profile 'nonsense'"),
    (("import", "Not A Ref", "--name", "torch-2.3-cu121"), "invalid image reference"),
    (("import", "team/img:1"), "Missing option '--name'"),
    (("import", "team/img:1", "--name", "torch-9.9-cu121"), "profile 'torch-9.9-cu121'"),
])
def test_bad_input_is_one_line_and_exit_2(run_cli, args, message):
    result = run_cli(*args)
    assert result.code == 2, result.err
    assert message in result.err and len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err


def test_commands_are_listed(run_cli):
    out = run_cli("--help").out
    for name in ("history", "rollback", "promote", "prune", "import"):
        assert name in out


def registry_mode(tmp_path, monkeypatch, store: FakeStore) -> None:
    """imagectl.toml with a registry, and the tag commands' store replaced by ``store``."""
    (tmp_path / "imagectl.toml").write_text('[registry]\nurl = "registry.example.com"\nnamespace = "ml"\n')
    monkeypatch.setattr("imagectl.cli.tags_cmd.open_tag_store", lambda repo, config, engine: store)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # a machine without an engine


def test_history_warns_about_an_unreadable_log_and_still_lists_the_images(run_cli, tmp_path, monkeypatch):
    store = FakeStore()
    store.add(tag_on(1), digest_of(1))
    store.add("latest", digest_of(1))
    store.problems.append("registry.example.com/ml/torch-2.3-cu121:imagectl-history: unreadable move log; ignored")
    registry_mode(tmp_path, monkeypatch, store)
    for args in ((), ("--json",)):
        result = run_cli("history", "torch-2.3-cu121", *args)
        assert result.code == 0, result.err
        assert result.err == f"warning: {store.problems[0]}\n" and tag_on(1) in result.out


def test_a_registry_rollback_on_a_machine_without_an_engine_loads_no_docker(run_cli, tmp_path, monkeypatch):
    store = FakeStore()
    for d in (1, 2):
        store.add(tag_on(d), digest_of(d))
    store.add("latest", digest_of(2))
    registry_mode(tmp_path, monkeypatch, store)
    monkeypatch.delitem(sys.modules, "docker", raising=False)
    result = run_cli("rollback", "torch-2.3-cu121")
    assert result.code == 0 and result.out.endswith(f"-> {tag_on(1)} ({digest_of(1)[:19]})\n"), result.err
    assert "docker" not in sys.modules and store.tag_map["latest"] == digest_of(1)
