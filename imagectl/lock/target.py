"""What a lock is resolved for: the profile's inputs, its Python, the platform and its indexes.

A lock belongs to a framework release, CUDA build and Python: every flavour and OS of that build shares it,
so the platform is the oldest glibc any of them has, on the image's CPU (x86_64 for linux/amd64, aarch64 for
linux/arm64).  ``manylinux_2_28`` (glibc 2.28) is below every OS of
the shipped matrix (Ubuntu 20.04 has glibc 2.31, 22.04 2.35, 24.04 2.39), and every CUDA wheel of torch
and JAX is tagged at or below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..matrix.model import Profile
from ..pip_index import extra_index_urls, index_url, index_url_with_credentials
from ..errors import InputError
from .lockfile import DEFAULT_PLATFORM, RESOLVER_PLATFORMS, lock_id

PLATFORM = RESOLVER_PLATFORMS[DEFAULT_PLATFORM]  # x86_64-manylinux_2_28


@dataclass(frozen=True)
class Target:
    """Where and for what a resolution runs.  ``index_secret`` and ``extra_secret`` keep credentials (they go
    to the resolver's environment, never to output); ``index`` is the same URL without them."""

    python: str
    index: str
    index_secret: str
    extra_indexes: tuple[str, ...] = ()
    extra_secret: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    ca_bundle: Path | None = None
    platform: str = PLATFORM
    index_timeout: float | None = None  # the [pip] timeout of imagectl's own index reads (upload dates)
    # per-package cut-offs past the resolution's as-of date ("setuptools=2022-11-04"): a security floor's release
    exclude_newer_packages: tuple[str, ...] = ()


def check_platform(profile: Profile, platform: str) -> str:
    """``platform`` when ``profile``'s build has CUDA wheels for it (:attr:`Profile.platforms`); raises InputError
    saying which platforms it has, and what its index offers for that one, otherwise."""
    if platform in profile.platforms and platform in RESOLVER_PLATFORMS:
        return platform
    why = dict(profile.variant.platform_sources).get(platform)
    raise InputError(f"{profile.name} has no CUDA wheels for {platform} on its index (its platforms: "
                     f"{', '.join(profile.platforms)}){': ' + why if why else ''}")


def target_for(profile: Profile, config: Config, platform: str = DEFAULT_PLATFORM) -> Target:
    """The resolution target of ``profile`` under ``config`` (its pip indexes) for the OCI ``platform``; raises
    ValidationError for a bad configured index URL, InputError for a platform the build has no CUDA wheels for."""
    return Target(python=profile.python, index=index_url(profile, config),
                  index_secret=index_url_with_credentials(profile, config),
                  extra_indexes=tuple(extra_index_urls(config)), extra_secret=tuple(config.pip_extra_index_urls),
                  trusted_hosts=tuple(config.pip_trusted_hosts), ca_bundle=config.ca_bundle,
                  platform=RESOLVER_PLATFORMS[check_platform(profile, platform)], index_timeout=config.pip_timeout)


def build_tag(profile: Profile) -> str:
    """The CUDA build's tag in the framework's spelling (``cu121``, ``cuda12``)."""
    return profile.framework.tag_of(profile.variant.cuda)


def profile_lock_id(profile: Profile, platform: str = DEFAULT_PLATFORM) -> str:
    """``torch-2.3.1-cu121-py3.11``: the lock ``profile`` installs on ``platform`` (shared by its flavours and OSes;
    ``...-py3.12-aarch64`` on linux/arm64)."""
    return lock_id(profile.framework.name, profile.release.version, build_tag(profile), profile.python, platform)


def lock_inputs(profile: Profile, platform: str = DEFAULT_PLATFORM) -> tuple[str, ...]:
    """What the resolver is asked for: the framework, its companions and the variant's pins for the profile's
    Python, each ``==`` its version, with the extras the framework's ``pin_extras`` names
    (``jax-cuda12-plugin[with-cuda]``); then the framework's ``lock_requires`` as written (torch: ``numpy``).
    ``platform``'s own pins where its wheels pin other versions (:meth:`Profile.packages_for`)."""
    extras = dict(profile.framework.pin_extras)
    out = []
    for name, version in profile.packages_for(platform):
        wanted = extras.get(name)
        out.append(f"{name}[{','.join(wanted)}]=={version}" if wanted else f"{name}=={version}")
    return (*out, *profile.framework.lock_requires)
