"""The text view of what ``build`` returns: the summary table."""

from __future__ import annotations

from collections.abc import Sequence

from ..images.builder import BuildResult
from ..tags.naming import short_digest
from .table import format_table


def summary_table(results: Sequence[BuildResult]) -> str:
    """The final table: profile, status (built, reused, failed), tag, digest, size, seconds."""
    rows = [{
        "profile": r.profile, "status": r.status, "tag": r.tag or "-", "digest": short_digest(r.digest),
        "size": f"{r.size / 1e6:.0f} MB" if r.size else "-", "seconds": f"{r.seconds:.1f}",
    } for r in results]
    return format_table(rows, ("profile", "status", "tag", "digest", "size", "seconds"))
