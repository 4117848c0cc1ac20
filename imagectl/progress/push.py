"""Push progress from the engine's push events: "push: X of Y uploading" lines, at most one every few seconds,
from the bytes the engine reports per layer, and a last line of what was uploaded and what the registry had.

It takes its clock and output as arguments, so it is tested without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from . import Clock, LineSink
from .units import count_of, human_bytes

DONE_STATUSES = ("Pushed", "Layer already exists", "Mounted from")


class PushProgress:
    """Per-image push progress from the engine's events (``{"status", "id", "progressDetail": {"current",
    "total"}}``); ``event`` emits "push: X of Y (N of M layers done)" at most every ``every`` seconds, and
    ``finish`` the last line."""

    def __init__(self, emit: LineSink, every: float = 5.0, clock: Clock = time.monotonic) -> None:
        self._emit, self._every, self._clock = emit, every, clock
        self._layers: dict[str, tuple[int, int]] = {}  # id -> (bytes done, total)
        self._done: set[str] = set()
        self._seen: set[str] = set()
        self._last = clock()

    def event(self, chunk: Mapping[str, Any]) -> None:
        """Take one push event (others are ignored)."""
        layer, status = chunk.get("id"), str(chunk.get("status") or "")
        if not layer or not isinstance(layer, str):
            return
        self._seen.add(layer)
        detail = chunk.get("progressDetail") or {}
        if status == "Pushing" and isinstance(detail, Mapping) and detail.get("total"):
            self._layers[layer] = (int(detail.get("current") or 0), int(detail["total"]))
        elif status.startswith(DONE_STATUSES):
            self._done.add(layer)
            if layer in self._layers:
                total = self._layers[layer][1]
                self._layers[layer] = (total, total)
        if self._clock() - self._last >= self._every:
            self._emit(self.line())
            self._last = self._clock()

    def line(self) -> str:
        """The progress now, as one line."""
        done = sum(current for current, _ in self._layers.values())
        total = sum(total for _, total in self._layers.values())
        layers = f"{len(self._done)} of {len(self._seen)} layers done"
        if not total:
            return f"push: {layers}"
        return f"push: {human_bytes(done)} of {human_bytes(total)} uploading ({layers})"

    @property
    def uploaded(self) -> int:
        """The bytes of the layers the engine uploaded (their sizes as the engine reported them)."""
        return sum(total for _, total in self._layers.values())

    def finish(self) -> None:
        """Emit the final line (what was uploaded, what the registry already had)."""
        uploaded = self.uploaded
        kept = len(self._done - set(self._layers))
        self._emit(f"push: {human_bytes(uploaded)} uploaded in {count_of(len(self._layers), 'layer')}, "
                   f"{count_of(kept, 'layer')} the registry already had")
