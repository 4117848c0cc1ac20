"""Commands over the matrix: list, show, validate, compat, check, render."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import InputError, OperationError
from .app import check_framework, echo_json, framework_option, json_option, python_option, workspace, profile_argument


python_option_filter = click.option("--python", metavar="X.Y", help="Only profiles with this Python.")


@click.command("list")
@framework_option
@click.option("--cuda", metavar="X[.Y]", help="Only CUDA builds of this version (12 or 12.1).")
@python_option_filter
@click.option("--flavor", metavar="NAME", help="Only this flavour (base, runtime, devel).")
@click.option("--newest", is_flag=True, help="Only each framework's newest minor line (each line shows its newest "
                                             "patch anyway).")
@json_option
@click.pass_context
def cmd_list(ctx: click.Context, framework: str | None, cuda: str | None, python: str | None, flavor: str | None,
             newest: bool, as_json: bool) -> None:
    """List the profiles of the matrix (each minor line's newest patch), optionally filtered."""
    from ..grammar import check_python, check_token, check_version
    from ..matrix.listing import list_row, select_profiles
    from .table import format_table
    from .views import LIST_COLUMNS, list_table_row, lock_origin
    from ..matrix.names import list_profiles

    ws = workspace(ctx)
    cuda = cuda if cuda is None else check_version(cuda, "--cuda")
    python = python if python is None else check_python(python, "--python")
    flavor = flavor if flavor is None else check_token(flavor, "--flavor")
    if flavor is not None and flavor not in ws.matrix.base.flavors:
        raise InputError(f"--flavor {flavor!r}: not a flavour of the matrix ({', '.join(ws.matrix.base.flavors)})")
    profiles = select_profiles(list_profiles(ws.matrix, check_framework(ws, framework)), cuda, python, flavor, newest)
    from .views import effective_toolkit

    rows = [{**list_row(p), "lock": lock_origin(p, ws.config),
             "min_driver": effective_toolkit(p, ws.config, ws.matrix)[0].min_driver} for p in profiles]
    echo_json(rows) if as_json else click.echo(format_table([list_table_row(r) for r in rows], LIST_COLUMNS))


@click.command("show")
@profile_argument("name")
@python_option
@json_option
@click.pass_context
def cmd_show(ctx: click.Context, name: str, python: str | None, as_json: bool) -> None:
    """Show the resolved profile NAME (e.g. torch-2.3-cu121)."""
    from ..cache import cached
    from ..grammar import check_python
    from ..lock.store import lock_inputs
    from .views import describe_profile, show_text

    ws = workspace(ctx)
    python = python and check_python(python, "--python")
    # a pure function of the matrix, the configuration and the lock files: cached as plain data, so a repeated
    # `show` reads neither the matrix nor a lock (the cache keys every input file by path, size and mtime)
    info = cached("show", [*ws.matrix_inputs, *lock_inputs(ws.config)],
                  lambda: describe_profile(ws.profile(name, python), ws.config, ws.matrix),
                  extra=f"{name}\0{python}\0{ws.config!r}")
    if as_json:
        echo_json(info)
        return
    click.echo(show_text(info))


@click.command("validate")
@click.option("--junit", "junit", metavar="FILE", type=click.Path(dir_okay=False), help="Also write JUnit XML.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the violation lines.")
@click.pass_context
def cmd_validate(ctx: click.Context, junit: str | None, as_json: bool) -> int:
    """Check every rule over the whole matrix and render every template; exit 1 on violations."""
    from ..cache import cached

    ws = workspace(ctx)

    def run():
        from ..matrix.validate import validate_matrix
        from ..render.dockerfile import template_violations

        template_check = ("template_renders", lambda profiles: template_violations(profiles, ws.config))
        return validate_matrix(ws.matrix, [template_check])

    from ..shipped import template_files

    inputs = [*ws.matrix_inputs, *template_files(ws.config)]  # a hit needs neither the matrix nor its model
    report = cached("validate", inputs, run, extra=repr(ws.config))
    if as_json:
        echo_json(_validate_json(report))
    else:
        for violation in report.violations:
            click.echo(str(violation))
    if junit:
        from ..junit import write_validate_junit

        write_validate_junit(Path(junit), report)
    click.echo(f"{report.profiles} profiles, {len(report.rules)} rules, {len(report.violations)} violations", err=True)
    return 1 if report.violations else 0


def _validate_json(report) -> dict:
    """``validate --json``: the report of :func:`~imagectl.matrix.validate.validate_matrix` as plain data."""
    violations = [{"rule": v.rule, "profile": v.subject, "message": v.message, "source": v.source}
                  for v in report.violations]
    return {"profiles": report.profiles, "rules": list(report.rules), "violations": violations,
            "ok": not report.violations}


@click.command("compat")
@click.option("--driver", metavar="VERSION", help="Node driver version (default: from nvidia-smi).")
@click.option("--gpu", metavar="NAME|sm_XY",
              help="GPU model or architecture (default: from nvidia-smi when --driver is absent).")
@framework_option
@click.option("--all", "show_all", is_flag=True, help="Also list the profiles that cannot run, with the reasons.")
@click.option("--best", is_flag=True, help="Only the newest profile of each framework that can run.")
@json_option
@click.pass_context
def cmd_compat(ctx: click.Context, driver: str | None, gpu: str | None, framework: str | None, show_all: bool,
               best: bool, as_json: bool) -> int:
    """Which profiles can run on a node with this driver (and GPU); with --all also why the others cannot."""
    from ..lock.runtime import lock_reader
    from ..matrix.compat import gpu_arch, node_verdicts
    from ..matrix.names import list_profiles
    from ..nvidia_smi import read_node

    ws = workspace(ctx)
    profiles = list_profiles(ws.matrix, check_framework(ws, framework))
    if driver is None:
        driver, detected = read_node()
        gpu = detected if gpu is None else gpu
    node_gpu = gpu_arch(gpu, ws.matrix) if gpu is not None else None
    verdicts = node_verdicts(profiles, driver, node_gpu, lock_reader(ws.config, ws.matrix))
    if best:  # list order is newest first within a framework: the first runnable one of each
        by_name = {p.name: p for p in profiles}
        firsts: dict[str, object] = {}
        for v in verdicts:
            if v.ok:
                firsts.setdefault(by_name[v.profile].framework.name, v)
        verdicts = list(firsts.values())
    if as_json:
        echo_json([
            {"name": v.profile, "compatible": v.ok, "reasons": list(v.reasons), "notes": list(v.notes)}
            for v in verdicts
        ])
        return 0
    for v in verdicts:
        if v.ok:
            click.echo(f"ok    {v.profile}" + "".join(f"  ({n})" for n in v.notes))
        elif show_all:
            click.echo(f"no    {v.profile}: {'; '.join(v.reasons)}")
    good = sum(v.ok for v in verdicts)
    on_gpu = f" on {gpu}" if gpu else ""
    what = ("the newest of each framework that can run" if best else
            "every profile" if show_all else "those that can run (--all: also why the others cannot)")
    click.echo(f"{good} of {len(verdicts)} profiles can run with driver {driver}{on_gpu}; listed: {what}", err=True)
    return 0


@click.command("check")
@click.argument("items", nargs=-1, required=True)
@json_option
@click.pass_context
def cmd_check(ctx: click.Context, items: tuple[str, ...], as_json: bool) -> int:
    """Is an ad-hoc combination compatible?  e.g. torch==2.3.1 cuda=12.1 python=3.12 nccl=2.20.5"""
    from ..lock.runtime import lock_reader
    from ..matrix.compat import check_combination, parse_combination

    ws = workspace(ctx)
    combo = parse_combination(items, ws.matrix)
    reasons, notes, profile = check_combination(combo, ws.matrix, lock_reader(ws.config, ws.matrix))
    if profile is not None and (combo.python is None or combo.python in profile.release.python):
        from ..matrix.names import python_problems  # python-available and unavailable Pythons: no image to build

        problems = python_problems(ws.matrix, profile.framework, profile.release, profile.variant, profile.python)
        reasons, profile = reasons + problems, None if problems else profile
    if as_json:
        echo_json({
            "compatible": not reasons, "reasons": reasons, "notes": notes, "profile": profile.name if profile else None
        })
    else:
        click.echo(("compatible" if not reasons else "incompatible") + (f" ({profile.name})" if profile else ""))
        for line in reasons + notes:
            click.echo(f"  - {line}")
    return 1 if reasons else 0


@click.command("render")
@profile_argument("name")
@click.option("-o", "--output", metavar="DIR", type=click.Path(file_okay=False),
              help="Write the whole build context here.")
@python_option
@click.option("--extra", "extras", multiple=True, metavar="REQ", help="An extra PEP 508 requirement (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the context's file sizes and hashes and its build key as JSON (never the contents).")
@click.pass_context
def cmd_render(ctx: click.Context, name: str, output: str | None, python: str | None, extras: tuple[str, ...],
               as_json: bool) -> None:
    """Print the Dockerfile of NAME, or write its complete build context to DIR."""
    from ..grammar import check_python, check_requirement
    from ..images.builder import BuildOptions, repository_name
    from ..lock.extras import lock_extras
    from ..lock.make import lock_for_build
    from ..lock.target import target_for
    from ..render.dockerfile import context_files, write_context

    ws = workspace(ctx)
    profile = ws.profile(name, python and check_python(python, "--python"))
    extras = tuple(check_requirement(e, "--extra", markers=True) for e in extras)
    if output is not None and not output:
        raise InputError("--output: name a directory (an empty path would write into the working directory)")
    chosen = lock_for_build(profile, ws.config)
    closure = lock_extras(extras, chosen.lock, target_for(profile, ws.config)) if extras else ()
    title = repository_name(profile, BuildOptions(extras=extras)) if extras else None
    files = context_files(profile, ws.config, extras=extras, lock=chosen.lock, extras_lock=closure, title=title)
    if output is None and not as_json:
        click.echo(files["Dockerfile"].decode(), nl=False)
        return
    from ..images.context_files import context_files_on_disk, place_files

    added = context_files_on_disk(ws.config.context_dirs)
    if output is not None:
        dest = Path(output)
        try:
            place_files(added, dest)
            written = [*write_context(files, dest), *(dest / name for name in added)]
        except OSError as exc:
            at = f" ({exc.filename})" if exc.filename and str(exc.filename) != output else ""
            raise OperationError(
                f"--output {output}: cannot write the build context: {exc.strerror or exc}{at}") from None
        if not as_json:
            for path in written:
                click.echo(str(path))
    if as_json:
        echo_json(_render_json(profile.name, files, added, ws.config))


def _render_json(profile: str, files: dict[str, bytes], added: dict[str, Path], config) -> dict:
    """``render --json``: each context file's sha256 and size (never its content: the pip netrc file holds
    credentials) and the build key a build of this context would get before its base digest is pinned."""
    import hashlib

    from ..images.build_key import build_key
    from ..images.context_files import file_digests

    digests = file_digests(added)
    listing = {name: {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}
               for name, content in files.items()}
    try:
        listing.update({name: {"sha256": digests[name], "size": path.stat().st_size} for name, path in added.items()})
    except OSError as exc:
        raise InputError(f"[paths] context: cannot read {exc.filename}: {exc.strerror or exc}") from None
    return {
        "profile": profile,
        "files": listing,
        "base_digest": None,
        "build_key": build_key(files, base_digest="", build_args=config.build_args, file_digests=digests),
        "note": "build_key is computed without a base digest; a real build pins the base image's digest first"
                " (it is rendered into the Dockerfile and hashed into the key), so its key differs",
    }
