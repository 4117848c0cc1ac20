"""``imagectl sweep``: remove what builds killed on this host left behind (:mod:`imagectl.images.sweep`)."""

from __future__ import annotations

import click

from ..errors import EngineError
from ..images.sweep import Leftover, Swept, describe, sweep
from .app import echo_json, json_option, workspace
from .printable import printable, say


@click.command("sweep")
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@json_option
@click.pass_context
def cmd_sweep(ctx: click.Context, *, dry_run: bool, as_json: bool) -> int:
    """Remove what builds killed on this host left behind (kill -9, a crash): imagectl's working containers, staged
    layers no image uses, work folders, partial downloads and temporary folders of imagectl processes that are gone.
    Every build does this first; nothing of a running build is touched."""
    workspace(ctx).matrix  # noqa: B018 - as every command: a broken configuration or matrix is named first
    swept = sweep(_buildah(), dry_run=dry_run)
    if as_json:
        echo_json(sweep_json(swept))
    else:
        for line in sweep_lines(swept):
            click.echo(printable(line))
    for item, why in swept.failed:
        say(f"imagectl: sweep: {item.kind} {item.name}: {why}")
    return 1 if swept.failed else 0


def _buildah():  # noqa: ANN202 - LayoutEngine | None; imported here: the engine modules load on use
    from ..engine.select import layout_engine, make_engine

    try:
        return layout_engine(make_engine("buildah"))
    except EngineError:  # not installed: folders and files only
        return None


def sweep_lines(swept: Swept) -> list[str]:
    """One line per leftover (``would remove`` in a dry run), then a summary (pure)."""
    failed = {item for item, _ in swept.failed}
    verb = "would remove" if swept.dry_run else "removed"
    lines = [f"{'not removed' if item in failed else verb}  {item.kind}  {item.name}  (process {item.owner}, gone)"
             for item in swept.found]
    done = swept.found if swept.dry_run else swept.removed
    return [*lines, f"{verb}: {describe(done)}" + (f"; {len(swept.failed)} not removed" if swept.failed else "")]


def sweep_json(swept: Swept) -> dict[str, object]:
    """The sweep as JSON: each leftover with its kind, name, process and what happened to it (pure)."""
    failed = dict(swept.failed)
    removed = set(swept.removed)

    def entry(item: Leftover) -> dict[str, str]:
        status = "would remove" if swept.dry_run else "removed" if item in removed else "not removed"
        return {"kind": item.kind, "name": item.name, "process": item.owner, "status": status,
                **({"reason": failed[item]} if item in failed else {})}

    return {"dry_run": swept.dry_run, "leftovers": [entry(item) for item in swept.found],
            "removed": len(swept.removed), "failed": len(swept.failed)}
