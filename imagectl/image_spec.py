"""What an image holds: one frozen value that the templates, the labels and the in-image check's expectations all
read, so the choice between a profile's own image and a team's extras layered on another image is made here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .lock.lockfile import Lock, LockedPackage, LockHeader, added_packages, canonical_name
from .lock.system import SystemLock
from .matrix.model import Profile
from .reference import Reference, apply_mirror


@dataclass(frozen=True)
class ImageSpec:
    """An image of ``profile``: on its own base (pinned to ``base_digest`` when known) or, for ``build --base``,
    a team's extras layered on ``user_base``; installing ``lock`` (None: the profile's pins alone, as ``validate``
    renders) and the extras' closure ``extras_lock`` on top; ``title`` names an image with extras (its repository
    name)."""

    profile: Profile
    base_digest: str | None = None
    lock: Lock | None = None
    extras: tuple[str, ...] = ()
    extras_lock: tuple[LockedPackage, ...] = ()
    user_base: Reference | None = None
    title: str | None = None
    base_source: Reference | None = None  # the team's copy of the base the build pulls (imagectl.bases), if any
    system_lock: SystemLock | None = None  # the exact OS packages the apt steps install (None: the archive's current)
    system_lock_file: str = ""  # its file name, as the Dockerfile's comments and errors name it

    @property
    def on_user_base(self) -> bool:
        """Whether the image layers extras on an image of the user's instead of building the profile."""
        return self.user_base is not None

    @property
    def public_base(self) -> Reference:
        """The base image as the user knows it (before mirrors and digests)."""
        return self.user_base or self.profile.base_image

    def pulled_base(self, mirrors: Mapping[str, str]) -> Reference:
        """The base image as the build pulls it: from the team's copy (``base_source``) or through the configured
        ``mirrors``, pinned to ``base_digest`` if known."""
        ref = self.base_source or apply_mirror(self.public_base, mirrors)
        return ref.with_digest(self.base_digest) if self.base_digest else ref

    @property
    def install_lock(self) -> Lock:
        """The lock whose packages the image installs: ``lock``, else a lock of the profile's pins alone, without
        hashes (what ``validate`` renders the templates with; a build always installs a real lock)."""
        return self.lock or placeholder_lock(self.profile)

    @property
    def added(self) -> dict[str, str]:
        """name -> version of every package the extras add to the lock."""
        return added_packages(self.extras_lock, self.install_lock)

    @property
    def locked(self) -> Lock | None:
        """The lock the image was installed from, as its labels record it: None without a real lock, and on a
        user's base (that image's own environment is not the lock)."""
        return None if self.on_user_base else self.lock

    @property
    def installed(self) -> Mapping[str, str]:
        """name -> version of every package the image pins (its constraints file): the installed lock's (not on
        a user's base) and the extras' closure."""
        mine = {} if self.on_user_base else self.install_lock.versions
        return {**mine, **{p.name: p.version for p in self.extras_lock}}


def placeholder_lock(profile: Profile) -> Lock:
    """A lock of ``profile``'s pins alone, without hashes (pure)."""
    header = LockHeader(profile.framework.name, profile.release.version, profile.framework.tag_of(profile.variant.cuda),
                        profile.python, "", "", "unlocked")
    return Lock(header, tuple(LockedPackage(canonical_name(n), v, ()) for n, v in profile.packages))
