"""What ``list`` and ``show`` print about profiles (plain data; the commands print it as JSON or text)."""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..matrix.model import Profile
from ..pip_index import index_url
from ..render.context import base_reference
from ..tags.naming import moving_reference

LIST_COLUMNS = ("name", "framework_version", "cuda", "cudnn", "nccl", "python", "min_driver")


def describe_profile(profile: Profile, config: Config) -> dict[str, Any]:
    """Everything ``show --json`` prints for a profile (see README for the keys)."""
    return {
        "name": profile.name,
        "framework": profile.framework.name,
        "framework_version": profile.release.version,
        "cuda": profile.variant.cuda,
        "cuda_release": profile.toolkit.release,
        "cudnn": profile.variant.cudnn,
        "nccl": profile.variant.nccl,
        "python": profile.python,
        "python_supported": list(profile.release.python),
        "flavor": profile.flavor,
        "os": profile.os.name,
        "base_image": str(profile.base_image),
        "base_image_pull": str(base_reference(profile, config)),
        "min_driver": profile.toolkit.min_driver,
        "min_driver_compat": profile.toolkit.min_driver_compat,
        "gpu_archs": list(profile.variant.archs or profile.toolkit.archs),
        "pypi_default_build": profile.variant.pypi,
        "index_url": index_url(profile, config),
        "packages": dict(profile.packages),
        "image": moving_reference(profile.name, config).familiar,
    }
