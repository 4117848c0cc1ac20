"""What ``list`` and ``show`` print about profiles: plain data (the commands print it as JSON or text), derived
from the one projection of a profile, :func:`~imagectl.matrix.facts.profile_facts`."""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..lock.runtime import cuda_of
from ..lock.store import FoundLock, find_lock
from ..matrix.facts import list_row, profile_facts
from ..matrix.listing import profile_notes
from ..matrix.model import CudaToolkit, Matrix, Profile
from ..matrix.runtime import runtime_toolkit
from ..image_spec import ImageSpec
from ..pip_index import index_url
from ..tags.naming import moving_reference
from .size_views import size_dict, size_text

LIST_COLUMNS = ("name", "framework_version", "cuda", "cudnn", "nccl", "python", "min_driver", "verified", "base",
                "platforms", "lock")
# list's lock column: where the lock a build installs comes from; "build" = locked at build time (unlocked here)
UNLOCKED = "build"
# show's keys, in the order ``show`` prints them (see docs/matrix.md for what each means)
SHOW_KEYS = ("name", "framework", "framework_version", "cuda", "cuda_release", "cudnn", "nccl", "python",
             "python_supported", "flavor", "os", "base_image", "base_image_pull", "end_of_life", "min_driver",
             "min_driver_compat",
             "gpu_archs", "pypi_default_build", "verified", "unverified", "companions", "notes", "index_url",
             "packages", "platforms", "platform_evidence", "lock", "size", "image")


def list_table_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ``list --json`` row as the table shows it: ``verified`` is ``yes``, or ``NO`` (see ``show`` for why);
    ``base`` is ``EOL`` where NVIDIA's base images of the CUDA release are past end of life (``show`` says why),
    else ``ok``."""
    return {**row, "verified": "yes" if row["verified"] else "NO", "base": "EOL" if row["end_of_life"] else "ok",
            "platforms": ",".join(p.removeprefix("linux/") for p in row["platforms"])}


def applying_lock(profile: Profile, config: Config,
                  matrix: Matrix) -> tuple[FoundLock | None, CudaToolkit, list[str]]:
    """``(lock file, toolkit, notes)`` of ``profile``, with one lookup of the lock: the lock file a build installs
    (None: the build locks at build time) and the CUDA whose driver floors and GPU targets apply, the one that lock
    installs (JAX's plugins take the newest CUDA wheels of the major), as ``compat`` judges it.  Raises InputError
    for a lock file that cannot be read."""
    found = find_lock(profile, config, index_url(profile, config))
    toolkit, notes = runtime_toolkit(profile, cuda_of(found, matrix))
    return found, toolkit, notes


def list_row_with_lock(profile: Profile, config: Config, matrix: Matrix) -> dict[str, Any]:
    """A ``list --json`` row: the profile's :func:`~imagectl.matrix.facts.list_row`, the driver floor of the CUDA
    its lock installs, and where that lock comes from (``shipped``, ``team``, or ``build``: locked at build time)."""
    found, toolkit, _ = applying_lock(profile, config, matrix)
    return {**list_row(profile), "lock": found.origin if found else UNLOCKED, "min_driver": toolkit.min_driver}


def lock_summary(found: FoundLock | None) -> dict[str, object] | None:
    """What ``show --json`` says of the lock a build installs, or None when the build locks at build time (no
    lock file applies)."""
    if found is None:
        return None
    header = found.lock.header
    return {
        "id": header.lock_id, "origin": found.origin, "path": str(found.path), "sha256": found.lock.sha256,
        "as_of": header.as_of, "index": header.index, "platform": header.platform,
        "source": f"{header.source} ({header.as_of_note})" if header.as_of_note else header.source,
        "packages": found.lock.versions,
    }


def size_of(profile: Profile, found: FoundLock | None, config: Config) -> dict[str, Any] | None:
    """What ``show --json`` says of the image's expected size (:func:`~.size_views.size_dict`; None: no lock
    applies).  Offline: the wheel cache and the sizes ``build --plan`` read (:mod:`imagectl.images.size_facts`)."""
    from ..images.size_facts import profile_size

    size = profile_size(profile, found.lock if found else None, config)
    return size_dict(size) if size is not None else None


def describe_profile(profile: Profile, config: Config, matrix: Matrix) -> dict[str, Any]:
    """Everything ``show --json`` prints for a profile (docs/matrix.md: the keys), in :data:`SHOW_KEYS` order: its
    facts, where a build pulls its base and installs from, and the lock it installs; the driver floors and GPU
    targets follow the CUDA that lock installs.  Raises InputError for a lock file that cannot be read."""
    found, toolkit, runtime_notes = applying_lock(profile, config, matrix)
    described = {
        **profile_facts(profile),
        "base_image_pull": str(ImageSpec(profile).pulled_base(config.mirrors)),
        "min_driver": toolkit.min_driver,
        "min_driver_compat": toolkit.min_driver_compat,
        "gpu_archs": list(profile.variant.archs or toolkit.archs),
        # unverified build, companions not released (as build prints them), a lock's CUDA other than the label's
        "notes": profile_notes(profile) + runtime_notes,
        "index_url": index_url(profile, config),
        # the lock a build installs; None: no lock file applies, the build locks at build time
        "lock": lock_summary(found),
        # the expected size per layer group, from what the caches know (show reads no index or registry)
        "size": size_of(profile, found, config),
        "image": moving_reference(profile.name, config).familiar,
    }
    return {key: described[key] for key in SHOW_KEYS}


def show_text(info: dict[str, Any]) -> str:
    """``show`` as text: one ``key  value`` line per key of :func:`describe_profile` (``verified`` says why not,
    ``companions`` says when none or some are released; ``unverified`` and ``notes`` are said there)."""
    notes = {note.split(": ", 1)[0]: note.split(": ", 1)[1] for note in info["notes"]}
    lines = []
    for key, value in info.items():
        if key in ("unverified", "notes"):
            continue
        if key == "verified":
            value = "yes" if value else f"no: {info['unverified']}"
        elif key == "end_of_life":
            value = f"yes: {value}" if value else "no"
        elif key == "platform_evidence":
            value = "; ".join(f"{k}: {v}" for k, v in value.items()) or "-"
        elif key in ("companions", "packages"):
            value = " ".join(f"{k}=={v}" for k, v in value.items())
            if key == "companions" and "companions" in notes:
                value = f"{value}  ({notes['companions']})" if value else notes["companions"]
        elif key == "lock":
            value = (f"{value['origin']} {value['path']} ({len(value['packages'])} packages, as of {value['as_of']}, "
                     f"sha256 {value['sha256'][:12]})") if value else "none: locked at build time"
        elif key == "size":
            value = size_text(value)
        elif isinstance(value, list):
            value = " ".join(value)
        lines.append(f"{key:20} {value}")
    return "\n".join(lines)
