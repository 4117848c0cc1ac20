"""``imagectl bases status``: for each base, whether the team copy holds its pinned digest, whether the upstream tag
has moved or is gone, and whether its CUDA release is past end of life (:mod:`.eol`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config import Config
from ..errors import ImagectlError, NotFoundError
from ..reference import Reference
from ..registry.client import RegistryClient
from .clients import HostClients
from .eol import EndOfLife, end_of_life
from .naming import MatrixBase, team_copy, upstream

# current: upstream names the pinned digest; moved: another one (a rebuild with fixes); gone: no such tag any more;
# unpinned: the team holds no copy to compare with; unreachable: upstream could not be asked (``error``)
UpstreamState = Literal["current", "moved", "gone", "unpinned", "unreachable"]
# held: the team copy's tag and all it names are there; incomplete: the tag is, a child manifest is not; missing: no
# team copy; unknown: the team registry could not be read; no-registry: no [registry] url to keep copies in
TeamState = Literal["held", "incomplete", "missing", "unknown", "no-registry"]


@dataclass(frozen=True)
class BaseStatus:
    """One base: its team copy (None without ``[registry] url``), the digest it pins and whether the team registry
    holds all of it (the manifest and, of an index, every child), what upstream names now, and its end of life."""

    base: MatrixBase
    team_copy: str | None
    pinned: str | None
    held: bool
    upstream_digest: str | None
    upstream: UpstreamState
    eol: EndOfLife
    errors: tuple[str, ...] = ()

    @property
    def team_state(self) -> TeamState:
        """What the team registry holds of the base (see :func:`team_state`)."""
        unread = any(error.startswith("team copy:") for error in self.errors)
        return team_state(configured=self.team_copy is not None, readable=not unread, pinned=self.pinned,
                          held=self.held)

    def as_dict(self) -> dict[str, object]:
        """The JSON shape (see docs/custody.md, ``bases status``)."""
        return {"base": self.base.public.familiar, "team_copy": self.team_copy, "team_state": self.team_state,
                "pinned": self.pinned, "held": self.held, "upstream_digest": self.upstream_digest,
                "upstream": self.upstream, "end_of_life": self.eol.as_dict(), "profiles": list(self.base.profiles),
                "errors": list(self.errors)}


def team_state(*, configured: bool, readable: bool, pinned: str | None, held: bool) -> TeamState:
    """What the team registry holds of a base: ``configured`` whether there is a team registry, ``readable``
    whether it answered, ``pinned`` the digest its copy's tag names, ``held`` whether all of that is there (pure)."""
    if not configured:
        return "no-registry"
    if not readable:
        return "unknown"
    if pinned is None:
        return "missing"
    return "held" if held else "incomplete"


def upstream_state(pinned: str | None, now: str | None, *, reachable: bool = True) -> UpstreamState:
    """What upstream's tag says beside the team's pin (pure)."""
    if not reachable:
        return "unreachable"
    if now is None:
        return "gone"
    if pinned is None:
        return "unpinned"
    return "current" if now == pinned else "moved"


def holds_all(client: RegistryClient, repository: str, digest: str) -> bool:
    """Whether ``repository`` holds manifest ``digest`` and, of an index, every child manifest.  Raises AuthError
    if refused, RegistryError otherwise."""
    try:
        manifest = client.get_manifest(repository, digest)
    except NotFoundError:
        return False
    return all(client.head_manifest(repository, child.digest) == child.digest for child in manifest.children())


def base_status(base: MatrixBase, config: Config, clients: HostClients) -> BaseStatus:
    """The status of ``base`` (one request upstream, two or more at the team registry); raises nothing of
    imagectl's own: what could not be read is in ``errors``."""
    errors: list[str] = []
    team = team_copy(base.public, config)
    pinned = _pinned(team, clients, errors) if team else None
    held = bool(team and pinned and _held(team, pinned, clients, errors))
    ref = upstream(base.public, config)
    try:
        now, reachable = clients.ask(ref.domain, lambda c: c.head_manifest(ref.path, base.tag)), True
    except ImagectlError as exc:
        errors.append(f"upstream: {exc}")
        now, reachable = None, False
    return BaseStatus(base, str(team) if team else None, pinned, held, now,
                      upstream_state(pinned, now, reachable=reachable), end_of_life(base.toolkit), tuple(errors))


def _pinned(team: Reference, clients: HostClients, errors: list[str]) -> str | None:
    try:
        return clients.ask(team.domain, lambda c: c.head_manifest(team.path, team.tag or "latest"))
    except ImagectlError as exc:
        errors.append(f"team copy: {exc}")
        return None


def _held(team: Reference, pinned: str, clients: HostClients, errors: list[str]) -> bool:
    try:
        return clients.ask(team.domain, lambda c: holds_all(c, team.path, pinned))
    except ImagectlError as exc:
        errors.append(f"team copy: {exc}")
        return False


def bases_status(bases: list[MatrixBase], config: Config) -> list[BaseStatus]:
    """:func:`base_status` of each base, in order, one client per registry host."""
    with HostClients(config) as clients:
        return [base_status(base, config, clients) for base in bases]
