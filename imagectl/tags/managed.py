"""Which repository a tag command works on, and the tag store for it.

A NAME is a profile name (``torch-2.3-cu121``, any spelling ``resolve_profile`` accepts) or a profile name with
a repository suffix (``torch-2.3-cu121-nlp``, as ``build --suffix`` names a team's variant).  Its repository
is ``[REGISTRY/]NAMESPACE/NAME`` with the profile's canonical name (see :mod:`.naming`).

The tags live in the configured registry; with no registry configured they are the local engine's.  Opening a
registry store needs no engine: ``history``, ``rollback``, ``promote`` and ``prune`` against a registry, given a
:class:`imagectl.engine.select.LazyEngine`, never import the Docker SDK.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Config
from ..engine import Engine
from ..errors import UnknownProfileError
from ..grammar import check_token
from ..matrix.model import Matrix, Profile
from ..matrix.names import resolve_profile
from ..reference import Reference
from .naming import repository
from .store import EngineTagStore, RegistryTagStore, TagStore


@dataclass(frozen=True)
class ManagedRepository:
    """The repository of NAME: its profile, its repository name (profile name + optional suffix) and reference."""

    profile: Profile
    name: str
    reference: Reference


def resolve_managed(name: str, matrix: Matrix, config: Config) -> ManagedRepository:
    """The managed repository NAME stands for.

    Raises UnknownProfileError (with the closest names) when NAME is neither a profile name nor a profile name
    followed by ``-SUFFIX``; ValidationError for a repository name the reference grammar refuses.
    """
    try:
        profile = resolve_profile(name, matrix)
        return ManagedRepository(profile, profile.name, repository(profile.name, config))
    except UnknownProfileError as error:
        head, sep, suffix = name.rpartition("-")
        if not sep or not head:
            raise
        try:
            profile = resolve_profile(head, matrix)
        except UnknownProfileError:
            raise error from None
        repo_name = f"{profile.name}-{check_token(suffix, 'repository suffix')}"
        return ManagedRepository(profile, repo_name, repository(repo_name, config))


def open_tag_store(repo: Reference, config: Config, engine: Engine) -> TagStore:
    """The registry's store when a registry is configured, else the local engine's (only then is ``engine``
    used: pass a LazyEngine to connect to none before that).  Raises InputError for a registry timeout that is no
    positive number; the store's calls raise RegistryError/EngineError."""
    if config.registry_url:
        from ..registry.access import client_for  # here: the registry package loads requests

        return RegistryTagStore(client_for(repo.domain, config.insecure_hosts, config.registry_timeout), repo)
    return EngineTagStore(engine, repo)
