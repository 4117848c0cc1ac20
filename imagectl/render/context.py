"""The plain-dict context templates render from: every value validated, every collection sorted.

``render_context`` is pure: the profile, the configuration and a few build facts in, a dict out.  Nothing
user-controlled reaches a template without passing a grammar of :mod:`imagectl.grammar` (the matrix and
the configuration are checked when loaded; extras are checked here).
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import __version__
from ..config import Config
from ..matrix.model import Profile
from ..reference import Reference, apply_mirror
from ..grammar import check_requirement, check_url
from ..labels import labels_for

def index_url(profile: Profile, config: Config) -> str:
    """The pip index the profile installs from: the configured one, else the variant's default."""
    fw = profile.framework
    cuda_tag = fw.tag_of(profile.variant.cuda)
    if config.pip_index_url:
        return check_url(config.pip_index_url.replace("{cuda_tag}", cuda_tag), "pip.index_url")
    if profile.variant.pypi:
        return fw.pypi_index_url
    return fw.index_url.replace("{cuda_tag}", cuda_tag)


def base_reference(profile: Profile, config: Config, digest: str | None = None,
                   base: Reference | None = None) -> Reference:
    """The base image as the build pulls it (the profile's, or ``base`` given with ``build --base``):
    through the configured mirror, pinned to ``digest`` if known."""
    ref = apply_mirror(base or profile.base_image, config.mirrors)
    return ref.with_digest(digest) if digest else ref


def image_env(profile: Profile) -> dict[str, str]:
    """Environment variables users expect in the image (versions and the driver requirement)."""
    fw = profile.framework.name.upper().replace("-", "_")
    env = {
        "IMAGECTL_PROFILE": profile.name,
        f"{fw}_VERSION": profile.release.version,
        "IMAGECTL_CUDNN_VERSION": profile.variant.cudnn or "",
        "IMAGECTL_NCCL_VERSION": profile.variant.nccl or "",
        "NVIDIA_REQUIRE_CUDA": f"cuda>={profile.variant.cuda}",
    }
    return dict(sorted(env.items()))


def render_context(profile: Profile, config: Config, base_digest: str | None = None,
                   extras: Sequence[str] = (), base_image: Reference | None = None) -> dict[str, Any]:
    """The template context for ``profile`` (on ``base_image`` instead of the profile's own base, for
    ``build --base``); raises ValidationError for a bad extra requirement."""
    base = base_reference(profile, config, base_digest, base_image)
    return {
        "imagectl_version": __version__,
        "profile": {
            "name": profile.name,
            "framework": profile.framework.name,
            "check": profile.framework.check,
            "version": profile.release.version,
            "cuda": profile.variant.cuda,
            "cudnn": profile.variant.cudnn or "",
            "nccl": profile.variant.nccl or "",
            "python": profile.python,
            "flavor": profile.flavor,
            "os": profile.os.name,
        },
        "base_image": str(base),
        "python": profile.python,
        "apt_mirror": config.apt_mirror or "",
        "ca_bundle": config.ca_bundle is not None,
        "pip": {
            "index_url": index_url(profile, config),
            "extra_index_urls": sorted(config.pip_extra_index_urls),
            "trusted_hosts": sorted(config.pip_trusted_hosts),
        },
        "packages": [f"{name}=={version}" for name, version in profile.packages],
        "extras": sorted(check_requirement(e, "extra requirement") for e in extras),
        "labels": labels_for(profile, base, base_image),
        "env": image_env(profile),
    }
