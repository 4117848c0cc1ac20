"""``imagectl build``: render, reuse or build, check, tag, push, move the moving tag.

The order is what makes a failure leave nothing behind: the image is built and checked before any tag is
made; the immutable tag is pushed before the moving tag moves; the moving tag moves in the registry (one
manifest PUT) before the local one.  A failure at any step raises BuildError and leaves every moving tag
where it was; nothing is deleted.

Reuse: the build key (see :mod:`.build_key`) is stored as a label and written into the immutable tag, so an
unchanged profile is found with one tag listing (:meth:`TagStore.tag_with_key`, local or registry).  A reused image
moves the moving tag only where the moving tag does not exist yet: ``build`` never undoes a rollback unless
something changed or ``--force`` is given.

Immutable tags are never overwritten (:mod:`.immutable`): a tag that already names another image fails the build
(step ``tag``, nothing pushed, the moving tag stays); one that already names this very image is not pushed again.

Build contexts live in directories of :mod:`.context_dirs`, swept of those killed builds left behind.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..cache import cached
from ..config import Config
from ..engine import Engine, LineSink
from ..errors import BuildError, ImagectlError, InputError, OperationError
from ..imagecheck.run import run_check
from ..labels import BUILD_KEY
from ..lock.extras import lock_extras
from ..lock.make import ChosenLock, lock_for_build
from ..lock.target import target_for
from ..matrix.model import Profile
from ..progress.heartbeat import Heartbeat
from ..progress.piplog import PipDownload, PipLog
from ..reference import Reference, parse_reference
from ..render.context import NETRC_FILE, base_reference, pip_netrc
from ..shipped import template_files
from ..tags.managed import open_tag_store
from ..tags.moves import MoveResult, guarded_move
from ..tags.naming import MOVING_TAG, immutable_tag, repository, short_digest
from ..tags.store import TagStore
from .base_digest import resolve_base_digest
from .build_key import build_key
from .context_dirs import build_context, sweep_contexts
from .context_files import context_files_on_disk, file_digests, place_files
from .immutable import existing_immutable, image_of


@dataclass(frozen=True)
class BuildOptions:
    """What the user asked for."""

    force: bool = False
    no_cache: bool = False
    extras: tuple[str, ...] = ()
    gpu_check: bool = False
    base: str | None = None  # build --base: layer the extras on this image instead of the profile's base
    suffix: str | None = None  # repository suffix for images with extras (default: x + hash of the extras)


def repository_name(profile: Profile, options: BuildOptions) -> str:
    """The repository name of a build: the profile's, or ``PROFILE-SUFFIX`` when extras are layered in
    (so a team's variant never moves the profile's own moving tag)."""
    if not options.extras:
        return profile.name
    import hashlib

    digest = hashlib.sha256("\n".join(sorted(options.extras) + [options.base or ""]).encode()).hexdigest()
    return f"{profile.name}-{options.suffix or 'x' + digest[:8]}"


def refuse_conflicting_extras(profiles: Sequence[Profile], config: Config, options: BuildOptions) -> None:
    """Raise InputError (before any build) when an extra names a package of a profile's lock at another version
    (``--extra torch==2.4.0`` on a 2.3 profile), naming both requirements.  Finding each lock may resolve it
    (see :func:`~imagectl.lock.make.lock_for_build`); a conflict deeper in the tree is found when the extras
    are resolved, in the build."""
    if not options.extras:
        return
    from ..lock.extras import conflicts
    from ..lock.make import lock_for_build

    for profile in profiles:
        problems = conflicts(options.extras, lock_for_build(profile, config).lock)
        if problems:
            raise InputError(f"{profile.name}: {problems[0]}")


@dataclass
class BuildResult:
    """One line of the summary table; ``phases`` holds the seconds each timed phase took (resolve, render,
    lookup, build, check, tag, push: those that ran); ``downloads`` the wheels pip downloaded in the build
    (none for a reused image or a fully cached build)."""

    profile: str
    status: str  # built, reused, failed
    tag: str = ""
    digest: str = ""
    size: int = 0
    seconds: float = 0.0
    error: str = ""
    notes: list[str] = field(default_factory=list)
    repository: str = ""  # the full reference without tag
    image_id: str = ""
    phases: dict[str, float] = field(default_factory=dict)
    step: str = ""  # the failing step of a BuildError
    log_tail: list[str] = field(default_factory=list)
    lock_sha256: str = ""  # the lock the image installs
    lock_origin: str = ""  # team, shipped or build-time
    exit_code: int = 0  # of a failure: 2 for bad input (a conflicting extra), else 1
    downloads: list[PipDownload] = field(default_factory=list)


@dataclass(frozen=True)
class PlanEntry:
    """What ``build`` would do for one profile: ``reuse`` (``tag``), ``build`` (``key``) or ``refused``
    (``reason``)."""

    profile: str
    action: str  # reuse, build, refused
    repository: str = ""
    tag: str = ""
    key: str = ""
    reason: str = ""


@dataclass(frozen=True)
class _Prepared:
    """The first steps of a build: the rendered context, the added files, the build key, the repository and its
    tag store."""

    files: dict[str, bytes]
    added: dict[str, Path]
    key: str
    repo: Reference
    store: TagStore
    lock: ChosenLock


@contextmanager
def _timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block takes to ``phases[name]`` (also when it raises)."""
    started = time.monotonic()
    try:
        yield
    finally:
        phases[name] = round(phases.get(name, 0.0) + time.monotonic() - started, 3)


def _prepare(profile: Profile, config: Config, engine: Engine, options: BuildOptions, log: LineSink,
             phases: dict[str, float]) -> _Prepared:
    """Resolve the base digest (one HEAD), render the context, compute the build key and open the tag store;
    raises ImagectlError (e.g. OperationError for an unreachable mirror, InputError for a bad template)."""
    user_base = parse_reference(options.base) if options.base else None
    base = base_reference(profile, config, base=user_base)
    log(f"base image {base}")
    with _timed(phases, "resolve"):
        base_digest = resolve_base_digest(base, config, engine)
    with _timed(phases, "lock"):
        chosen = lock_for_build(profile, config, log)
        closure = lock_extras(options.extras, chosen.lock, target_for(profile, config)) if options.extras else ()
        if options.extras:
            added = sorted(f"{p.name}=={p.version}" for p in closure if p.name not in chosen.lock.versions)
            log(f"extras locked on top of the lock: {', '.join(added) or 'nothing new'}")
    name = repository_name(profile, options)

    def render() -> dict[str, bytes]:  # imports Jinja only when the context is not cached
        from ..render.dockerfile import context_files

        rendered = context_files(profile, config, base_digest=base_digest, extras=options.extras,
                                 base_image=user_base, lock=chosen.lock, extras_lock=closure,
                                 title=name if options.extras else None)
        return {n: content for n, content in rendered.items() if n != NETRC_FILE}  # the password is not cached

    with _timed(phases, "render"):
        inputs = [*template_files(config), *([config.ca_bundle] if config.ca_bundle else [])]  # the CA's content too
        files = cached("context", inputs, render,
                       extra=repr((profile, config, base_digest, options.extras, user_base, chosen.lock.sha256,
                                   closure, name)))
        netrc = pip_netrc(profile, config)  # index credentials: into the context, never into the result cache
        files = {**files, NETRC_FILE: netrc.encode()} if netrc else files
        added = context_files_on_disk(config.context_dirs)
        key = build_key(files, base_digest, config.build_args, file_digests(added))
    repo = repository(name, config)
    return _Prepared(files, added, key, repo, open_tag_store(repo, config, engine), chosen)


def build_one(profile: Profile, config: Config, engine: Engine, options: BuildOptions, log: LineSink,
              phases: dict[str, float] | None = None) -> BuildResult:
    """Build (or reuse) one profile end to end, timing each phase into ``phases`` (a fresh dict unless given:
    pass one to keep the times of a build that fails); raises BuildError naming the failing step, or another
    ImagectlError from the first steps (base digest, rendering, the tag store)."""
    started = time.monotonic()
    phases = {} if phases is None else phases
    sweep_contexts()
    prep = _prepare(profile, config, engine, options, log, phases)
    result = None
    if not options.force:
        with _timed(phases, "lookup"):
            result = _reuse(prep.key, prep.repo, prep.store, log, local=not config.registry_url)
    if result is None:
        result = _build(profile, prep.files, prep.added, prep.key, prep.repo, prep.store, config, engine, options,
                        log, phases)
    result.repository = prep.repo.familiar
    result.lock_sha256, result.lock_origin = prep.lock.lock.sha256, prep.lock.origin
    result.phases = phases
    result.seconds = round(time.monotonic() - started, 1)
    return result


def plan_one(profile: Profile, config: Config, engine: Engine, options: BuildOptions) -> PlanEntry:
    """What :func:`build_one` would do, without building, pushing or moving a tag: it resolves the base digest
    (one HEAD) and reads the tag store (one listing).  An ImagectlError on the way is a ``refused`` entry, so
    this raises nothing of imagectl's own."""
    try:
        prep = _prepare(profile, config, engine, options, lambda line: None, {})
        tag = None if options.force else prep.store.tag_with_key(prep.key)
    except ImagectlError as exc:
        return PlanEntry(profile.name, "refused", reason=str(exc))
    name = prep.repo.path.rsplit("/", 1)[-1]
    if tag is not None:
        return PlanEntry(name, "reuse", prep.repo.familiar, tag=tag, key=prep.key)
    return PlanEntry(name, "build", prep.repo.familiar, key=prep.key)


def plan_many(profiles: Sequence[Profile], config: Config, engine: Engine, options: BuildOptions) -> list[PlanEntry]:
    """:func:`plan_one` for each profile, in order."""
    return [plan_one(profile, config, engine, options) for profile in profiles]


def _reuse(key: str, repo: Reference, store: TagStore, log: LineSink, local: bool) -> BuildResult | None:
    tag = store.tag_with_key(key)
    if tag is None:
        return None
    target = store.digest(tag) or ""
    log(f"reusing {repo.familiar}:{tag}: an image with build key {key[:10]} exists")
    result = BuildResult(repo.path.rsplit("/", 1)[-1], "reused", tag, target, image_id=target if local else "")
    current = store.digest(MOVING_TAG)
    if current is None:
        _note(result, guarded_move(store, MOVING_TAG, target, tag, None, "build"))
    elif current != target:
        result.notes.append(f"{MOVING_TAG} stays on {short_digest(current)} (a rollback or newer build); "
                            "--force rebuilds and moves it")
    return result


def _build(profile: Profile, files: dict[str, bytes], added: dict[str, Path], key: str, repo: Reference,
           store: TagStore, config: Config, engine: Engine, options: BuildOptions, log: LineSink,
           phases: dict[str, float]) -> BuildResult:
    labels = {BUILD_KEY: key}
    from ..render.dockerfile import write_context

    with _timed(phases, "build"), build_context() as tmp:
        write_context(files, tmp)
        place_files(added, tmp)
        log(f"building {profile.name} (build key {key[:10]})")
        pip = PipLog()
        with Heartbeat(log, "building", pip=pip) as beat:
            image_id = engine.build(tmp, labels, config.build_network, config.build_args, options.no_cache,
                                    beat.sink)
    with _timed(phases, "check"), Heartbeat(log, "checking") as beat:
        log(f"checking {short_digest(image_id)} in a container")
        run_check(engine, image_id, config.build_network, options.gpu_check, beat.sink)
    with _timed(phases, "tag"):
        tag = immutable_tag(profile, key, image=image_id)
        try:
            existing = existing_immutable(store, tag, image_of(engine, repo, image_id, bool(config.registry_url)))
        except OperationError as exc:
            raise BuildError(str(exc), "tag") from None
        engine.tag(image_id, repo.familiar, tag)
    target = existing or image_id
    if config.registry_url and existing is None:
        log(f"pushing {repo.familiar}:{tag}")
        with _timed(phases, "push"), Heartbeat(log, "pushing") as beat:
            target = engine.push(repo.familiar, tag, beat.sink)
    elif config.registry_url:
        log(f"{repo.familiar}:{tag} already names this image ({short_digest(existing)}): not pushed again")
    with _timed(phases, "tag"):
        moved = guarded_move(store, MOVING_TAG, target, tag, store.digest(MOVING_TAG), "build")
    result = _note(BuildResult(repo.path.rsplit("/", 1)[-1], "built", tag, target, image_id=image_id,
                               downloads=list(pip.downloads)), moved)
    try:  # the registry's moving tag has moved: the local copy is a convenience, not a reason to fail
        if config.registry_url:
            engine.tag(image_id, repo.familiar, MOVING_TAG)
        info = engine.inspect(image_id)
        result.size = info.size if info else 0
    except ImagectlError as exc:
        result.notes.append(f"local tag {MOVING_TAG} not updated: {exc}")
    return result


def _note(result: BuildResult, moved: MoveResult) -> BuildResult:
    if moved.note:
        result.notes.append(f"{MOVING_TAG}: {moved.note}")
    return result


def build_many(profiles: Sequence[Profile], config: Config, engine: Engine, options: BuildOptions, jobs: int,
               make_log: Callable[[str], LineSink]) -> list[BuildResult]:
    """Build several profiles, ``jobs`` at a time; a failure of one does not stop the others: it is a ``failed``
    result with its error (and a BuildError's step and log tail, which the caller shows where the log was not
    shown as it streamed), the phases it timed and its real elapsed time.  Raises nothing of imagectl's own."""
    from concurrent.futures import ThreadPoolExecutor

    def one(profile: Profile) -> BuildResult:
        log = make_log(profile.name)
        started, phases = time.monotonic(), dict[str, float]()
        try:
            return build_one(profile, config, engine, options, log, phases)
        except BuildError as exc:
            tail = exc.log_tail.splitlines()
            failed = BuildResult(profile.name, "failed", error=f"{exc.step}: {exc}", step=exc.step, log_tail=tail,
                                 exit_code=exc.exit_code)
        except ImagectlError as exc:
            failed = BuildResult(profile.name, "failed", error=str(exc), exit_code=exc.exit_code)
        try:
            failed.repository = repository(repository_name(profile, options), config).familiar
        except ImagectlError:
            pass  # the error already says why
        failed.phases, failed.seconds = phases, round(time.monotonic() - started, 1)
        return failed

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, profiles))
