"""``imagectl render``: the build context a build of a profile would use, planned as ``build`` plans it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import click

from ..errors import InputError, OperationError
from ..grammar import check_python
from ..images.context_write import write_context
from ..images.plan import BuildOptions, BuildRequest, Plan, no_digest, plan_build
from ..images.trace import Trace
from ..requirements import check_requirement
from .app import echo_json, profile_argument, python_option, workspace


@click.command("render")
@profile_argument("name")
@click.option("-o", "--output", metavar="DIR", type=click.Path(file_okay=False),
              help="Write the whole build context here.")
@python_option
@click.option("--extra", "extras", multiple=True, metavar="REQ", help="An extra PEP 508 requirement (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the context's file sizes and hashes and its build key as JSON (never the contents).")
@click.pass_context
def cmd_render(ctx: click.Context, name: str, output: str | None, python: str | None,  # noqa: PLR0913 (one per option)
               extras: tuple[str, ...], as_json: bool) -> None:
    """Print the Dockerfile of NAME, or write its complete build context to DIR."""
    ws = workspace(ctx)
    profile = ws.profile(name, python and check_python(python, "--python"))
    extras = tuple(check_requirement(e, "--extra", markers=True) for e in extras)
    if output is not None and not output:
        raise InputError("--output: name a directory (an empty path would write into the working directory)")
    plan = plan_build(BuildRequest(profile, BuildOptions(extras=extras)), ws.config, no_digest, Trace())
    if output is None and not as_json:
        click.echo(plan.files["Dockerfile"].decode(), nl=False)
        return
    if output is not None:
        written = _write(plan, Path(output), output)
        if not as_json:
            for path in written:
                click.echo(str(path))
    if as_json:
        echo_json(render_json(plan))


def _write(plan: Plan, dest: Path, output: str) -> list[Path]:
    """Write the whole build context (the netrc of index credentials included, readable by its owner only) and
    copies of the added files into ``dest``, never through a symbolic link and nothing left behind on failure;
    raises InputError for a link in the way, OperationError naming what could not be written."""
    try:
        return write_context(plan.context(), plan.added, dest)
    except OSError as exc:
        at = f" ({exc.filename})" if exc.filename and str(exc.filename) != output else ""
        raise OperationError(f"--output {output}: cannot write the build context: {exc.strerror or exc}{at}") from None


def render_json(plan: Plan) -> dict[str, Any]:
    """``render --json``: each context file's sha256 and size (never its content: the pip netrc file holds
    credentials) and the plan's build key, computed without a base digest (``render`` does not pin the base)."""
    digests = plan.added_digests
    listing = {name: {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}
               for name, content in plan.context().items()}
    try:
        listing.update({name: {"sha256": digests[name], "size": path.stat().st_size}
                        for name, path in plan.added.items()})
    except OSError as exc:
        raise InputError(f"[paths] context: cannot read {exc.filename}: {exc.strerror or exc}") from None
    return {
        "profile": plan.request.profile.name,
        "files": listing,
        "base_digest": None,
        "build_key": plan.key,
        "note": "build_key is computed without a base digest; a real build pins the base image's digest first"
                " (it is rendered into the Dockerfile and hashed into the key), so its key differs",
    }
