"""Quantities as progress lines print them: bytes in decimal units, elapsed clock time, counted nouns."""

from __future__ import annotations


def human_bytes(count: float) -> str:
    """``1.2 GB`` (decimal units, as the engine prints them)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"  # pragma: no cover


def clock_text(seconds: float) -> str:
    """``01:23`` or ``1:02:03``: an elapsed time."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def count_of(count: int, noun: str) -> str:
    """``1 layer``, ``2 layers``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
