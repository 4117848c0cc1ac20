"""What the team registry holds of a base: its team copy's tag and the digest it pins (one request)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Config
from ..errors import ImagectlError
from ..reference import Reference
from ..registry.access import client_for
from .naming import team_copy


@dataclass(frozen=True)
class TeamPin:
    """The team copy of a base (``team``, tagged as upstream) and the digest its tag names (None: no copy; ``error``
    says why it could not be read)."""

    team: Reference
    pinned: str | None = None
    error: str = ""


def team_pin(public: Reference, config: Config) -> TeamPin | None:
    """The team copy of ``public`` and its pinned digest, or None without ``[registry] url``.  Raises nothing of
    imagectl's own: a registry that cannot be read is a TeamPin with its ``error``."""
    team = team_copy(public, config)
    if team is None:
        return None
    try:
        with client_for(team.domain, config.insecure_hosts, config.registry_timeout) as client:
            return TeamPin(team, client.head_manifest(team.path, team.tag or "latest"))
    except ImagectlError as exc:
        return TeamPin(team, None, str(exc))
