"""imagectl.images.sweep without an engine: the work folders, partial downloads and temporary folders of imagectl
processes that are gone (named PID.START), found and removed; those of running processes, and names of no process,
kept; ``imagectl sweep``'s lines and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from imagectl.cli.sweep_cmd import sweep_json, sweep_lines
from imagectl.images import context_dirs
from imagectl.images.sweep import Leftover, describe, sweep
from imagectl.owner import Owner, this_process


def gone() -> Owner:
    """A process that ran and ended (its id and start time)."""
    code = "import os; print(os.getpid(), open(f'/proc/{os.getpid()}/stat').read().rpartition(')')[2].split()[19])"
    pid, start = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return Owner(int(pid), int(start))


def world(tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    cache, temporary = tmp_path / "cache", tmp_path / "tmp"
    host, dead, me = context_dirs._host(), gone(), this_process()
    reused = Owner(me.pid, me.start + 1)  # this process's id, another start: a killed build whose id came back
    paths = {
        "dead folder": cache / "contexts" / f"{dead.token}-{host}-abc",
        "reused folder": cache / "contexts" / f"{reused.token}-{host}-def",
        "live folder": cache / "contexts" / f"{me.token}-{host}-ghi",
        "other host": cache / "contexts" / f"{dead.token}-elsewhere-jkl",
        "dead part": cache / "wheels" / f".{dead.token}-{host}-torch-2.3.1-cp311-x.whl.a1b2.part",
        "live part": cache / "wheels" / f".{me.token}-{host}-numpy-2.0-cp311-x.whl.c3d4.part",
        "other host's part": cache / "wheels" / f".{dead.token}-elsewhere-torch-2.3.1-x.whl.a1b2.part",
        "old part": cache / "wheels" / ".six-1.16-py3-none-any.whl.e5f6.part",  # no process in its name: kept
        "wheel": cache / "wheels" / ("a" * 64) / "six-1.16-py3-none-any.whl",
        "dead push": temporary / f"imagectl-push-{dead.token}-x1",
        "live push": temporary / f"imagectl-push-{me.token}-x2",
        "someone's": temporary / "imagectl-push-x3",
    }
    for name, path in paths.items():
        if "folder" in name or "host" in name or "push" in name or "someone" in name:
            (path / "assemble" / "blobs").mkdir(parents=True)
            (path / "assemble" / "blobs" / "layer.tar.gz").write_bytes(b"x" * 1000)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"partial")
    return cache, temporary, paths


def test_what_dead_processes_left_is_removed_and_nothing_else(tmp_path):
    cache, temporary, paths = world(tmp_path)
    swept = sweep(None, cache=cache, temporary=temporary)
    gone_names = {"dead folder", "reused folder", "dead part", "dead push"}
    assert {Path(item.name) for item in swept.found} == {paths[n] for n in gone_names}
    assert swept.removed == swept.found and swept.failed == ()
    assert [item.kind for item in swept.found] == ["work folder", "work folder", "partial download",
                                                   "temporary folder"]
    for name, path in paths.items():
        assert path.exists() == (name not in gone_names), name
    assert sweep(None, cache=cache, temporary=temporary).found == ()  # nothing left to find


def test_a_dry_run_lists_and_removes_nothing(tmp_path):
    cache, temporary, paths = world(tmp_path)
    swept = sweep(None, dry_run=True, cache=cache, temporary=temporary)
    assert len(swept.found) == 4 and swept.removed == () and swept.dry_run
    assert all(path.exists() for path in paths.values())
    lines = sweep_lines(swept)
    assert lines[-1] == "would remove: 2 work folders, 1 partial download, 1 temporary folder"
    assert lines[0].startswith("would remove  work folder  ") and "(process " in lines[0]
    data = sweep_json(swept)
    assert data["dry_run"] is True and {e["status"] for e in data["leftovers"]} == {"would remove"}
    json.dumps(data)


def test_the_lines_and_json_say_what_was_not_removed():
    item = Leftover("container", "imagectl-run-1.2-0123456789ab", "1.2")
    from imagectl.images.sweep import Swept

    swept = Swept((item,), (), ((item, "container is in use"),))
    assert sweep_lines(swept) == ["not removed  container  imagectl-run-1.2-0123456789ab  (process 1.2, gone)",
                                  "removed: nothing; 1 not removed"]
    assert sweep_json(swept)["leftovers"] == [{"kind": "container", "name": "imagectl-run-1.2-0123456789ab",
                                               "process": "1.2", "status": "not removed",
                                               "reason": "container is in use"}]
    assert describe([item, item]) == "2 containers"
