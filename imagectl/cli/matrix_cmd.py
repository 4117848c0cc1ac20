"""``imagectl matrix``: the profile list for CI systems, and the matrix checked against package indexes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..ci.changes import profiles_changed_since
from ..ci.outputs import FORMATS, MAX_JOBS, OutputFormat, render
from ..errors import InputError
from ..grammar import check_url
from ..junit import junit_xml, write_report
from ..matrix.names import list_profiles
from ..shipped import matrix_dirs
from .app import check_framework, echo_json, framework_option, json_option, workspace
from .table import format_table
from .verify_views import COLUMNS, finding_rows, junit_cases, report_json, summary

if TYPE_CHECKING:
    from ..upstream.sync import SyncReport
    from .workspace import Workspace


def _check_index(index: str | None) -> str | None:
    return check_url(index, "--index") if index is not None else None


@click.group("matrix", invoke_without_command=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True,
              help="json: list rows; github: a matrix of chunks, each a strategy.matrix include list (one line); "
                   "gitlab: a child pipeline with parallel:matrix jobs; tekton: Tasks and a Pipeline with a matrix "
                   "(buildah, results for Tekton Chains); argo: a Workflow fanned out with withParam; "
                   "markdown: a compatibility table.")
@click.option("--changed-since", "changed_since", metavar="GIT_REF",
              help="Only profiles whose matrix data (or any template) changed since this git ref.")
@framework_option
@click.option("--gitlab-include", metavar="FILE", default=".gitlab-ci.yml", show_default=True,
              help="gitlab: the repository file that defines the .imagectl-build and .imagectl-promote jobs.")
@click.option("--max-jobs", "max_jobs", type=click.IntRange(min=1), metavar="N",
              help=f"{', '.join(MAX_JOBS)}: at most N jobs per matrix (default: the documented limits, "
                   f"{', '.join(f'{k} {v}' for k, v in MAX_JOBS.items())}).")
@click.pass_context
def cmd_matrix(  # noqa: PLR0913 - click passes one parameter per option
        ctx: click.Context, *, fmt: OutputFormat, changed_since: str | None, framework: str | None,
        gitlab_include: str, max_jobs: int | None) -> None:
    """Print the profiles in the shape a CI system consumes (see also: matrix verify, matrix sync)."""
    if ctx.invoked_subcommand is not None:
        return
    ws = workspace(ctx)
    check_framework(ws, framework)
    if changed_since is None:
        profiles = list_profiles(ws.matrix, framework)
    else:
        profiles = profiles_changed_since(changed_since, Path.cwd(), ws.matrix, ws.config, framework)
        click.echo(f"{len(profiles)} profiles changed since {changed_since}", err=True)
    text = render(profiles, fmt, gitlab_include or None, max_jobs)
    if max_jobs is not None and max_jobs > MAX_JOBS[fmt]:
        click.echo(f"warning: --max-jobs {max_jobs} is above {fmt}'s documented {MAX_JOBS[fmt]} jobs per matrix",
                   err=True)
    click.echo(text, nl=False)


@cmd_matrix.command("verify")
@click.option("--index", metavar="URL", help="Simple index to read (default: each framework's pypi_index_url).")
@framework_option
@json_option
@click.option("--junit", metavar="FILE", type=click.Path(dir_okay=False), help="Also write JUnit XML.")
@click.option("--notes", "show_notes", is_flag=True,
              help="Also list notes: pins the matrix leaves unstated, facts the index cannot confirm.")
@click.pass_context
def cmd_verify(  # noqa: PLR0913 - click passes one parameter per option
        ctx: click.Context, *, index: str | None, framework: str | None, as_json: bool, junit: str | None,
        show_notes: bool) -> int:
    """Compare every pin of the matrix with the PEP 658 metadata an index publishes; exit 1 on differences."""
    from ..pypi.transport import index_settings  # here: reading an index loads requests
    from ..upstream.verify import verify_matrix

    ws = workspace(ctx)
    report = verify_matrix(ws.matrix, framework, _check_index(index), settings=index_settings(ws.config.pip_timeout))
    if junit:
        _write(Path(junit), junit_xml("imagectl.matrix.verify", junit_cases(report)))
    rows = finding_rows(report, notes=show_notes)
    if as_json:
        echo_json(report_json(report))
    elif rows:
        click.echo(format_table(rows, COLUMNS + (("kind",) if show_notes else ())))
    click.echo(summary(report), err=True)
    return 1 if report.failures else 0


@cmd_matrix.command("sync")
@click.option("--index", metavar="URL", help="Simple index to read (default: each framework's pypi_index_url).")
@framework_option
@click.option("-o", "--output", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write the proposals here instead of stdout.")
@click.option("--check", is_flag=True, help="Exit 1 when there is something to propose (for a scheduled CI job).")
@click.pass_context
def cmd_sync(ctx: click.Context, *, index: str | None, framework: str | None, output: str | None, check: bool) -> int:
    """Propose [[release]] entries for upstream releases the matrix lacks, and companions released since for
    releases it has (for review; edits nothing)."""
    from ..pypi.transport import index_settings  # here: reading an index loads requests
    from ..upstream.sync import render_proposals, sync_matrix

    ws = workspace(ctx)
    target = _output_path(output, ws) if output else None
    report = sync_matrix(ws.matrix, framework, _check_index(index), settings=index_settings(ws.config.pip_timeout))
    text = render_proposals(report.proposals, report.indexes, report.updates)
    if target is not None:
        _write(target, text.encode("utf-8"))
    elif text:
        click.echo(text, nl=False)
    for line in report.notices:
        click.echo(f"note: {line}", err=True)
    click.echo(_sync_summary(report), err=True)
    return 1 if check and report.pending else 0


def _sync_summary(report: "SyncReport") -> str:
    """``N releases proposed: torch 2.15.0`` (or that the matrix is current), and the releases given companions."""
    names = ", ".join(f"{p.framework} {p.version}" for p in report.proposals)
    if report.pending:
        line = f"{len(report.proposals)} releases proposed" + (f": {names}" if names else "")
    else:
        line = f"0 releases proposed; the matrix is current with {', '.join(sorted(set(report.indexes.values())))}"
    if report.updates:
        line += (f"; companions for {len(report.updates)} releases in the matrix: "
                 + ", ".join(f"{u.framework} {u.version}" for u in report.updates))
    return line


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, creating its directory; raises OperationError when that fails."""
    write_report(path, data)


def _output_path(output: str, ws: "Workspace") -> Path:
    """``--output`` as a path; raises InputError for a file in a matrix directory (never edited in place)."""
    path = Path(output).resolve()
    dirs = {d.resolve() for d in matrix_dirs(ws.config)}
    if path.parent in dirs or path in {f.resolve() for f in ws.matrix.files}:
        raise InputError(f"--output {output}: is in a matrix directory; write proposals elsewhere and review them")
    return path
