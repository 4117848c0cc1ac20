"""The short, plain-data description of a profile that ``list`` and the CI outputs print."""

from __future__ import annotations

from typing import Any

from .model import Profile


def list_row(profile: Profile) -> dict[str, Any]:
    """The short description ``list`` prints per profile (pure)."""
    return {
        "name": profile.name,
        "framework": profile.framework.name,
        "framework_version": profile.release.version,
        "cuda": profile.variant.cuda,
        "cudnn": profile.variant.cudnn,
        "nccl": profile.variant.nccl,
        "python": profile.python,
        "python_supported": list(profile.release.python),
        "flavor": profile.flavor,
        "os": profile.os.name,
        "min_driver": profile.toolkit.min_driver,
    }
