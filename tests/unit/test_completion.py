"""Shell completion of profile names, through click's completion protocol (as bash, zsh and fish ask for it)."""

from __future__ import annotations

import subprocess
import sys


def complete(words: str, cwd, env_extra=None) -> list[str]:
    import os

    env = {**os.environ, "_IMAGECTL_COMPLETE": "bash_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)), **(env_extra or {})}
    done = subprocess.run([sys.executable, "-m", "imagectl"], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split(",", 1)[1] for line in done.stdout.splitlines() if line]


def test_profile_names_complete_for_every_command_that_takes_one(tmp_path):
    shown = complete("imagectl show torch-2.3-cu12", tmp_path)
    assert "torch-2.3-cu121" in shown and all(name.startswith("torch-2.3-cu12") for name in shown)
    for command in ("build", "render", "lock", "test", "history", "rollback", "promote", "prune"):
        assert "torch-2.3-cu121" in complete(f"imagectl {command} torch-2.3-cu12", tmp_path), command


def test_a_broken_configuration_completes_nothing_and_prints_nothing(tmp_path):
    (tmp_path / "imagectl.toml").write_text("[registry\n")
    assert complete("imagectl show torch", tmp_path) == []
