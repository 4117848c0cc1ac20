"""The rows the CI outputs fan out over, and how they are cut to a CI system's job limit (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..errors import InputError
from ..matrix.model import Profile

T = TypeVar("T")


def chunked(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` in order, cut into lists of ``size`` (the last one shorter); ``[]`` for no items.

    Raises:
        InputError: ``size`` below 1.
    """
    if size < 1:
        raise InputError(f"--max-jobs {size}: must be a positive integer")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def github_include(profile: Profile, platform: str | None = None) -> dict[str, str | bool]:
    """One entry of a GitHub Actions ``strategy.matrix.include`` list: one build job, of ``profile`` for one of its
    platforms (default: its first); ``platforms`` all of them, comma-separated (``unverified``: the reason, or
    ``""``: the workflow schema allows no null as a matrix value, and both are false in a workflow's ``if``)."""
    return {
        "profile": profile.name,
        "framework": profile.framework.name,
        "cuda": profile.variant.cuda,
        "python": profile.python,
        "verified": profile.verified,
        "unverified": profile.variant.unverified or "",
        "platform": platform or profile.platforms[0],
        "platforms": ",".join(profile.platforms),
    }


def packed(groups: Sequence[list[T]], size: int) -> list[list[list[T]]]:
    """``groups`` in order, packed into chunks of at most ``size`` items without splitting a group (a profile's
    platforms share a chunk, so the chunk's index job waits for all of them); ``[]`` for no groups.

    Raises:
        InputError: ``size`` below 1, or a group larger than ``size``.
    """
    if size < 1:
        raise InputError(f"--max-jobs {size}: must be a positive integer")
    out: list[list[list[T]]] = []
    for group in groups:
        if len(group) > size:
            raise InputError(f"--max-jobs {size}: a profile builds for {len(group)} platforms, one job each, and "
                             "they share a chunk; give at least that many")
        if not out or sum(map(len, out[-1])) + len(group) > size:
            out.append([])
        out[-1].append(group)
    return out
