"""An injectable ``sleep`` for :class:`imagectl.registry.RetryPolicy` that records its delays instead of waiting."""

from __future__ import annotations


class Sleeps(list[float]):
    """A sleep that records the delays instead of waiting: the retry tests assert on them, and take no time."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
