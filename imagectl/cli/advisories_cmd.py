"""``imagectl advisories``: which locks carry which advisory (``list``), and refreshing the snapshot (``sync``)."""

from __future__ import annotations

from pathlib import Path

import click

from ..advisories.locks import profile_findings
from ..advisories.match import Finding
from ..advisories.snapshot import ADVISORIES, known_advisories
from ..advisories.sync import sync_advisories
from ..lock.store import find_lock, lock_files, read_lock
from ..matrix.names import list_profiles
from ..pip_index import index_url
from ..shipped import shipped_dir
from .app import echo_json, json_option, workspace
from .printable import say
from .table import format_table

OSV_PYPI = "https://osv-vulnerabilities.storage.googleapis.com/PyPI/all.zip"  # osv.dev's export of every PyPI record


@click.group("advisories")
def cmd_advisories() -> None:
    """OSV advisories of the locked packages: which locks carry which (list), refresh the snapshot (sync)."""


def _lock_files(ws) -> list[Path]:
    """Every lock file of every lock directory (the team's first, then the shipped ones)."""
    return sorted(lock_files(ws.config))


@cmd_advisories.command("list")
@click.option("--id", "ids", multiple=True, metavar="ID", help="Only this advisory (an id or alias; repeatable).")
@json_option
@click.pass_context
def cmd_list(ctx: click.Context, ids: tuple[str, ...], as_json: bool) -> None:
    """Each advisory that a lock file carries, with the locks that carry it (which of our images carry CVE-X?); a
    profile without a lock file (locked at build time) is judged by its pins."""
    ws = workspace(ctx)
    known = known_advisories(ws.config)
    wanted = {i.upper() for i in ids}
    locks = [(path.stem, known.findings(read_lock(path).versions)) for path in _lock_files(ws)]
    unlocked = [p for p in list_profiles(ws.matrix) if not find_lock(p, ws.config, index_url(p, ws.config))]
    pins = [(p.name, profile_findings(p, ws.config, known)) for p in unlocked]
    seen: dict[str, Finding] = {}
    rows = []
    for ident, found in sorted(_by_id([*locks, *pins], wanted).items(), key=lambda kv: (kv[1].package, kv[0])):
        seen[ident] = found
        rows.append({"id": ident, "aliases": list(found.ids[1:]), "package": found.package, "fixed": found.fixed,
                     "severity": found.severity, "summary": found.summary,
                     "locks": _carriers(locks, ident), "unlocked_profiles": _carriers(pins, ident)})
    if as_json:
        echo_json(rows)
        return
    table = [{**r, "locks": len(r["locks"]), "unlocked": len(r["unlocked_profiles"]), "fixed": r["fixed"] or "no fix"}
             for r in rows]
    click.echo(format_table(table, ("id", "package", "fixed", "severity", "locks", "unlocked", "summary")))
    for r in rows if ids else ():
        click.echo(f"{r['id']}: {', '.join([*r['locks'], *r['unlocked_profiles']])}")
    say(f"{len(rows)} advisories; {sum(1 for _, f in locks if f)} of {len(locks)} lock files and "
        f"{sum(1 for _, f in pins if f)} of {len(pins)} profiles locked at build time (judged by their pins) carry one "
        f"({known.count} records known)")


def _by_id(carried: list[tuple[str, list[Finding]]], wanted: set[str]) -> dict[str, Finding]:
    """Every finding of ``carried`` by its id (only those ``wanted`` names, when it names any)."""
    return {f.id: f for _, found in carried for f in found if not wanted or wanted & {i.upper() for i in f.ids}}


def _carriers(carried: list[tuple[str, list[Finding]]], ident: str) -> list[str]:
    """``NAME: package version`` of each lock or profile of ``carried`` that carries ``ident``."""
    return [f"{name}: {f.package} {f.version}" for name, found in carried for f in found if f.id == ident]


@cmd_advisories.command("sync")
@click.option("--from", "sources", multiple=True, metavar="DIR|URL",
              help="A folder of OSV records (pypa/advisory-database's or github/advisory-database's layout, or any "
                   "folder of OSV .json) or the URL of a zip of them; repeatable (default: osv.dev's PyPI export).")
@click.option("-o", "--output", metavar="DIR", type=click.Path(file_okay=False),
              help="The snapshot folder to write (default: the shipped matrices/advisories).")
@click.pass_context
def cmd_sync(ctx: click.Context, sources: tuple[str, ...], output: str | None) -> None:
    """Refresh the snapshot: keep the OSV records of the packages the locks hold, each with its source."""
    ws = workspace(ctx)
    packages = {name for path in _lock_files(ws) for name in read_lock(path).versions}
    dest = Path(output) if output else shipped_dir("matrices") / ADVISORIES
    result = sync_advisories(sources or (OSV_PYPI,), dest, packages, ws.config.pip_timeout)
    if result.yaml_skipped:
        say(f"warning: {result.yaml_skipped} YAML records not read: PyYAML is not installed (pip install pyyaml), "
            "or sync from OSV JSON (github/advisory-database, osv.dev)")
    say(f"{dest}: {result.kept} records of {len(packages)} locked packages kept of {result.read} read, "
        f"{result.removed} removed")
