"""Which bases the matrix uses, and where the team registry keeps each (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..config import Config
from ..matrix.model import CudaToolkit, Profile
from ..reference import Reference, apply_mirror, parse_reference

BASES_DIR = "bases"  # REGISTRY/NAMESPACE/bases/<upstream path>
PUBLIC_DOMAIN = "docker.io"  # its images keep their bare path under bases/; other registries' get their host first
DIGEST_TAG_SEP = "--"  # <tag>--<12 hex>: the tag that keeps one pinned digest reachable
MAX_TAG = 128


@dataclass(frozen=True)
class MatrixBase:
    """A base image the matrix uses: its public reference, the CUDA release it carries and the profiles on it."""

    public: Reference
    toolkit: CudaToolkit
    profiles: tuple[str, ...]

    @property
    def tag(self) -> str:
        """The upstream tag (``latest`` when the matrix names none)."""
        return self.public.tag or "latest"


def matrix_bases(profiles: Iterable[Profile]) -> list[MatrixBase]:
    """The distinct bases of ``profiles``, sorted by reference, each with the profiles built on it (pure)."""
    found: dict[str, tuple[Reference, CudaToolkit, list[str]]] = {}
    for profile in profiles:
        entry = found.setdefault(str(profile.base_image), (profile.base_image, profile.toolkit, []))
        entry[2].append(profile.name)
    return [MatrixBase(ref, toolkit, tuple(sorted(set(names)))) for _, (ref, toolkit, names) in sorted(found.items())]


def team_repository(public: Reference, registry_url: str, namespace: str) -> Reference:
    """The team copy of ``public`` (same tag, no digest): ``REGISTRY/NAMESPACE/bases/<path>`` for a Docker Hub
    image, ``.../bases/<host>/<path>`` for another registry's (a port's colon becomes ``-``).  Raises InputError if
    that is no valid reference."""
    path = public.path if public.domain == PUBLIC_DOMAIN else f"{public.domain.replace(':', '-')}/{public.path}"
    return parse_reference(f"{registry_url}/{namespace}/{BASES_DIR}/{path}:{public.tag or 'latest'}")


def team_copy(public: Reference, config: Config) -> Reference | None:
    """Where the team registry keeps ``public`` (:func:`team_repository`), or None without ``[registry] url``."""
    if not config.registry_url:
        return None
    return team_repository(public, config.registry_url, config.namespace)


def upstream(public: Reference, config: Config) -> Reference:
    """Where ``public`` is read from: through the configured ``[mirrors]``."""
    return apply_mirror(public, config.mirrors)


def public_of(pulled: Reference, mirrors: Mapping[str, str]) -> Reference:
    """The public reference a mirrored ``pulled`` stands for (the inverse of :func:`apply_mirror`); ``pulled`` itself
    when no mirror prefix matches (pure)."""
    for domain, prefix in mirrors.items():
        head = prefix.rstrip("/") + "/"
        if f"{pulled.domain}/{pulled.path}".startswith(head):
            rest = f"{pulled.domain}/{pulled.path}"[len(head):]
            return Reference(domain, rest, pulled.tag, pulled.digest)
    return pulled


def digest_tag(tag: str, digest: str) -> str | None:
    """``<tag>--<first 12 hex of digest>``: the tag that keeps a pinned digest reachable (and safe from a registry's
    garbage collection) after the team copy's tag moves on; None when it would be longer than a tag may be."""
    name = f"{tag}{DIGEST_TAG_SEP}{digest.partition(':')[2][:12]}"
    return name if len(name) <= MAX_TAG else None
