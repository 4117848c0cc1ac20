"""``list``'s filters, and the notes that ``show`` and ``build`` print about a profile (an unverified build,
companions not released yet).  A profile's facts as data are :mod:`.facts`."""

from __future__ import annotations

from typing import Sequence

from ..grammar import release_numbers
from .model import Profile


def select_profiles(profiles: Sequence[Profile], cuda: str | None = None, python: str | None = None,  # noqa: PLR0913
                    flavor: str | None = None, newest: bool = False, platform: str | None = None) -> list[Profile]:
    """The profiles of ``list``'s filters (pure): ``cuda`` a CUDA version or its prefix (``12`` or ``12.1``),
    ``python`` the exact Python, ``flavor`` the exact flavour, ``newest`` only each framework's newest minor line
    (``list`` already shows each line's newest patch), ``platform`` only builds with CUDA wheels for that OCI
    platform (``linux/arm64``)."""
    profiles = [p for p in profiles if platform is None or platform in p.platforms]
    def same_prefix(version: str, prefix: str) -> bool:
        return version == prefix or version.startswith(prefix + ".")

    out = [p for p in profiles if (cuda is None or same_prefix(p.variant.cuda, cuda))
           and (python is None or p.python == python) and (flavor is None or p.flavor == flavor)]
    if newest:
        lines = {}
        for p in out:
            key = release_numbers(p.release.version)[:2]
            lines[p.framework.name] = max(lines.get(p.framework.name, key), key)
        out = [p for p in out if release_numbers(p.release.version)[:2] == lines[p.framework.name]]
    return out


def companion_note(profile: Profile) -> str | None:
    """``none released for torch 2.15 yet`` when the release pins none of the framework's companions (``yet``
    while it is the framework's newest release), ``no torchaudio release for torch 2.14`` when it pins only
    some; None when it pins them all (pure)."""
    fw, release = profile.framework, profile.release
    pinned = {name for name, _ in release.companions}
    missing = [name for name in fw.companions if name not in pinned]
    if not missing:
        return None
    if len(missing) == len(fw.companions):
        newest = fw.releases and fw.releases[0].version == release.version
        return f"none released for {fw.name} {release.minor}{' yet' if newest else ''} ({', '.join(missing)})"
    return f"no {', '.join(missing)} release for {fw.name} {release.minor}"


def profile_notes(profile: Profile) -> list[str]:
    """What ``show`` and ``build`` say about a profile besides its facts: that its build is unverified (and
    why), and which companions it lacks (pure)."""
    notes = []
    if not profile.verified:
        notes.append(f"unverified: {profile.variant.unverified}")
    companions = companion_note(profile)
    if companions:
        notes.append(f"companions: {companions}")
    return notes
