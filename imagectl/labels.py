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
from .image_spec import ImageSpec
from .matrix.facts import profile_facts
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
ENGINE = "imagectl.engine"  # the engine that built the image (docker, buildah); its version is not recorded
# The lock the image was installed from: its sha256 (of /opt/imagectl/lock.txt) and every package as
# name==version, comma-joined.  The full list fits a label: the largest shipped lock has under 50 packages
# (about 2 KB); the lock with its hashes is the file in the image.
LOCK_SHA256 = "imagectl.lock.sha256"
LOCK_PACKAGES = "imagectl.lock.packages"
EXTRAS = "imagectl.extras"  # a team's extras as locked on top of the profile's lock: name==version, comma-joined
OCI_TITLE = "org.opencontainers.image.title"
OCI_DESCRIPTION = "org.opencontainers.image.description"
OCI_VERSION = "org.opencontainers.image.version"
OCI_VENDOR = "org.opencontainers.image.vendor"
OCI_BASE_NAME = "org.opencontainers.image.base.name"
OCI_BASE_DIGEST = "org.opencontainers.image.base.digest"

# label -> the profile fact it records (imagectl.matrix.facts.profile_facts; None is recorded as "")
FACT_LABELS: Mapping[str, str] = {
    OCI_VERSION: "framework_version",
    FRAMEWORK: "framework",
    FRAMEWORK_VERSION: "framework_version",
    CUDA: "cuda",
    CUDNN: "cudnn",
    NCCL: "nccl",
    PYTHON: "python",
    FLAVOR: "flavor",
    OS: "os",
    MIN_DRIVER: "min_driver",
}
# history's version columns -> the label each is read from
VERSION_LABELS: Mapping[str, str] = {
    "framework": FRAMEWORK,
    "version": FRAMEWORK_VERSION,
    "cuda": CUDA,
    "cudnn": CUDNN,
    "nccl": NCCL,
    "python": PYTHON,
}


def join_packages(packages: Mapping[str, str]) -> str:
    """``name==version`` of each package, sorted by name, comma-joined (the form of the package labels)."""
    return ",".join(f"{name}=={version}" for name, version in sorted(packages.items()))


def split_packages(text: str | None) -> dict[str, str]:
    """The inverse of :func:`join_packages`; items without ``==`` are ignored."""
    pairs = (item.split("==", 1) for item in (text or "").split(",") if "==" in item)
    return {name: version for name, version in pairs}


def labels_for(spec: ImageSpec, base: Reference) -> dict[str, str]:
    """OCI and imagectl labels recording the image of ``spec`` built on ``base`` (as pulled, with its digest when
    known) and every resolved version, sorted by key (pure).

    An image installed from a lock records its sha256 and every package; a team's extras record the packages they
    added on top of it, and the title then names what the image really is (the repository name,
    ``PROFILE-SUFFIX``): the profile label says ``PROFILE+extras``."""
    profile, facts, added = spec.profile, profile_facts(spec.profile), spec.added
    labels = {label: facts[key] or "" for label, key in FACT_LABELS.items()}
    labels.update({
        OCI_TITLE: spec.title or profile.name,
        OCI_DESCRIPTION: f"{profile.framework.label} {profile.release.version} with CUDA {profile.variant.cuda}, "
                         f"Python {profile.python}",
        OCI_VENDOR: "imagectl",
        OCI_BASE_NAME: str(spec.public_base),
        PROFILE: f"{profile.name}+extras" if added else profile.name,
        PACKAGES: ",".join(f"{name}=={version}" for name, version in profile.packages),
        IMAGECTL_VERSION: __version__,
    })
    if base.digest:
        labels[OCI_BASE_DIGEST] = base.digest
    if spec.locked is not None:
        labels[LOCK_SHA256], labels[LOCK_PACKAGES] = spec.locked.sha256, join_packages(spec.locked.versions)
    if added:
        labels[EXTRAS] = join_packages(added)
    return dict(sorted(labels.items()))


def expectations(labels: Mapping[str, str]) -> dict[str, Any]:
    """What an image's imagectl labels promise; raises OperationError for an image imagectl did not label."""
    if FRAMEWORK not in labels:
        raise OperationError("the image has no imagectl labels: nothing to compare with "
                             "(use 'imagectl import' for foreign images)")
    locked = labels.get(LOCK_PACKAGES)
    return {
        "framework": labels[FRAMEWORK],
        "version": labels.get(FRAMEWORK_VERSION),
        "cuda": labels.get(CUDA),
        "cudnn": labels.get(CUDNN) or None,
        "nccl": labels.get(NCCL) or None,
        "python": labels.get(PYTHON),
        "packages": split_packages(labels.get(PACKAGES)),
        # the whole environment, when the image was installed from a lock (None for older or foreign images)
        "lock": split_packages(locked) if locked else None,
        "lock_sha256": labels.get(LOCK_SHA256) or None,
        "extras": split_packages(labels.get(EXTRAS)),
    }


def expectations_from_profile(profile: Profile) -> dict[str, Any]:
    """What an image of ``profile`` must contain: the same dict :func:`expectations` gives for the labels of a
    build of ``profile`` (pure)."""
    return expectations(labels_for(ImageSpec(profile), profile.base_image))


def label_versions(labels: Mapping[str, str]) -> dict[str, str]:
    """The versions an image's labels record (``version``, ``cuda``, ...), where present."""
    return {key: labels[label] for key, label in VERSION_LABELS.items() if labels.get(label)}
