"""What ``compat`` prints: its table (a note several rows share said once, under the table) and its JSON rows."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from ..matrix.compat import Verdict


def compat_rows(verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """``compat --json``: one object per profile, each with all its notes and what lets it run."""
    return [{"name": v.profile, "compatible": v.ok, "mechanism": v.mechanism or None, "reasons": list(v.reasons),
             "notes": list(v.notes),
             "modes": {mode: {"compatible": ok, "mechanism": how or None} for mode, ok, how in v.modes} or None}
            for v in verdicts]


def shared_notes(verdicts: Sequence[Verdict]) -> list[str]:
    """The notes of runnable rows that more than one of them carries, in the order they first appear."""
    counts = Counter(note for v in verdicts if v.ok for note in dict.fromkeys(v.notes))
    return [note for note in dict.fromkeys(n for v in verdicts if v.ok for n in v.notes) if counts[note] > 1]


def compat_table(verdicts: Sequence[Verdict], show_all: bool) -> list[str]:
    """``compat``'s lines: ``ok    NAME`` with the row's own notes in parentheses and ``[N]`` for each shared note,
    ``no    NAME: reasons`` (with ``show_all``), then ``notes:`` and each shared note once, with its rows."""
    shared = shared_notes(verdicts)
    number = {note: i for i, note in enumerate(shared, start=1)}
    lines = []
    for v in verdicts:
        if v.ok:
            refs = "".join(f" [{number[n]}]" for n in v.notes if n in number)
            own = "".join(f"  ({n})" for n in v.notes if n not in number)
            lines.append(f"ok    {v.profile}{refs}{own}")
        elif show_all:
            lines.append(f"no    {v.profile}: {'; '.join(v.reasons)}")
    if shared:
        lines += ["", "notes:"]
        for note, i in number.items():
            rows = ", ".join(v.profile for v in verdicts if v.ok and note in v.notes)
            lines.append(f"  [{i}] {note} ({rows})")
    return lines
