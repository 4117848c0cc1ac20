"""``[advisories] fail_on``: which findings stop a build (pure)."""

from __future__ import annotations

from typing import Sequence

from .match import Finding
from .record import SEVERITIES


def gate_hits(found: Sequence[Finding], fail_on: str | tuple[str, ...] | None) -> list[Finding]:
    """The findings ``fail_on`` refuses: with a severity, those of that severity or higher (a finding no record gives
    a severity never meets one); with ids, those any of whose ids (id or alias, any case) is listed; none for
    None."""
    if fail_on is None:
        return []
    if isinstance(fail_on, str):
        floor = SEVERITIES.index(fail_on)
        return [f for f in found if f.severity is not None and SEVERITIES.index(f.severity) >= floor]
    wanted = {i.upper() for i in fail_on}
    return [f for f in found if wanted & {i.upper() for i in f.ids}]


def describe_fail_on(fail_on: str | tuple[str, ...]) -> str:
    """``fail_on = "high"`` or ``fail_on = ["CVE-2025-32434"]``, as the configuration says it."""
    shown = f'"{fail_on}"' if isinstance(fail_on, str) else "[" + ", ".join(f'"{i}"' for i in fail_on) + "]"
    return f"[advisories] fail_on = {shown}"
