"""Commands that need a container engine: build and test."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from ..config import Config
from ..engine import Engine
from ..engine.select import engine_for
from ..errors import InputError
from ..grammar import check_python, check_token
from ..images.builder import BuildResult, build_many, plan_many
from ..images.multiplatform import build_index
from ..images.plan import BuildOptions, BuildRequest
from ..images.platforms import chosen_platforms, normalized_platforms, parse_platforms, refuse_unbuildable, this_host
from ..images.tester import check_image
from ..junit import write_junit, write_report
from ..matrix.listing import profile_notes
from ..matrix.model import Profile
from ..matrix.platforms import platform_name
from ..matrix.names import list_profiles
from .live_display import LiveDisplay, plain_sink
from ..redact import redact
from ..reference import parse_reference
from ..requirements import check_requirement, read_requirements
from .app import echo_json, profile_argument, python_option, workspace
from .build_views import build_document, plan_document, plan_table, summary_table
from .advisory_views import gate_build
from ..advisories.snapshot import known_advisories
from .finding_views import format_findings
from .printable import printable, say


PROGRESS_MODES = ("auto", "plain", "quiet")


def _line_sink(secrets: Sequence[str] = ()) -> Callable[[str], None]:
    """A thread-safe printer of output lines on stderr, each redacted first: URL userinfo and ``secrets`` (the
    configured build-arg values and index passwords).  Used by ``test``."""
    lock = threading.Lock()

    def sink(line: str) -> None:
        line = redact(line, secrets)
        with lock:
            click.echo(line, err=True)

    return sink


class _Progress:
    """How ``build`` shows its progress on stderr: ``plain`` timestamped lines (never ``\r``; the default when
    stderr is not a terminal), a ``live`` display redrawing one line per running profile (``auto`` on a
    terminal), or nothing (``quiet``).  Every line is redacted first."""

    def __init__(self, mode: str, names: Sequence[str], secrets: Sequence[str]) -> None:
        self.secrets = secrets
        self.mode = "live" if mode == "auto" and sys.stderr.isatty() else "plain" if mode == "auto" else mode
        self._live = (LiveDisplay(sys.stderr, shutil.get_terminal_size((100, 20)).columns - 1)
                      if self.mode == "live" else None)
        self._plain = plain_sink
        self._several = len(set(names)) > 1

    def sink(self, name: str) -> Callable[[str], None]:
        """The line sink of profile ``name``."""
        if self.mode == "quiet":
            return lambda line: None
        inner = self._live.sink(name) if self._live else self._plain(sys.stderr, f"[{name}] " if self._several else "")
        return lambda line: inner(redact(line, self.secrets))

    def close(self) -> None:
        if self._live:
            self._live.close()

    @property
    def streamed(self) -> bool:
        """Whether every output line was shown as it came (then a failure's log tail is not shown again)."""
        return self.mode == "plain"


def _emit(document: dict[str, Any], as_json: bool, metadata_file: str | None, text: Callable[[], str]) -> None:
    """Print ``document`` as JSON (``--json``) or ``text()``, and write it to ``metadata_file`` when given; raises
    OperationError when that file cannot be written."""
    if as_json:
        echo_json(document)
    else:
        click.echo(text())
    if metadata_file:
        write_report(Path(metadata_file), (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())


@click.command("build")
@profile_argument("names", nargs=-1)
@click.option("--all", "build_all", is_flag=True, help="Build every profile of the matrix.")
@click.option("-j", "--jobs", default=1, show_default=True, type=click.IntRange(1, 32), help="Profiles built at once.")
@click.option("--push", is_flag=True, help="Push to the configured registry (implied when one is configured).")
@python_option
@click.option("--no-cache", is_flag=True, help="Build without the engine's layer cache.")
@click.option("--force", is_flag=True, help="Build even when an image with the same build key exists.")
@click.option("--extra", "extras", multiple=True, metavar="REQ", help="An extra PEP 508 requirement (repeatable).")
@click.option("--requirements", "requirements_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Extra requirements, one PEP 508 line each (# comments allowed).")
@click.option("--base", metavar="REF",
              help="Layer the extras on this image (managed or your own) instead of building the profile from scratch.")
@click.option("--suffix", metavar="NAME",
              help="Repository suffix for an image with extras (default: x + a hash of them).")
@click.option("--gpu-check", "--gpu", "gpu_check", is_flag=True,
              help="Also run the GPU part of the in-image check (--gpu: the former name).")
@click.option("--platform", "platform_list", metavar="P1[,P2]",
              help="Platforms to build (linux/amd64, linux/arm64; default: [build] platforms, else this host's); "
                   "several make one image index.")
@click.option("--progress", "progress", type=click.Choice(PROGRESS_MODES), default="auto", show_default=True,
              help="plain: timestamped lines; auto: a live display on a terminal, else plain; quiet: none.")
@click.option("--quiet", "-q", is_flag=True, help="No progress output (--progress=quiet).")
@click.option("--json", "as_json", is_flag=True, help="Print the results (or the plan) as one JSON document.")
@click.option("--metadata-file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Also write the JSON document to FILE.")
@click.option("--plan", is_flag=True, help="Say what would happen (reuse, build, refused) without building.")
@click.pass_context
def cmd_build(ctx: click.Context, names: tuple[str, ...], build_all: bool, jobs: int,  # noqa: PLR0913 (click
              push: bool, python: str | None, no_cache: bool, force: bool,  # passes one parameter per option)
              extras: tuple[str, ...], requirements_file: str | None, base: str | None, suffix: str | None,
              gpu_check: bool, platform_list: str | None, progress: str, quiet: bool, as_json: bool,
              metadata_file: str | None, plan: bool) -> int:
    """Build the profiles NAMES (e.g. torch-2.3-cu121), check them, tag them and push them."""
    ws = workspace(ctx)
    if not names and not build_all:
        raise InputError("build: name at least one profile (see 'imagectl list') or pass --all")
    if push and not ws.config.registry_url:
        raise InputError("build --push: no registry configured ([registry] url or IMAGECTL_REGISTRY_URL)")
    python = python and check_python(python, "--python")
    extras = tuple(check_requirement(e, "--extra", markers=True) for e in extras) + read_requirements(requirements_file)
    if base:
        parse_reference(base)
    if suffix:
        check_token(suffix, "--suffix")
    profiles = list_profiles(ws.matrix) if build_all else [ws.profile(n, python) for n in names]
    for note in (f"note: {p.name}: {n}" for p in profiles for n in profile_notes(p)):
        click.echo(note, err=True)  # an unverified build, companions not released: said before it starts
    gate_build(profiles, ws.config, known_advisories(ws.config), say)  # warns; [advisories] fail_on: exit 1 here
    options = BuildOptions(extras=extras, base=base, suffix=suffix, force=force, no_cache=no_cache,
                           gpu_check=gpu_check)
    engine, secrets = engine_for(ws.config), ws.config.secret_values
    requests = _requests(profiles, options, platform_list, ws.config, engine, every=build_all)
    if plan:
        entries = plan_many(requests, ws.config, engine)
        _emit(plan_document(entries, secrets), as_json, metadata_file, lambda: plan_table(entries, secrets))
        return 1 if any(e.action == "refused" for e in entries) else 0
    shown = _Progress("quiet" if quiet else progress, [p.name for p in profiles], secrets)
    try:
        results = build_many(requests, ws.config, engine, jobs, shown.sink, build_index)
    finally:
        shown.close()
    _emit(build_document(results, secrets), as_json, metadata_file, lambda: summary_table(results))
    _report_failures(results, secrets, streamed=shown.streamed)
    return max((r.exit_code or 1 for r in results if r.status == "failed"), default=0)


def _requests(profiles: Sequence[Profile], options: BuildOptions, platform_list: str | None,  # noqa: PLR0913
              config: Config, engine: Engine, *, every: bool) -> list[BuildRequest]:
    """One request per profile with the platforms it is built for (see :mod:`imagectl.images.platforms`); raises
    InputError for a platform that is not one, that a profile has no wheels for, several without a registry or a
    foreign one with the Docker engine, OperationError for a foreign one this host cannot emulate."""
    asked = parse_platforms(platform_list) if platform_list is not None else ()
    configured = normalized_platforms(config.build_platforms, "[build] platforms") if config.build_platforms else ()
    host, requests = this_host(), []
    for profile in profiles:
        platforms = chosen_platforms(profile, asked, configured, host, every=every)
        if len(platforms) > 1 and not config.registry_url:
            raise InputError(f"build --platform {','.join(platforms)}: an image index needs a registry ([registry] "
                             "url or IMAGECTL_REGISTRY_URL)")
        if any(p != host for p in platforms):
            refuse_unbuildable(platforms, host, engine.name)
        alone = bool(asked) and len(platforms) == 1 and len(profile.platforms) > 1  # one of several: for `index`
        requests.append(BuildRequest(profile, options, platforms, moves_latest=not alone))
    return requests


def _report_failures(results: Sequence[BuildResult], secrets: Sequence[str], *, streamed: bool) -> None:
    """Each result's notes, and each failure's error line (with its log tail once, where the log did not stream),
    on stderr, redacted and printable (a note or an error may quote a registry's answer)."""
    for r in results:
        for note in r.notes:
            say(f"note: {r.profile}: {note}", secrets)
        if r.status == "failed":
            if not streamed:  # the log was not on the screen: its tail, once
                for line in r.log_tail[-20:]:
                    say(f"| {line}", secrets)
            say(f"imagectl: {r.profile}: {r.error}", secrets)


@click.command("test")
@profile_argument("target")
@click.option("--gpu-check", "--gpu", "gpu", is_flag=True,
              help="Also run a CUDA operation and a one-process NCCL all-reduce (--gpu: the former name).")
@click.option("--platform", metavar="PLATFORM",
              help="Of a multi-platform image, run this platform's image (default: this host's; another runs under "
                   "QEMU where binfmt_misc has a handler for it).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--junit", metavar="FILE", type=click.Path(dir_okay=False), help="Also write JUnit XML.")
@click.pass_context
def cmd_test(ctx: click.Context, target: str, gpu: bool, platform: str | None, as_json: bool,  # noqa: PLR0913
             junit: str | None) -> int:
    """Run the in-image check of a profile's current image or of IMAGE."""
    ws = workspace(ctx)
    platform = platform_name(platform) if platform is not None else None
    on_line = _line_sink(ws.config.secret_values) if not as_json else (lambda line: None)
    image, findings = check_image(target, ws.matrix, ws.config, engine_for(ws.config), on_line, gpu=gpu,
                                  platform=platform)
    if junit:
        cases = (
            (image, f.what, None if f.ok or f.severity != "error" else f"expected {f.expected}, found {f.actual}")
            for f in findings
        )
        write_junit(Path(junit), "imagectl.test", cases)
    bad = [f for f in findings if not f.ok and f.severity == "error"]
    if as_json:
        echo_json({"image": image, "ok": not bad, "findings": [f.as_dict() for f in findings]})
    else:
        click.echo(format_findings(findings))
        click.echo(printable(f"{image}: {'ok' if not bad else f'{len(bad)} mismatches'}"), file=sys.stderr)
    return 1 if bad else 0
