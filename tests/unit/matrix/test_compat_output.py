"""What ``compat`` prints (issue 21, item 5): a note several rows share is said once, under the table, with the rows
it applies to; ``--json`` keeps every note on its row and says what lets each profile run."""

from __future__ import annotations

import json

from imagectl.cli.compat_views import compat_table, shared_notes
from imagectl.matrix.compat import Verdict


def test_a_shared_note_is_said_once_under_the_table_with_its_rows():
    verdicts = [Verdict("a", True, (), ("shared", "own a"), "full support"),
                Verdict("b", True, (), ("shared",), "full support"),
                Verdict("c", False, ("why not",), ("shared",)),
                Verdict("d", True, (), (), "full support")]
    assert shared_notes(verdicts) == ["shared"]  # a row that cannot run does not count
    assert compat_table(verdicts, show_all=True) == [
        "ok    a [1]  (own a)", "ok    b [1]", "no    c: why not", "ok    d", "", "notes:", "  [1] shared (a, b)"]
    assert compat_table(verdicts[3:], show_all=False) == ["ok    d"]  # nothing shared: no notes section


def test_jax_s_lock_note_is_printed_once_not_on_every_row(run_cli):
    r = run_cli("compat", "--driver", "570.124.06", "--framework", "jax")
    table, notes = r.out.split("\n\nnotes:\n")
    lock_note = "the lock installs nvidia-cuda-runtime-cu12==12.9.79"
    assert lock_note not in table and notes.count(lock_note) == 1
    rows = [line.split()[1] for line in table.splitlines()]
    cuda12 = [name for name in rows if "-cuda12" in name]
    line = next(n for n in notes.splitlines() if lock_note in n)
    assert len(cuda12) > 1 and line.endswith(f"({', '.join(cuda12)})")
    marker = line.split("]")[0].strip() + "]"
    assert all(marker in row for row in table.splitlines() if "-cuda12" in row)


def test_json_keeps_the_notes_per_row_and_names_the_mechanism(run_cli):
    rows = json.loads(run_cli("compat", "--driver", "550.54.15", "--framework", "jax", "--json").out)
    cuda12 = [r for r in rows if "-cuda12" in r["name"]]
    assert cuda12 and all(any("nvidia-cuda-runtime-cu12==12.9.79" in n for n in r["notes"]) for r in cuda12)
    assert {r["mechanism"] for r in cuda12} == {
        "forward compatibility (cuda-compat, data-center GPUs only) and minor-version compatibility"}
    rows = json.loads(run_cli("compat", "--driver", "450.80.02", "--framework", "jax", "--json").out)
    assert rows and all(r["mechanism"] is None and not r["compatible"] for r in rows)
