"""``imagectl validate``: every rule over the whole matrix, and every template rendered (so it loads Jinja)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..junit import write_junit
from ..matrix.validate import ValidateReport, validate_matrix
from ..render.dockerfile import template_violations
from .app import echo_json, workspace


@click.command("validate")
@click.option("--junit", "junit", metavar="FILE", type=click.Path(dir_okay=False), help="Also write JUnit XML.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the violation lines.")
@click.pass_context
def cmd_validate(ctx: click.Context, junit: str | None, as_json: bool) -> int:
    """Check every rule over the whole matrix and render every template; exit 1 on violations."""
    ws = workspace(ctx)
    template_check = ("template_renders", lambda profiles: template_violations(profiles, ws.config))
    report = validate_matrix(ws.matrix, [template_check])
    if as_json:
        echo_json(validate_json(report))
    else:
        for violation in report.violations:
            click.echo(str(violation))
    if junit:
        write_junit(Path(junit), "imagectl.validate", validate_cases(report))
    click.echo(f"{report.profiles} profiles, {len(report.rules)} rules, {len(report.violations)} violations", err=True)
    return 1 if report.violations else 0


def validate_json(report: ValidateReport) -> dict[str, Any]:
    """``validate --json``: the report as plain data."""
    violations = [{"rule": v.rule, "profile": v.subject, "message": v.message, "source": v.source}
                  for v in report.violations]
    return {"profiles": report.profiles, "rules": list(report.rules), "violations": violations,
            "ok": not report.violations}


def validate_cases(report: ValidateReport) -> list[tuple[str, str, str | None]]:
    """``validate --junit``: one case per rule, failing with that rule's violations."""
    by_rule: dict[str, list[str]] = {name.replace("_", "-"): [] for name in report.rules}
    for violation in report.violations:
        by_rule.setdefault(violation.rule, []).append(str(violation))
    return [("imagectl.validate", rule, "\n".join(found) or None) for rule, found in by_rule.items()]
