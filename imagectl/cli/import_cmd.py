"""``imagectl import``: a team's own image under a profile's naming scheme, checked (it loads the importer, which a
rollback does not need)."""

from __future__ import annotations

import click

from ..engine.select import engine_for
from ..images.importer import ImportEnvironment, ImportOptions, import_image
from ..tags.managed import resolve_managed
from .app import echo_json, json_option, workspace
from .import_views import format_import, import_json
from .printable import say


@click.command("import")
@click.argument("ref")
@click.option("--name", "name", required=True, metavar="PROFILE",
              help="The profile (or PROFILE-SUFFIX repository) to import into.")
@click.option("--strict", is_flag=True, help="Fail (exit 1, nothing copied) when the image disagrees with the profile.")
@click.option("--set-latest", is_flag=True, help="Move the moving tag to the import even when it exists.")
@click.option("--no-check", "no_check", is_flag=True,
              help="Do not run the in-image check (no engine needed between registries).")
@json_option
@click.pass_context
def cmd_import(ctx: click.Context, *, ref: str, name: str, strict: bool,  # noqa: PLR0913 - click, one per option
               set_latest: bool, no_check: bool, as_json: bool) -> None:
    """Import a team's own image REF (a registry's, or the local engine's) under NAME's naming scheme."""
    ws = workspace(ctx)
    managed = resolve_managed(name, ws.matrix, ws.config)
    options = ImportOptions(strict=strict, set_latest=set_latest, check=not no_check)
    result = import_image(ref, managed, options, ImportEnvironment(ws.matrix, ws.config, engine_for(ws.config), say))
    if as_json:
        echo_json(import_json(result))
        return
    click.echo(format_import(result))
    for note in result.notes:
        say(f"warning: {note}", ws.config.secret_values)
