"""What ``list`` and ``show`` print about profiles (plain data; the commands print it as JSON or text)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: `show` with a cached description only formats it
    from ..config import Config
    from ..matrix.model import Matrix, Profile

LIST_COLUMNS = ("name", "framework_version", "cuda", "cudnn", "nccl", "python", "min_driver", "verified", "lock")
# list's lock column: where the lock a build installs comes from; "build" = locked at build time (unlocked here)
UNLOCKED = "build"


def list_table_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ``list --json`` row as the table shows it: ``verified`` is ``yes``, or ``NO`` (see ``show`` for why)."""
    return {**row, "verified": "yes" if row["verified"] else "NO"}


def lock_origin(profile: Profile, config: Config) -> str:
    """``shipped`` or ``team`` (a lock file applies), else ``build`` (the build locks against its index)."""
    from ..lock.store import find_lock
    from ..pip_index import index_url

    found = find_lock(profile, config, index_url(profile, config))
    return found.origin if found else UNLOCKED


def effective_toolkit(profile: Profile, config: Config, matrix: Matrix | None):
    """``(toolkit, notes)``: the CUDA whose driver floors and GPU targets apply to ``profile``, the one its lock
    installs (JAX's plugins take the newest CUDA wheels of the major), as ``compat`` judges it; the nominal one
    without ``matrix``."""
    from ..lock.runtime import lock_reader
    from ..matrix.runtime import runtime_toolkit

    if matrix is None:
        return profile.toolkit, []
    return runtime_toolkit(profile, lock_reader(config, matrix)(profile))


def describe_profile(profile: Profile, config: Config, matrix: Matrix | None = None) -> dict[str, Any]:
    """Everything ``show --json`` prints for a profile (see README for the keys); with the ``matrix`` the driver
    floors and GPU targets follow the CUDA its lock installs."""
    from ..lock.store import lock_summary
    from ..matrix.listing import profile_notes
    from ..pip_index import index_url
    from ..render.context import base_reference
    from ..tags.naming import moving_reference

    toolkit, runtime_notes = effective_toolkit(profile, config, matrix)
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
        "min_driver": toolkit.min_driver,
        "min_driver_compat": toolkit.min_driver_compat,
        "gpu_archs": list(profile.variant.archs or toolkit.archs),
        "pypi_default_build": profile.variant.pypi,
        "verified": profile.verified,
        "unverified": profile.variant.unverified,  # why the build's facts could not all be sourced, or None
        "companions": dict(profile.release.companions),
        # unverified build, companions not released (as build prints them), a lock's CUDA other than the label's
        "notes": profile_notes(profile) + runtime_notes,
        "index_url": index_url(profile, config),
        "packages": dict(profile.packages),
        # the lock a build installs; None: no lock file applies, the build locks at build time
        "lock": lock_summary(profile, config, index_url(profile, config)),
        "image": moving_reference(profile.name, config).familiar,
    }


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
        elif key in ("companions", "packages"):
            value = " ".join(f"{k}=={v}" for k, v in value.items())
            if key == "companions" and "companions" in notes:
                value = f"{value}  ({notes['companions']})" if value else notes["companions"]
        elif key == "lock":
            value = (f"{value['origin']} {value['path']} ({len(value['packages'])} packages, as of {value['as_of']}, "
                     f"sha256 {value['sha256'][:12]})") if value else "none: locked at build time"
        elif isinstance(value, list):
            value = " ".join(value)
        lines.append(f"{key:20} {value}")
    return "\n".join(lines)
