"""``--as-of``: which day a lock is resolved as of.

- ``YYYY-MM-DD``: as if it were that day (uv's ``--exclude-newer``: files uploaded on that day or before).
- ``release``: the framework release's own upload date on the index, plus ``[lock] grace_days`` (default 7):
  the environment the release shipped against.  As of torch 2.3.1 (uploaded 2024-06-05) it gives numpy
  1.26.4 and pillow 10.3.0, not numpy 2.0 (2024-06-16).  This is the default (``[lock] as_of``), and every
  shipped lock is made with it: it is reproducible, and it is what the release was tested with.
- ``latest``: no cut-off; what the index offers today.

An index that serves no upload times (a static or mirrored index often does not: PEP 700 is optional) cannot say
when a release was uploaded.  ``release`` taken from ``[lock] as_of`` (a build's lock, ``imagectl lock`` without
``--as-of``) then falls back to no cut-off, said as ``none`` (the lock header: ``as-of: none (the index gives no upload
times)``); an explicit ``--as-of release`` still fails, naming the setting.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from ..errors import InputError, OperationError
from ..matrix.model import Profile
from ..pypi.simple import project_files
from ..pypi.transport import index_settings
from ..pypi.wheels import is_wheel, parse_wheel
from .target import Target

DEFAULT_POLICY = "release"
DEFAULT_GRACE_DAYS = 7
NO_TIMES = "the index gives no upload times"  # the note of the as-of "none" fallback
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class AsOf:
    """A resolved ``--as-of``: the date (``YYYY-MM-DD``) or ``latest``, and why that date."""

    date: str
    note: str = ""


def check_policy(value: str, what: str = "--as-of") -> str:
    """``value`` if it is ``release``, ``latest`` or a valid ``YYYY-MM-DD``; raises InputError otherwise."""
    if value in ("release", "latest"):
        return value
    if _DATE_RE.fullmatch(value or ""):
        try:
            dt.date.fromisoformat(value)
            return value
        except ValueError:
            pass
    raise InputError(f"{what} {value!r}: expected a date YYYY-MM-DD, 'release' or 'latest'")


def upload_date(target: Target, package: str, version: str) -> dt.date | None:
    """The day the first wheel of ``package`` ``version`` was uploaded to the target's index (PEP 700
    upload-time), or None when the index gives no upload time for it; raises OperationError when the index
    cannot be read."""
    wanted = Version(Version(version).public)  # 13.0.3 is 13.0.3.0 (PEP 440); a local label does not count
    times = []
    for file in project_files(target.index_secret, package, settings=index_settings(target.index_timeout)):
        try:
            same = is_wheel(file) and Version(parse_wheel(file.filename).version.public) == wanted
        except (InvalidVersion, OperationError):
            continue
        if same and file.upload_time:
            times.append(file.upload_time)
    return dt.date.fromisoformat(min(times)[:10]) if times else None


def release_upload_date(profile: Profile, target: Target, *, fallback: bool = False) -> dt.date | None:
    """The day the framework release's first file was uploaded to the target's index (PEP 700 upload-time); None
    with ``fallback`` when the index gives none.  Raises OperationError when the index gives no upload times or has
    no file of the release (without ``fallback``)."""
    package, version = profile.framework.package, profile.release.version
    day = upload_date(target, package, version)
    if day is None and not fallback:
        raise OperationError(f"--as-of release: {target.index} gives no upload time for {package} {version} "
                             "(PEP 700 JSON pages); pass --as-of DATE or latest, or set [lock] as_of")
    return day


def resolve_as_of(policy: str, profile: Profile, target: Target, grace_days: int, *,
                  fallback: bool = False) -> AsOf:
    """The date a lock of ``profile`` resolves as of under ``policy``; with ``fallback`` (the policy is the
    configuration's, not an explicit ``--as-of``) an index without upload times gives ``none`` (no cut-off).  Raises
    InputError for a bad policy, OperationError when ``release`` cannot read the release's upload date."""
    policy = check_policy(policy)
    if policy != "release":
        return AsOf(policy)
    uploaded = release_upload_date(profile, target, fallback=fallback)
    if uploaded is None:
        return AsOf("none", NO_TIMES)
    day = uploaded + dt.timedelta(days=grace_days)
    name = f"{profile.framework.package} {profile.release.version}"
    return AsOf(day.isoformat(), f"release: {name} uploaded {uploaded.isoformat()}, plus {grace_days} days")
