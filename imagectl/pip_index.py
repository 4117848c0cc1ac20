"""The pip indexes of a profile: the one place that says which index a profile installs (and locks) from.

``[pip] index_url`` (with ``{cuda_tag}`` filled in) wins over the matrix; else a ``pypi = true`` variant uses
the framework's PyPI index and any other variant the framework's CUDA index.  URLs may carry credentials
(``https://user:token@host/simple``): :func:`index_url` and :func:`extra_index_urls` give them without, safe
to print, render and label; :func:`configured_index` keeps them, for the resolver and the netrc only.
"""

from __future__ import annotations

from .config import Config
from .grammar import check_url, split_userinfo
from .matrix.model import Profile


def configured_index(profile: Profile, config: Config) -> str | None:
    """The configured index URL for ``profile`` as written (credentials included), or None; raises
    ValidationError for a bad URL."""
    if not config.pip_index_url:
        return None
    cuda_tag = profile.framework.tag_of(profile.variant.cuda)
    return check_url(config.pip_index_url.replace("{cuda_tag}", cuda_tag), "pip.index_url", credentials=True)


def index_url(profile: Profile, config: Config) -> str:
    """The pip index the profile installs from, without credentials: the configured one, else the variant's
    default.  Raises ValidationError for a bad configured URL."""
    fw = profile.framework
    configured = configured_index(profile, config)
    if configured:
        return split_userinfo(configured)[0]
    if profile.variant.pypi:
        return fw.pypi_index_url
    return fw.index_url.replace("{cuda_tag}", fw.tag_of(profile.variant.cuda))


def index_url_with_credentials(profile: Profile, config: Config) -> str:
    """:func:`index_url` with the configured credentials kept (never print it)."""
    return configured_index(profile, config) or index_url(profile, config)


def extra_index_urls(config: Config) -> list[str]:
    """The configured extra index URLs without credentials, sorted."""
    return sorted(split_userinfo(url)[0] for url in config.pip_extra_index_urls)
