"""``imagectl verify IMAGE|PROFILE``: an image's SBOM, provenance and check report, read back from its registry and
checked against the image (:mod:`imagectl.evidence.verify`)."""

from __future__ import annotations

import click

from ..evidence.verify import kind_name, verify
from .app import echo_json, json_option, profile_argument, workspace
from .printable import printable, say


@click.command("verify")
@profile_argument("target")
@json_option
@click.pass_context
def cmd_verify(ctx: click.Context, target: str, as_json: bool) -> int:
    """Check the attestations of a profile's current image or of IMAGE (REGISTRY/PATH:TAG or @DIGEST): each refers
    to the image's digest, the SBOM, provenance and check report are there, agree with the image's labels and lock,
    and (with [attest] key or public_key) carry valid signatures.  Exit 1 with one line per problem."""
    ws = workspace(ctx)
    report = verify(target, ws.matrix, ws.config)
    if as_json:
        echo_json(report.as_dict())
        return 0 if report.ok else 1
    for item in report.attestations:
        mark = "ok  " if item.ok else "FAIL"
        click.echo(printable(f"{mark}  {kind_name(item.predicate_type):<13} {item.digest}  {item.signature}"))
    for problem in report.problems:
        say(f"imagectl: verify: {problem}", ws.config.secret_values)
    verdict = "verified" if report.ok else f"{len(report.problems)} problems"
    say(f"{report.image}: {verdict}; signatures: {report.signatures}")
    return 0 if report.ok else 1
