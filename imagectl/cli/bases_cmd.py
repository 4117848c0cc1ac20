"""``imagectl bases``: the team's custody of the base images (``sync``) and what upstream did to them (``status``)."""

from __future__ import annotations

import click

from ..bases.naming import MatrixBase, matrix_bases
from ..bases.status import BaseStatus, bases_status
from ..bases.sync import NO_REGISTRY, SyncResult, sync_bases
from ..config import Config
from ..errors import InputError
from ..matrix.model import Profile
from ..matrix.names import resolvable_profiles
from ..tags.naming import short_digest
from .app import echo_json, json_option, profile_argument, workspace
from .printable import say
from .table import format_table
from .workspace import Workspace

SYNC_COLUMNS = ("base", "action", "digest", "platforms", "referrers", "team_copy")
STATUS_COLUMNS = ("base", "team_copy", "pinned", "upstream", "end_of_life", "profiles")


def _bases(ws: Workspace, names: tuple[str, ...]) -> list[MatrixBase]:
    """The bases of the profiles ``names``, or of every profile a name resolves to; raises UnknownProfileError."""
    profiles = [ws.profile(name) for name in names] if names else resolvable_profiles(ws.matrix)
    return matrix_bases(profiles)


@click.group("bases")
def cmd_bases() -> None:
    """Keep the matrix's base images in the team registry, by digest (sync), and see what upstream did (status)."""


@cmd_bases.command("sync")
@profile_argument("names", nargs=-1)
@json_option
@click.pass_context
def cmd_sync(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> int:
    """Copy the base images of the profiles NAMES (default: every base the matrix uses) into the team registry, at
    REGISTRY/NAMESPACE/bases/<upstream path>:<upstream tag>, by digest, every platform and referrer."""
    ws = workspace(ctx)
    if not ws.config.registry_url:
        raise InputError(NO_REGISTRY)
    results = sync_bases(_bases(ws, names), ws.config)
    if as_json:
        echo_json([r.as_dict() for r in results])
    else:
        click.echo(format_table([_sync_row(r) for r in results], SYNC_COLUMNS))
    for r in results:
        if r.previous:
            say(f"note: {r.base}: the team copy moved from {short_digest(r.previous)} to {short_digest(r.digest)} "
                f"(the earlier one stays under its digest tag)")
        if r.action == "gone":
            say(f"warning: {r.base} is gone upstream; the team copy keeps {short_digest(r.digest)}")
        for note in r.notes:
            say(f"note: {r.base}: {note}", ws.config.secret_values)
    failed: dict[str, list[str]] = {}  # error -> the bases it stopped: one line each (a registry down stops them all)
    for r in results:
        if r.error:
            failed.setdefault(r.error, []).append(r.base)
    for error, bases in failed.items():
        more = f" (and {len(bases) - 1} more bases)" if len(bases) > 1 else ""
        say(f"imagectl: {bases[0]}{more}: {error}", ws.config.secret_values)
    return 1 if any(r.action == "failed" for r in results) else 0


def _sync_row(r: SyncResult) -> dict[str, object]:
    return {"base": r.base, "action": r.action, "digest": short_digest(r.digest or None),
            "platforms": ",".join(r.platforms) or ("single" if r.digest else "-"), "referrers": r.referrers,
            "team_copy": r.team_copy}


@cmd_bases.command("status")
@profile_argument("names", nargs=-1)
@json_option
@click.pass_context
def cmd_status(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> int:
    """For the bases of the profiles NAMES (default: every base the matrix uses): whether the team copy holds the
    pinned digest, whether the upstream tag moved or is gone, and whether the CUDA release is past end of life.
    Exit status 1 when a registry could not be read."""
    ws = workspace(ctx)
    found = bases_status(_bases(ws, names), ws.config)
    if as_json:
        echo_json([s.as_dict() for s in found])
    else:
        click.echo(format_table([_status_row(s) for s in found], STATUS_COLUMNS))
    _say_errors(found, ws.config.secret_values)
    return 1 if any(s.errors for s in found) else 0


def _say_errors(found: list[BaseStatus], secrets: tuple[str, ...]) -> None:
    """Each distinct error once, with the base it came from (and how many more share it)."""
    seen: dict[str, tuple[list[str], list[str]]] = {}  # error -> (bases, parts: team copy, upstream)
    for s in found:
        for error in s.errors:
            part, _, message = error.partition(": ")
            bases, parts = seen.setdefault(message, ([], []))
            for items, item in ((bases, s.base.public.familiar), (parts, part)):
                if item not in items:
                    items.append(item)
    for message, (bases, parts) in seen.items():
        more = f" (and {len(bases) - 1} more bases)" if len(bases) > 1 else ""
        say(f"imagectl: {bases[0]}{more}: {' and '.join(parts)}: {message}", secrets)


def upstream_warnings(found: list[BaseStatus]) -> list[str]:
    """One warning line per base that moved or is gone upstream, and one per distinct error of the upstream
    registries that could not be asked (pure)."""
    what = {"moved": "moved upstream (a rebuild with fixes: 'imagectl bases sync' takes it)",
            "gone": "is gone upstream"}
    out: list[str] = []
    unasked: dict[str, list[str]] = {}
    for s in found:
        if s.upstream in what:
            held = f"; the team copy pins {short_digest(s.pinned)}" if s.pinned else "; the team holds no copy"
            out.append(f"warning: base {s.base.public.familiar} {what[s.upstream]} ({len(s.base.profiles)} profiles"
                       f"{held}); see 'imagectl bases status'")
        for error in s.errors if s.upstream == "unreachable" else ():
            unasked.setdefault(error.partition(": ")[2], []).append(s.base.public.familiar)
    for error, bases in unasked.items():
        more = f" and {len(bases) - 1} more" if len(bases) > 1 else ""
        out.append(f"warning: could not ask upstream about base {bases[0]}{more}: {error}")
    return out


def warn_upstream(profiles: list[Profile], config: Config) -> None:
    """``list --upstream``: :func:`upstream_warnings` of the bases of ``profiles`` on stderr (never failing)."""
    for line in upstream_warnings(bases_status(matrix_bases(profiles), config)):
        say(line, config.secret_values)


def _status_row(s: BaseStatus) -> dict[str, object]:
    eol = s.eol.as_dict()
    return {"base": s.base.public.familiar, "team_copy": s.team_state, "pinned": short_digest(s.pinned),
            "upstream": s.upstream, "end_of_life": f"EOL since {eol['since']}" if s.eol.status == "eol" else "no",
            "profiles": len(s.base.profiles)}
