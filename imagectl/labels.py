"""The one declaration of every image label imagectl writes and reads.

A build writes :func:`labels_for` into the image; the in-image check compares the image with
:func:`expectations` of those labels; ``history`` shows :func:`label_versions`; ``import`` builds the same
expectations from a profile with :func:`expectations_from_profile`.  No other module spells a label key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import __version__
from .errors import OperationError
from .matrix.model import Profile
from .reference import Reference

PREFIX = "imagectl."
PROFILE = "imagectl.profile"
FRAMEWORK = "imagectl.framework"
FRAMEWORK_VERSION = "imagectl.framework.version"
CUDA = "imagectl.cuda"
CUDNN = "imagectl.cudnn"
NCCL = "imagectl.nccl"
PYTHON = "imagectl.python"
FLAVOR = "imagectl.flavor"
OS = "imagectl.os"
MIN_DRIVER = "imagectl.min-driver"
PACKAGES = "imagectl.packages"
IMAGECTL_VERSION = "imagectl.version"
BUILD_KEY = "imagectl.build-key"
OCI_TITLE = "org.opencontainers.image.title"
OCI_DESCRIPTION = "org.opencontainers.image.description"
OCI_VERSION = "org.opencontainers.image.version"
OCI_VENDOR = "org.opencontainers.image.vendor"
OCI_BASE_NAME = "org.opencontainers.image.base.name"
OCI_BASE_DIGEST = "org.opencontainers.image.base.digest"

# history's version columns -> the label each is read from
VERSION_LABELS: Mapping[str, str] = {
    "framework": FRAMEWORK,
    "version": FRAMEWORK_VERSION,
    "cuda": CUDA,
    "cudnn": CUDNN,
    "nccl": NCCL,
    "python": PYTHON,
}


def labels_for(profile: Profile, base: Reference, public_base: Reference | None = None) -> dict[str, str]:
    """OCI and imagectl labels recording the profile and every resolved version (sorted by key, pure)."""
    v = profile.variant
    labels = {
        OCI_TITLE: profile.name,
        OCI_DESCRIPTION: f"{profile.framework.label} {profile.release.version} with CUDA {v.cuda}, "
                         f"Python {profile.python}",
        OCI_VERSION: profile.release.version,
        OCI_VENDOR: "imagectl",
        OCI_BASE_NAME: str(public_base or profile.base_image),
        PROFILE: profile.name,
        FRAMEWORK: profile.framework.name,
        FRAMEWORK_VERSION: profile.release.version,
        CUDA: v.cuda,
        CUDNN: v.cudnn or "",
        NCCL: v.nccl or "",
        PYTHON: profile.python,
        FLAVOR: profile.flavor,
        OS: profile.os.name,
        MIN_DRIVER: profile.toolkit.min_driver,
        PACKAGES: ",".join(f"{name}=={version}" for name, version in profile.packages),
        IMAGECTL_VERSION: __version__,
    }
    if base.digest:
        labels[OCI_BASE_DIGEST] = base.digest
    return dict(sorted(labels.items()))


def expectations(labels: Mapping[str, str]) -> dict[str, Any]:
    """What an image's imagectl labels promise; raises OperationError for an image imagectl did not label."""
    if FRAMEWORK not in labels:
        raise OperationError("the image has no imagectl labels: nothing to compare with "
                             "(use 'imagectl import' for foreign images)")
    pins = (item.split("==", 1) for item in labels.get(PACKAGES, "").split(",") if "==" in item)
    return {
        "framework": labels[FRAMEWORK],
        "version": labels.get(FRAMEWORK_VERSION),
        "cuda": labels.get(CUDA),
        "cudnn": labels.get(CUDNN) or None,
        "nccl": labels.get(NCCL) or None,
        "python": labels.get(PYTHON),
        "packages": dict(pins),
    }


def expectations_from_profile(profile: Profile) -> dict[str, Any]:
    """What an image of ``profile`` must contain: the same dict :func:`expectations` gives for the labels of a
    build of ``profile`` (pure)."""
    return expectations(labels_for(profile, profile.base_image))


def label_versions(labels: Mapping[str, str]) -> dict[str, str]:
    """The versions an image's labels record (``version``, ``cuda``, ...), where present."""
    return {key: labels[label] for key, label in VERSION_LABELS.items() if labels.get(label)}
