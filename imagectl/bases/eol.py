"""Whether a base's CUDA release is past end of life, per NVIDIA's support policy, from the matrix's data (pure).

NVIDIA's container-images/cuda ``doc/support-policy.md``
(https://gitlab.com/nvidia/container-images/cuda/-/blob/master/doc/support-policy.md): "Cuda Toolkit images will
End-of-Life (EOL) when the driver it shipped with goes EOL"; "11 will be marked EOL, after 13 is released"; "After a
period of Six Months time, the EOL tags WILL BE DELETED from Docker Hub and Nvidia GPU Cloud (NGC)".  The matrix
records which releases are past end of life (``[cuda.X] end_of_life``, with the source) and, where the policy dates
it, the day (``eol_since``); the day the tags may go is that day plus the policy's six months.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date
from typing import Literal

from ..matrix.model import CudaToolkit

EolStatus = Literal["eol", "supported"]
POLICY_URL = "https://gitlab.com/nvidia/container-images/cuda/-/blob/master/doc/support-policy.md"
TAGS_KEPT_MONTHS = 6  # "After a period of Six Months time, the EOL tags WILL BE DELETED" (POLICY_URL)


@dataclass(frozen=True)
class EndOfLife:
    """A CUDA release's standing: ``eol`` (``since`` that day, None when no source dates it; its tags may be deleted
    from ``tags_deleted_after``) or ``supported`` (the matrix records no end of life); ``why`` the matrix's words."""

    cuda: str
    status: EolStatus
    since: str | None = None
    tags_deleted_after: str | None = None
    why: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        """The JSON shape (``since``/``tags_deleted_after``: ``unknown`` where no source dates them)."""
        unknown = "unknown" if self.status == "eol" else None
        return {"cuda": self.cuda, "status": self.status, "since": self.since or unknown,
                "tags_deleted_after": self.tags_deleted_after or unknown, "why": self.why, "policy": POLICY_URL}

    def line(self) -> str:
        """One line for a terminal: ``CUDA 11.8 past end of life since 2025-08-09 (tags may be deleted after ...)``."""
        if self.status != "eol":
            return f"CUDA {self.cuda} supported"
        since = f"since {self.since}" if self.since else "(day unknown)"
        gone = f"; NVIDIA may delete its tags after {self.tags_deleted_after}" if self.tags_deleted_after else ""
        return f"CUDA {self.cuda} past end of life {since}{gone}"


def end_of_life(toolkit: CudaToolkit) -> EndOfLife:
    """The end-of-life standing of ``toolkit``'s base images (pure)."""
    if not toolkit.end_of_life:
        return EndOfLife(toolkit.version, "supported")
    since = toolkit.eol_since
    deleted = add_months(date.fromisoformat(since), TAGS_KEPT_MONTHS).isoformat() if since else None
    return EndOfLife(toolkit.version, "eol", since, deleted, toolkit.end_of_life)


def add_months(day: date, months: int) -> date:
    """``day`` plus ``months`` calendar months, on the month's last day where it is shorter (pure)."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))
