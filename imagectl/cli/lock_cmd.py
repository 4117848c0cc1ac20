"""``imagectl lock``: make, refresh and check the locks of profiles."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from .. import paths
from ..errors import ImagectlError, InputError
from ..grammar import check_python
from ..lock.lockfile import DEFAULT_PLATFORM
from ..lock.store import lock_files, read_lock, write_lock
from ..lock.target import lock_inputs, profile_lock_id, target_for
from ..matrix.model import Profile
from ..matrix.names import list_profiles
from ..matrix.platforms import platform_name
from .app import check_framework, framework_option, profile_argument, python_option, workspace
from .printable import say

if TYPE_CHECKING:
    from .workspace import Workspace


LockOutcome = Literal["unchanged", "printed", "written"]


@dataclass(frozen=True, kw_only=True)
class _LockRun:
    """How every lock of one ``lock`` command is made and where it goes."""

    upgrade: bool  # resolve afresh instead of keeping the existing lock's versions
    as_of: str | None
    output: str | None  # --output: the one lock's file
    target_dir: Path | None  # else the first lock directory (else stdout)

    def destination(self, lock_id: str) -> Path | None:
        """Where the lock ``lock_id`` is written (None: stdout)."""
        if self.output:
            return Path(self.output)
        return self.target_dir / f"{lock_id}.txt" if self.target_dir else None


@click.command("lock")
@profile_argument("names", nargs=-1)
@click.option("--all", "lock_all", is_flag=True, help="Lock every profile 'imagectl list' shows.")
@framework_option
@python_option
@click.option("--upgrade", is_flag=True, help="Resolve afresh instead of keeping the versions of the existing lock.")
@click.option("--as-of", "as_of", metavar="DATE|release|latest",
              help="Resolve as if it were DATE (YYYY-MM-DD); 'release': the framework release's upload day plus "
                   "[lock] grace_days; 'latest': no cut-off (default: [lock] as_of, release).")
@click.option("-o", "--output", metavar="FILE", type=click.Path(dir_okay=False),
              help="Write the lock here (one lock only; default: the [paths] locks directory, else stdout).")
@click.option("--check", "check", is_flag=True,
              help="Check the lock files against the matrix and their index (yanked files); exit 1 on drift.")
@click.option("--platform", "platforms", metavar="OS/ARCH[,...]", default=DEFAULT_PLATFORM, show_default=True,
              help="Lock for these image platforms (linux/arm64: aarch64-manylinux_2_28); with --all, only the "
                   "profiles whose build has CUDA wheels for it.")
@click.option("-j", "--jobs", default=4, show_default=True, type=click.IntRange(1, 16), help="Locks made at once.")
@click.option("--system", "system", is_flag=True,
              help="Make the system lock instead: the exact OS packages the apt steps install, asked of apt in the "
                   "pinned base image (needs the engine).")
@click.pass_context
def cmd_lock(  # noqa: PLR0913 - click passes one parameter per option
        ctx: click.Context, *, names: tuple[str, ...], lock_all: bool, framework: str | None, python: str | None,
        upgrade: bool, as_of: str | None, output: str | None, check: bool, platforms: str, jobs: int,
        system: bool) -> int:
    """Resolve the complete dependency set of the profiles NAMES, every package with its hashes."""
    ws = workspace(ctx)
    if system:
        return _system(ws, names, python, output, conflicts={"--check": check, "--all": lock_all, "--as-of": as_of,
                                                             "--upgrade": upgrade, "--framework": framework,
                                                             "--platform": platforms != DEFAULT_PLATFORM})
    if check:
        return _check(ws, framework)
    if not names and not lock_all:
        raise InputError("lock: name at least one profile (see 'imagectl list') or pass --all")
    if as_of is not None:
        from ..lock.asof import check_policy  # here: the lock modules that resolve load requests

        check_policy(as_of)
    python = python and check_python(python, "--python")
    wanted = tuple(dict.fromkeys(platform_name(p) for p in platforms.split(",") if p.strip())) or (DEFAULT_PLATFORM,)
    listed = list_profiles(ws.matrix, check_framework(ws, framework)) if lock_all else []
    named = [(ws.profile(n, python), p) for n in names for p in wanted]  # a platform it lacks: an error, below
    profiles = _one_per_lock([*named, *((q, p) for q in listed for p in wanted if p in q.platforms)])
    if output is not None and len(profiles) != 1:
        raise InputError(f"--output: {len(profiles)} locks to write; --output takes one (set [paths] locks to a "
                         "directory for several)")
    target_dir = ws.config.lock_dirs[0] if ws.config.lock_dirs else None
    if output is None and target_dir is None and len(profiles) != 1:
        raise InputError(f"lock: {len(profiles)} locks to write and nowhere to write them: set [paths] locks "
                         "(IMAGECTL_PATHS_LOCKS) to a directory, or lock one profile at a time")
    run = _LockRun(upgrade=upgrade, as_of=as_of, output=output, target_dir=target_dir)

    def one(item: tuple[Profile, str]) -> int:
        try:
            _lock_one(ws, item[0], run, item[1])
            return 0
        except ImagectlError as exc:
            say(f"imagectl: {item[0].name}: {exc}", ws.config.secret_values)
            return exc.exit_code

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return max(pool.map(one, profiles), default=0)


def _one_per_lock(profiles: list[tuple[Profile, str]]) -> list[tuple[Profile, str]]:
    """One (profile, platform) per lock id (flavours and OSes share a lock), in order."""
    seen: dict[str, tuple[Profile, str]] = {}
    for profile, platform in profiles:
        seen.setdefault(profile_lock_id(profile, platform), (profile, platform))
    return list(seen.values())


def _lock_one(ws: Workspace, profile: Profile, run: _LockRun, platform: str = DEFAULT_PLATFORM) -> LockOutcome:
    """Make (or keep) one lock of ``platform`` and write it; returns what happened.  Raises ImagectlError (an
    InputError for a platform the build has no CUDA wheels for)."""
    from ..lock.make import make_lock  # here: resolving loads requests (and runs uv)

    lock_id = profile_lock_id(profile, platform)
    dest = run.destination(lock_id)
    target = target_for(profile, ws.config, platform)
    existing = None
    if dest is not None and paths.is_file(dest, InputError, "the lock"):
        existing = read_lock(dest)
        same = (existing.header.inputs == lock_inputs(profile, platform) and existing.header.index == target.index
                and existing.header.platform == target.platform)
        if same and not run.upgrade and run.as_of is None:
            click.echo(f"{lock_id}: up to date ({len(existing.packages)} packages as of {existing.header.as_of}) "
                       f"{dest}", err=True)
            return "unchanged"
    lock = make_lock(profile, ws.config, run.as_of, prefer=None if run.upgrade else existing, target=target)
    if dest is None:
        click.echo(lock.text, nl=False)
        return "printed"
    changed = existing is None or existing.text != lock.text
    if changed:
        write_lock(lock, dest)
    click.echo(f"{lock_id}: {len(lock.packages)} packages as of {lock.header.as_of} "
               f"{'written to' if changed else 'unchanged in'} {dest} (sha256 {lock.sha256[:12]})", err=True)
    return "written" if changed else "unchanged"


def _system(ws: Workspace, names: tuple[str, ...], python: str | None, output: str | None,
            conflicts: dict[str, object]) -> int:
    """``lock NAME... --system``: each profile's system lock, asked of apt in its pinned base image, written beside the
    locks (the first lock directory), to ``--output`` or to stdout."""
    from ..engine.select import engine_for  # here: an engine, and the registry for the base digest
    from ..images.system_lock import make_system_lock, same_packages, system_lock_file
    from ..lock.system_store import read_system_lock, write_system_lock

    given = [flag for flag, value in conflicts.items() if value]
    if given:
        raise InputError(f"lock --system: {given[0]} does not apply (a system lock is made for linux/amd64 profiles "
                         "named one by one, from the archive as it is now or as [apt] snapshot says)")
    if not names:
        raise InputError("lock --system: name at least one profile (see 'imagectl list')")
    python = python and check_python(python, "--python")
    profiles = [ws.profile(n, python) for n in names]
    target_dir = ws.config.lock_dirs[0] if ws.config.lock_dirs else None
    if len(profiles) != 1 and (output or target_dir is None):
        raise InputError(f"lock --system: {len(profiles)} system locks to write; set [paths] locks to a directory "
                         "(--output and stdout take one)")
    engine = engine_for(ws.config)
    for profile in profiles:
        lock = make_system_lock(profile, ws.config, engine, lambda line: click.echo(line, err=True))
        dest = Path(output) if output else target_dir / system_lock_file(lock) if target_dir else None
        if dest is None:
            click.echo(lock.text, nl=False)
            continue
        if paths.is_file(dest, InputError, "the system lock") and same_packages(read_system_lock(dest), lock):
            click.echo(f"{system_lock_file(lock)}: up to date ({dest})", err=True)
            continue
        write_system_lock(lock, dest)
        counts = ", ".join(f"{step} {len(lock.packages(step))}" for step, _, _ in lock.steps)
        click.echo(f"{system_lock_file(lock)}: {counts} packages, written to {dest} (sha256 {lock.sha256[:12]})",
                   err=True)
    return 0


def _check(ws: Workspace, framework: str | None) -> int:
    """``lock --check``: every lock file of every lock directory, and the shipped lock of each PyPI profile."""
    from ..lock.verify import check_files, missing_locks  # here: it reads the index (requests)

    profiles = list_profiles(ws.matrix, check_framework(ws, framework))
    files = sorted(lock_files(ws.config))
    if framework:
        files = [p for p in files if p.name.startswith(f"{framework}-")]
    problems = [*check_files(files, ws.matrix, index_timeout=ws.config.pip_timeout),
                *missing_locks(profiles, ws.config)]
    for problem in problems:
        say(f"imagectl: lock --check: {problem}", ws.config.secret_values)
    marked, refused = _advisories(ws, files)
    click.echo(f"{len(files)} lock files checked, {len(problems)} problems"
               + (f", {marked} carry advisories" if marked else "")
               + (f", {refused} refused by [advisories] fail_on" if refused else ""), err=True)
    return 1 if problems or refused else 0


def _advisories(ws: Workspace, files: list[Path]) -> tuple[int, int]:
    """One ``advisory`` line per finding of each lock file of ``files``; ``(locks that carry one, findings that
    [advisories] fail_on refuses)``: only those change the exit status (an advisory is upstream's fact about a
    release, not drift of the lock)."""
    from ..advisories.gate import gate_hits
    from ..advisories.snapshot import known_advisories

    known, marked, refused = known_advisories(ws.config), 0, 0
    for path in files:
        found = known.findings(read_lock(path).versions)
        hits = gate_hits(found, ws.config.advisories_fail_on)
        for f in found:
            say(f"imagectl: lock --check: {path}: advisory {f.line()}" + (" (refused by [advisories] fail_on)"
                                                                         if f in hits else ""))
        marked, refused = marked + bool(found), refused + len(hits)
    return marked, refused
