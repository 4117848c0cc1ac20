"""What ``show``, ``build --plan`` and ``build --json`` print of an image's expected size (:mod:`imagectl.images.size`):
plain data for ``--json``, and the text made from that data.

In the data, a part's unknown size is None; a group's (and the image's) size is the sum of its known parts, with
``complete`` (compressed) and ``unpacked_complete`` saying whether that is all of it or a floor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..progress.units import human_bytes
from ..redact import redact
from .printable import printable
from .table import format_table

if TYPE_CHECKING:  # the data's types only: show imports none of the estimate's machinery to print it
    from ..images.size import ExpectedGroup, ExpectedSize
    from ..images.size_gate import SizeReport

LOCKED_AT_BUILD = "unknown: no lock applies (the build locks it; build --plan locks and sizes it)"


def _group_dict(group: ExpectedGroup, secrets: Sequence[str]) -> dict[str, Any]:
    parts = [{"name": p.name, "compressed": p.compressed, "unpacked": p.unpacked, "how": p.how,
              "note": redact(p.note, secrets)} for p in group.parts]
    return {"group": group.group, "compressed": group.compressed, "unpacked": group.unpacked,
            "complete": group.complete, "unpacked_complete": group.unpacked_complete, "parts": parts}


def size_dict(size: ExpectedSize, secrets: Sequence[str] = ()) -> dict[str, Any]:
    """An expected size as ``--json`` carries it: totals, and each layer group with its parts (their notes, which may
    quote an index's or a registry's error, redacted)."""
    return {"compressed": size.compressed, "unpacked": size.unpacked, "complete": size.complete,
            "unpacked_complete": size.unpacked_complete, "groups": [_group_dict(g, secrets) for g in size.groups]}


def report_dict(report: SizeReport, secrets: Sequence[str] = ()) -> dict[str, Any]:
    """A build's size report as ``build --json`` and ``build --plan --json`` carry it: the budget (None: none
    applies), the expected size per platform, and the refusal (None: within the budget, as far as is known)."""
    budget = {"bytes": report.budget.limit, "source": report.budget.source} if report.budget else None
    return {"budget": budget, "over_budget": redact(report.refusal, secrets) or None,
            "expected": {platform: size_dict(size, secrets) for platform, size in report.expected.items()}}


def _amount(known: int, complete: bool) -> str:
    if complete:
        return human_bytes(known)
    return f">= {human_bytes(known)}" if known else "unknown"


def _how(group: Mapping[str, Any]) -> str:
    """What a group's numbers come from, in a few words (the parts' ``how``, counted)."""
    parts: Sequence[Mapping[str, Any]] = group["parts"]
    wheels = sum(1 for p in parts if p["how"] == "wheel")
    said = [f"{wheels} wheel{'s' if wheels != 1 else ''}"] if wheels else []
    said += [f"{p['name']} ({p['how']})" for p in parts if p["how"] in ("manifest", "estimate", "rendered")]
    unknown = [p for p in parts if p["how"] == "unknown"]
    if len(unknown) == 1:
        said.append(f"{unknown[0]['name']}: unknown, {unknown[0]['note']}")
    elif unknown:
        notes = sorted({p["note"] for p in unknown})
        said.append(f"{len(unknown)} unknown ({'; '.join(notes)})")
    return "; ".join(said)


def size_text(size: Mapping[str, Any] | None) -> str:
    """An expected size (:func:`size_dict`'s data) as text: a summary line, then a table of its layer groups;
    ``None`` (no lock applies) as one line."""
    if size is None:
        return LOCKED_AT_BUILD
    rows = [{"group": g["group"], "compressed": _amount(g["compressed"], g["complete"]),
             "unpacked": _amount(g["unpacked"], g["unpacked_complete"]), "from": _how(g)} for g in size["groups"]]
    head = (f"{_amount(size['compressed'], size['complete'])} compressed, "
            f"{_amount(size['unpacked'], size['unpacked_complete'])} unpacked (expected, before the build)")
    table = format_table(rows, ("group", "compressed", "unpacked", "from"))
    return head + "".join(f"\n  {line}" for line in table.splitlines())


def report_text(profile: str, report: Mapping[str, Any]) -> str:
    """A size report (:func:`report_dict`'s data) of ``profile`` as text: each platform's expected size, then the
    budget and its verdict."""
    lines = [f"{printable(profile)} {platform}: {size_text(size)}" for platform, size in report["expected"].items()]
    budget = report["budget"]
    if budget is not None:
        verdict = f"over it: {report['over_budget']}" if report["over_budget"] else "within it, as far as is known"
        lines.append(f"{printable(profile)}: size budget {human_bytes(budget['bytes'])} ({budget['source']}): "
                     f"{printable(verdict)}")
    return "\n".join(lines)
