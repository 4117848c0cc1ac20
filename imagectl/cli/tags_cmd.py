"""Commands over a profile's tags: history, rollback, promote, prune (``import`` is :mod:`.import_cmd`).

With a registry configured they work on the registry alone (no Docker SDK is loaded, except by a
``rollback``/``promote`` that finds a stale local copy of the moved tag to re-tag or remove, see
:mod:`imagectl.images.local_tag`); without one, on the local engine's tags.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import click

from ..config import MAX_MIN_AGE_DAYS
from ..engine.select import engine_for
from ..images.local_tag import follow_locally
from ..tags.history import DEFAULT_LIMIT, read_history
from ..tags.managed import ManagedRepository, open_tag_store, resolve_managed
from ..tags.moves import MoveResult, promote, rollback
from ..tags.naming import check_channel, check_source
from ..tags.prune import execute_prune, plan_for_store
from ..tags.store import TagStore
from .app import echo_json, json_option, profile_argument, workspace
from .printable import printable, say
from .tag_views import (
    describe_hidden,
    describe_move,
    format_history,
    format_moves,
    format_plan,
    history_json,
    move_json,
    moves_json,
    plan_json,
    prune_json,
)


def _open(ctx: click.Context, name: str) -> tuple[ManagedRepository, TagStore]:
    """(the managed repository NAME stands for, its tag store: without a registry, the local engine's, connected
    on first use)."""
    ws = workspace(ctx)
    managed = resolve_managed(name, ws.matrix, ws.config)
    return managed, open_tag_store(managed.reference, ws.config, engine_for(ws.config))


def _stderr(line: str) -> None:
    """A line on stderr (:func:`~.printable.say`: it may quote a registry's record or answer)."""
    say(line)


@click.command("history")
@profile_argument("name")
@click.option("--moves", "only_moves", is_flag=True,
              help="Only the log of moves (rollbacks, promotions, builds, imports).")
@click.option("--limit", type=click.IntRange(min=0), default=DEFAULT_LIMIT, show_default=True, metavar="N",
              help="The newest N images, N channels and N moves; 0 shows all (one read per tag).")
@json_option
@click.pass_context
def cmd_history(ctx: click.Context, *, name: str, only_moves: bool, limit: int, as_json: bool) -> None:
    """The immutable images of NAME (newest first), where its moving tag and channels point, and their past
    moves."""
    _, store = _open(ctx, name)
    history = read_history(store, limit or None)
    if as_json:
        echo_json(moves_json(history) if only_moves else history_json(history))
    else:
        click.echo(format_moves(history) if only_moves else format_history(history))
    for problem in history.problems:
        _stderr(f"warning: {problem}")
    hidden = describe_hidden(history, limit, only_moves=only_moves)
    if hidden:
        _stderr(f"note: {hidden}")


@click.command("rollback")
@profile_argument("name")
@click.option("--to", "to", metavar="TAG|DIGEST",
              help="An immutable tag of NAME, or a digest one points to (default: the previous image).")
@json_option
@click.pass_context
def cmd_rollback(ctx: click.Context, *, name: str, to: str | None, as_json: bool) -> None:
    """Point NAME's moving tag at the previous (or the named) image: one manifest read and one write."""
    if to:
        check_source(to, "--to")
    managed, store = _open(ctx, name)
    result = _follow_locally(ctx, managed, rollback(store, to))
    _report_move(result, managed.reference.familiar, as_json=as_json)


@click.command("promote")
@profile_argument("name")
@click.option("--channel", required=True, metavar="NAME", help="The channel to move (stable, canary, ...).")
@click.option("--from", "source", default="latest", show_default=True, metavar="TAG",
              help="An immutable tag, a digest, latest (where the moving tag points now) or another channel.")
@json_option
@click.pass_context
def cmd_promote(ctx: click.Context, *, name: str, channel: str, source: str, as_json: bool) -> None:
    """Point a channel of NAME (stable, canary, ...) at an image; teams pin NAME:stable while builds go on."""
    check_channel(channel)
    check_source(source)
    managed, store = _open(ctx, name)
    result = _follow_locally(ctx, managed, promote(store, channel, source))
    _report_move(result, managed.reference.familiar, as_json=as_json)


def _follow_locally(ctx: click.Context, managed: ManagedRepository, result: MoveResult) -> MoveResult:
    """``result`` with a note when this machine's local copy of the moved tag was re-tagged or removed
    (registry mode only: without a registry the engine's own tag is the one that moved)."""
    ws = workspace(ctx)
    if not ws.config.registry_url:
        return result
    note = follow_locally(managed.reference, result.tag, result.target, engine_for(ws.config))
    return replace(result, note="; ".join(filter(None, [result.note, note]))) if note else result


def _report_move(result: MoveResult, repository: str, *, as_json: bool) -> None:
    if as_json:
        echo_json(move_json(result, repository))
    else:
        click.echo(printable(describe_move(result, repository)))


@click.command("prune")
@profile_argument("name")
@click.option("--keep", required=True, type=click.IntRange(min=0), metavar="N",
              help="Keep the newest N immutable tags.")
@click.option("--min-age-days", type=click.IntRange(min=0, max=MAX_MIN_AGE_DAYS), metavar="DAYS",
              help="Never delete a younger tag (default: [tags] prune_min_age_days, 7).")
@click.option("--dry-run", is_flag=True, help="Print the plan, delete nothing.")
@json_option
@click.pass_context
def cmd_prune(ctx: click.Context, *, name: str, keep: int,  # noqa: PLR0913 - click, one per option
              min_age_days: int | None, dry_run: bool, as_json: bool) -> int:
    """Delete NAME's immutable tags beyond the newest N; never one a moving tag or channel points to."""
    ws = workspace(ctx)
    _, store = _open(ctx, name)
    days = ws.config.prune_min_age_days if min_age_days is None else min_age_days
    plan = plan_for_store(store, keep, timedelta(days=days), datetime.now(timezone.utc))
    if dry_run:
        echo_json(plan_json(plan, dry_run=True)) if as_json else click.echo(format_plan(plan, dry_run=True))
        return 0
    if not as_json:
        click.echo(format_plan(plan, dry_run=False))
    report = execute_prune(store, plan, _stderr if not as_json else (lambda line: None))
    if as_json:
        echo_json(prune_json(plan, report))
    else:
        kept = sum(not d.delete for d in plan if d.tag) + len(report.skipped)
        children = f", {len(report.deleted_children)} index children deleted" if report.deleted_children else ""
        click.echo(f"deleted {len(report.deleted)}, kept {kept}, failed {len(report.failed)}{children}")
    for tag, error in report.failed:
        _stderr(f"imagectl: prune {tag}: {error}")
    return 1 if report.failed else 0
