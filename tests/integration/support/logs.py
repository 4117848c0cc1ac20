"""The end of a helper process's log file (dockerd, mmdebstrap, docker-registry), for an error message."""

from __future__ import annotations

from pathlib import Path


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the log at ``path``, or ``(no log)`` when it cannot be read."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
