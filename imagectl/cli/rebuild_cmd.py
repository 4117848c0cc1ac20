"""``imagectl rebuild NAME --compare``: build an image again from the inputs its labels record and say whether it
comes out bit for bit the same as the registry's (exit 0), or where it differs (exit 1)."""

from __future__ import annotations

import click

from ..engine.select import engine_for
from ..errors import InputError
from ..images.compare_image import format_comparison
from ..images.rebuild import RebuildResult, rebuild_and_compare
from .app import echo_json, json_option, profile_argument, workspace
from .printable import printable, say


@click.command("rebuild")
@profile_argument("name")
@click.option("--compare", is_flag=True,
              help="Compare the rebuilt image with the registry's (required: rebuild tags and pushes nothing).")
@json_option
@click.pass_context
def cmd_rebuild(ctx: click.Context, name: str, compare: bool, as_json: bool) -> int:
    """Rebuild NAME (a profile's image in the team registry, or an image reference) from its labels: the lock,
    base digest and imagectl version it was built with; with --compare, say ``reproduced sha256:...`` or name the
    first differing layer and its files (exit 1)."""
    if not compare:
        raise InputError("rebuild: give --compare (a rebuild is only compared with the registry's image; nothing is "
                         "tagged or pushed)")
    ws = workspace(ctx)
    secrets = ws.config.secret_values
    log = (lambda line: None) if as_json else (lambda line: say(line, secrets))
    result = rebuild_and_compare(name, ws.matrix, ws.config, engine_for(ws.config), log)
    if as_json:
        echo_json(rebuild_json(result))
    else:
        for line in format_comparison(result.comparison):
            click.echo(printable(line))
    return 0 if result.comparison.reproduced else 1


def rebuild_json(result: RebuildResult) -> dict[str, object]:
    """The ``--json`` document of a rebuild (pure)."""
    inputs = result.inputs
    return {
        "reference": result.reference, "engine": result.engine, "reproducible_engine": result.reproducible_engine,
        "inputs": {"profile": inputs.profile, "python": inputs.python, "lock_sha256": inputs.lock_sha256,
                   "base_digest": inputs.base_digest, "imagectl_version": inputs.version,
                   "build_key": inputs.build_key, "engine": inputs.engine},
        "lock_from": result.lock_from, **result.comparison.as_json(),
    }
