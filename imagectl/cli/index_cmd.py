"""``imagectl index NAME --platforms P1,P2``: assemble the OCI image index of the per-platform images the CI
fan-out's build jobs pushed (``imagectl build NAME --platform P --push``), under the profile's tags."""

from __future__ import annotations

import click

from ..engine.select import engine_for
from ..errors import InputError
from ..images.index_assembly import assemble_index
from ..images.plan import BuildRequest
from ..images.platforms import offered_platforms, parse_platforms
from .app import echo_json, json_option, profile_argument, python_option, workspace
from .printable import printable, say


@click.command("index")
@profile_argument("name")
@click.option("--platforms", "platform_list", required=True, metavar="P1,P2",
              help="The platforms whose images the index names, comma-separated (as `imagectl matrix` gives them).")
@python_option
@json_option
@click.pass_context
def cmd_index(ctx: click.Context, name: str, platform_list: str, python: str | None, as_json: bool) -> int:
    """Put the image index of NAME's checked per-platform images (each built with --platform P --push) under its
    immutable tag and move the moving tag onto it: every platform at once."""
    ws = workspace(ctx)
    if not ws.config.registry_url:
        raise InputError("index: no registry configured ([registry] url or IMAGECTL_REGISTRY_URL)")
    profile = ws.profile(name, python)
    platforms = offered_platforms(profile, parse_platforms(platform_list, "--platforms"), "--platforms")
    secrets = ws.config.secret_values
    log = (lambda line: None) if as_json else (lambda line: say(line, secrets))
    result = assemble_index(BuildRequest(profile, platforms=platforms), ws.config, engine_for(ws.config), log)
    if as_json:
        echo_json(result.as_dict())
        return 0
    for note in result.notes:
        say(f"note: {note}", secrets)
    click.echo(printable(f"{result.profile}  {result.status}  {result.tag}  {result.digest[:19]}  "
                         f"{','.join(c.platform for c in result.children)}"))
    return 0
