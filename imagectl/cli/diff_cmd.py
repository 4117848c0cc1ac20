"""``imagectl diff A B``: what changed between two pushed images (:func:`imagectl.images.read_facts.diff_images`).
Exit 0 when A and B are the same image, 1 when they differ (as ``diff`` does) or a registry fails, 2 for bad
input."""

from __future__ import annotations

import click

from .app import echo_json, json_option, profile_argument, workspace
from .diff_views import diff_json, format_diff


@click.command("diff")
@profile_argument("a")
@profile_argument("b")
@json_option
@click.pass_context
def cmd_diff(ctx: click.Context, a: str, b: str, as_json: bool) -> int:
    """What changed from image A to image B: versions, packages (the CUDA libraries first), base image, size per
    layer group, advisories, check reports and labels, read from the registry (manifests, configs and
    attestations; nothing is pulled).  A and B are profile names (their latest image), NAME:TAG, NAME@DIGEST (or a
    prefix of 12+ hex digits) or REGISTRY/PATH[:TAG|@DIGEST].  Exit 0 when they are the same image, 1 when they
    differ."""
    from ..images.read_facts import diff_images  # here: the registry package loads requests

    ws = workspace(ctx)
    found = diff_images(a, b, ws.matrix, ws.config)
    if as_json:
        echo_json(diff_json(found))
    else:
        click.echo(format_diff(found))
    return 0 if found.same else 1
