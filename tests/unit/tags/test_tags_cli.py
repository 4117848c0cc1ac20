"""The tag commands' input errors: one line, exit 2, before any registry or engine is asked."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, message", [
    (("prune", "torch-2.3-cu121"), "Missing option '--keep'"),
    (("prune", "torch-2.3-cu121", "--keep", "-1"), "--keep"),
    (("promote", "torch-2.3-cu121"), "Missing option '--channel'"),
    (("promote", "torch-2.3-cu121", "--channel", "latest"), "channel 'latest'"),
    (("promote", "torch-2.3-cu121", "--channel", "Stable"), "channel 'Stable'"),
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
