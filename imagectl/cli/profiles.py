"""The profiles of the matrix: list and show."""

from __future__ import annotations

import click

from ..errors import InputError
from ..grammar import check_python, check_token, check_version
from ..matrix.listing import select_profiles
from ..matrix.names import list_profiles
from ..advisories.locks import profile_findings, worst_first
from ..advisories.snapshot import known_advisories
from ..matrix.platforms import platform_name
from .app import check_framework, echo_json, framework_option, json_option, profile_argument, python_option, workspace
from .printable import say
from .table import format_table
from .views import LIST_COLUMNS, describe_profile, list_row_with_lock, list_table_row, show_text
from .advisory_views import advisory_cell, finding_rows, show_advisories, show_advisory_lines

python_option_filter = click.option("--python", metavar="X.Y", help="Only profiles with this Python.")


@click.command("list")
@framework_option
@click.option("--cuda", metavar="X[.Y]", help="Only CUDA builds of this version (12 or 12.1).")
@python_option_filter
@click.option("--flavor", metavar="NAME", help="Only this flavour (base, runtime, devel).")
@click.option("--platform", metavar="OS/ARCH", help="Only builds with CUDA wheels for this platform (linux/arm64, "
                                                   "linux/amd64).")
@click.option("--newest", is_flag=True, help="Only each framework's newest minor line (each line shows its newest "
                                             "patch anyway).")
@click.option("--upstream", is_flag=True, help="Also ask the registries whether the listed profiles' bases moved "
                                               "or are gone upstream (a request or two per base; warnings only).")
@json_option
@click.pass_context
def cmd_list(ctx: click.Context, framework: str | None, cuda: str | None, python: str | None,  # noqa: PLR0913
             flavor: str | None, platform: str | None, newest: bool, upstream: bool,  # (one per option)
             as_json: bool) -> None:
    """List the profiles of the matrix (each minor line's newest patch), optionally filtered."""
    ws = workspace(ctx)
    cuda = cuda if cuda is None else check_version(cuda, "--cuda")
    python = python if python is None else check_python(python, "--python")
    flavor = flavor if flavor is None else check_token(flavor, "--flavor")
    if flavor is not None and flavor not in ws.matrix.base.flavors:
        raise InputError(f"--flavor {flavor!r}: not a flavour of the matrix ({', '.join(ws.matrix.base.flavors)})")
    platform = platform if platform is None else platform_name(platform)
    profiles = select_profiles(list_profiles(ws.matrix, check_framework(ws, framework)), cuda, python, flavor, newest,
                               platform)
    known = known_advisories(ws.config)
    found = [worst_first(profile_findings(p, ws.config, known), p.framework.package) for p in profiles]
    rows = [{**list_row_with_lock(p, ws.config, ws.matrix), "advisories": finding_rows(f)}
            for p, f in zip(profiles, found, strict=True)]
    columns = (*LIST_COLUMNS[:-1], "advisories", LIST_COLUMNS[-1])  # the lock column stays the last
    table = [{**list_table_row(r), "advisories": advisory_cell(f, p.framework.package)}
             for r, p, f in zip(rows, profiles, found, strict=True)]
    echo_json(rows) if as_json else click.echo(format_table(table, columns))
    past = sorted({r["cuda"] for r in rows if r["end_of_life"]}, key=lambda v: [int(x) for x in v.split(".")])
    if past:  # from the matrix's data alone: list asks no registry (bases status does)
        say(f"warning: {sum(1 for r in rows if r['end_of_life'])} profiles are on bases past end of life (CUDA "
            f"{', '.join(past)}); see 'imagectl bases status'")
    if upstream:  # registry requests: only when asked (imported here so that a plain list needs no HTTP client)
        from .bases_cmd import warn_upstream

        warn_upstream(profiles, ws.config)


@click.command("show")
@profile_argument("name")
@python_option
@json_option
@click.pass_context
def cmd_show(ctx: click.Context, name: str, python: str | None, as_json: bool) -> None:
    """Show the resolved profile NAME (e.g. torch-2.3-cu121)."""
    ws = workspace(ctx)
    python = python and check_python(python, "--python")
    profile = ws.profile(name, python)
    info = {**describe_profile(profile, ws.config, ws.matrix),
            **show_advisories(profile, ws.config, known_advisories(ws.config), list_profiles(ws.matrix))}
    if as_json:
        echo_json(info)
        return
    text = show_text({k: v for k, v in info.items() if k not in ("advisories", "unaffected_profile")})
    click.echo(text + "".join(f"\n{line}" for line in show_advisory_lines(info)))
