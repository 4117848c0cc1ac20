"""A profile's facts as plain data: the one projection of a :class:`~.model.Profile` that ``list``, ``show``, the
CI outputs, the templates and the image labels (and through them the in-image check's expectations) derive from.
"""

from __future__ import annotations

from typing import Any

from .model import Profile

# the keys of a ``list`` row (and of the CI outputs' profile entries), a subset of :func:`profile_facts`
LIST_KEYS = ("name", "framework", "framework_version", "cuda", "cudnn", "nccl", "python", "python_supported",
             "flavor", "os", "min_driver", "verified", "unverified", "end_of_life", "platforms")


def profile_facts(profile: Profile) -> dict[str, Any]:
    """Every fact the matrix records of ``profile`` (pure).  ``cudnn``, ``nccl`` and ``unverified`` are None
    where not recorded, ``end_of_life`` while NVIDIA supports the base images; ``min_driver`` and ``gpu_archs`` are
    those of the CUDA the profile is labelled with (the CUDA its lock installs may differ: see
    :func:`imagectl.matrix.runtime.runtime_toolkit`)."""
    variant, toolkit = profile.variant, profile.toolkit
    return {
        "name": profile.name,
        "framework": profile.framework.name,
        "framework_version": profile.release.version,
        "cuda": variant.cuda,
        "cuda_release": toolkit.release,
        "cudnn": variant.cudnn,
        "nccl": variant.nccl,
        "python": profile.python,
        "python_supported": list(profile.release.python),
        "flavor": profile.flavor,
        "os": profile.os.name,
        "base_image": str(profile.base_image),
        # why NVIDIA's images of the profile's CUDA release are past end of life (their tags get deleted), or None
        "end_of_life": toolkit.end_of_life,
        "min_driver": toolkit.min_driver,
        "min_driver_compat": toolkit.min_driver_compat,
        "gpu_archs": list(variant.archs or toolkit.archs),
        "pypi_default_build": variant.pypi,
        "verified": profile.verified,
        "unverified": variant.unverified,
        "companions": dict(profile.release.companions),
        "packages": dict(profile.packages),
        # the OCI platforms its index has CUDA wheels for (matrices/platforms.toml), and what shows it per platform
        "platforms": list(profile.platforms),
        "platform_evidence": dict(variant.platform_sources),
    }


def list_row(profile: Profile) -> dict[str, Any]:
    """The short description ``list`` and the CI outputs print per profile (pure)."""
    facts = profile_facts(profile)
    return {key: facts[key] for key in LIST_KEYS}
