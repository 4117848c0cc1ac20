"""``imagectl build``: plan, reuse or build, check, tag, push, move the moving tag.

Every build is planned first (:mod:`.plan`: base digest, lock, extras, context, build key), all of them before any
is built, so an extra that conflicts with a profile's lock refuses the whole command before anything is built.

The ``[attest]`` key is read and proven to sign before anything is planned or built (:func:`.keys.signing_key`
of :mod:`imagectl.evidence`): a key that cannot sign is one line, exit 2, not a failure after the push.

The order after planning is what makes a failure leave nothing behind: the image is built and checked before any
tag is made; it is pushed by its digest and its attestations attached before any tag names it (:mod:`.publish`:
custody); the immutable tag is put before the moving tag moves; the moving tag moves in the registry (one manifest
PUT) before the local one.  A failure at any step raises BuildError and leaves every tag where it was; nothing is
deleted.

Reuse: the build key (see :mod:`.build_key`) is stored as a label and written into the immutable tag, so an
unchanged profile is found with one tag listing (:meth:`TagStore.tag_with_key`, local or registry).  A reused image
moves the moving tag only where the moving tag does not exist yet: ``build`` never undoes a rollback unless
something changed or ``--force`` is given.  An image found so that lacks its attestations is not reused but rebuilt
(:func:`.publish.unattested` says why).

Immutable tags are never overwritten (:mod:`.immutable`): a tag that already names another image fails the build
(step ``tag``, nothing pushed, the moving tag stays); one that already names this very image is not pushed again.

Build contexts live in directories of :mod:`.context_dirs`, swept of those killed builds left behind.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Literal

from ..config import Config
from ..engine import Engine, EngineBuild, LineSink
from ..engine.select import layout_engine
from ..errors import BuildError, ExtrasConflictError, ImagectlError, InputError, OperationError
from ..evidence.attach import BuiltImage, attest_build
from ..evidence.keys import signing_key
from ..imagecheck.run import CheckRun, run_check
from ..labels import BUILD_KEY, ENGINE
from ..lock.store import LockOrigin
from ..progress.heartbeat import Heartbeat
from ..progress.piplog import PipDownload, PipLog
from ..reference import Reference
from ..render.context import NETRC_FILE, assembled
from ..tags.managed import open_tag_store
from ..tags.moves import MoveResult, guarded_move
from ..tags.naming import MOVING_TAG, immutable_tag, repository, short_digest
from ..tags.store import TagStore
from .assembled import AssembledImage, assembled_build
from .base_digest import resolve_base_digest
from .context_dirs import build_context, sweep_contexts
from .context_write import write_context
from .early_upload import EarlyUpload
from .immutable import existing_immutable, image_of
from .publish import Unattested, name_published, push_by_digest, unattested
from .platforms import check_mode, index_key, this_host
from .size_gate import SIZE_STEP, SizeReport, expected_gate, layout_gate, pushed_gate
from .sweep import sweep_quietly
from .trace import Trace
from .plan import BuildRequest, DigestOf, Plan, plan_build

BuildStatus = Literal["built", "reused", "failed"]
PlanAction = Literal["reuse", "build", "refused"]


@dataclass(frozen=True)
class PlatformResult:
    """One platform's image of a build: its platform, manifest digest ("" until pushed, or without a registry),
    engine id, how its check ran (:meth:`~.platforms.CheckMode.describe`: ``native``, ``emulated by
    qemu-aarch64``) and how long it took (None: it did not run here, a reused image)."""

    platform: str
    digest: str = ""
    image_id: str = ""
    check: str = ""
    check_seconds: float | None = None


@dataclass
class BuildResult:
    """One line of the summary table; ``phases`` holds the seconds each timed phase took (resolve, lock, render,
    lookup, build, check, tag, push: those that ran); ``downloads`` the wheels pip downloaded in the build (none for
    a reused image or a fully cached build)."""

    profile: str
    status: BuildStatus
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
    lock_origin: LockOrigin | Literal["build-time", ""] = ""  # "" until known
    exit_code: int = 0  # of a failure: 2 for bad input (a conflicting extra), else 1
    downloads: list[PipDownload] = field(default_factory=list)
    engine: str = ""  # the engine that built it ("" for a reused image)
    reproducible: bool | None = None  # whether that engine builds reproducibly (None: nothing was built)
    pushed_bytes: int | None = None  # the blob bytes the push sent (None: nothing pushed)
    platforms: list[PlatformResult] = field(default_factory=list)  # each platform's image (an index: several)
    sizes: SizeReport | None = None  # the expected size, where a size budget applies (.size_gate)


@dataclass(frozen=True)
class PlanEntry:
    """What ``build`` would do for one profile: ``reuse`` (``tag``), ``build`` (``key``) or ``refused``
    (``reason``)."""

    profile: str
    action: PlanAction
    repository: str = ""
    tag: str = ""
    key: str = ""
    reason: str = ""
    sizes: SizeReport | None = None  # the expected size of its image (per platform) and the budget's verdict


_NOT_MOVED = (f"{MOVING_TAG} not moved: an image of one platform ({{platform}}) of several, for "
              "'imagectl index' to assemble (or build every platform at once: --platform P1,P2)")


def base_resolver(config: Config, engine: Engine) -> DigestOf:
    """How ``build`` and ``build --plan`` pin a base: one HEAD at its registry, else the engine's copy."""
    return lambda base: resolve_base_digest(base, config, engine)


def plan_entry(plan: Plan, store: TagStore, plans: Sequence[Plan] = ()) -> PlanEntry:
    """What :func:`build_one` would do with ``plan``: reuse the image with its build key (one tag listing), unless
    ``--force``, else build it.  With several ``plans`` (one per platform) the key is their index's."""
    name = _short_name(plan.repository)
    key = index_key({p.platform: p.key for p in plans}) if len(plans) > 1 else plan.key
    tag = None if plan.request.options.force else store.tag_with_key(key)
    if tag is not None:
        return PlanEntry(name, "reuse", plan.repository.familiar, tag=tag, key=key)
    return PlanEntry(name, "build", plan.repository.familiar, key=key)


def plan_many(requests: Sequence[BuildRequest], config: Config, engine: Engine) -> list[PlanEntry]:
    """What ``build`` would do for each request, in order, without building, pushing or moving a tag: each plan
    resolves its base digest (one HEAD) and reads its tag store (one listing).  An ImagectlError on the way is a
    ``refused`` entry, so this raises nothing of imagectl's own."""
    entries = []
    for request in requests:
        try:
            plans = [plan_build(request, config, base_resolver(config, engine), Trace(), platform)
                     for platform in request.platforms]
            sizes = expected_gate(plans, config, Trace().log, always=True)  # read, budget or not
            entry = (PlanEntry(request.profile.name, "refused", reason=f"{SIZE_STEP}: {sizes.refusal}") if sizes
                     and sizes.refusal else plan_entry(plans[0], open_tag_store(plans[0].repository, config, engine),
                                                       plans))
            entries.append(replace(entry, sizes=sizes))
        except ImagectlError as exc:
            entries.append(PlanEntry(request.profile.name, "refused", reason=str(exc)))
    return entries


def build_one(plan: Plan, config: Config, engine: Engine, trace: Trace) -> BuildResult:
    """Build (or reuse) one planned image, logging and timing each phase into ``trace``; raises BuildError naming
    the failing step, or another ImagectlError of the tag store."""
    store = open_tag_store(plan.repository, config, engine)
    found: BuildResult | Unattested | None = None
    if not plan.request.options.force:
        with trace.timed("lookup"):
            found = _reuse(plan, store, config, trace.log)
    if isinstance(found, BuildResult):
        return _finish(plan, found)
    return _finish(plan, rebuilt(found, _build(plan, store, config, engine, trace)))


def rebuilt(found: Unattested | None, result: BuildResult) -> BuildResult:
    """``result`` of a build, with a first note of the unattested image it rebuilt (``found``), if any."""
    if found is not None:
        result.notes.insert(0, found.note(result.digest))
    return result


def _finish(plan: Plan, result: BuildResult) -> BuildResult:
    """``result`` with the repository, lock and base notes of ``plan`` (of an index: its first platform's)."""
    result.repository = plan.repository.familiar
    result.lock_sha256, result.lock_origin = plan.lock.lock.sha256, plan.lock.origin
    result.notes[:0] = plan.notes  # the base's warnings (end of life, moved or gone upstream) first
    return result


def _reuse(plan: Plan, store: TagStore, config: Config, log: LineSink) -> BuildResult | Unattested | None:
    return reuse_key(plan.key, plan.repository, store, log, config=config, moves_latest=plan.request.moves_latest)


def reuse_key(key: str, repo: Reference, store: TagStore, log: LineSink, *, config: Config,  # noqa: PLR0913
              moves_latest: bool = True) -> BuildResult | Unattested | None:
    """The ``reused`` result of the image (or index) with build key ``key`` in ``store``, its moving tag moved onto
    it where the moving tag does not exist yet (and ``moves_latest``); None when there is none; the
    :class:`~.publish.Unattested` image when it lacks attestations (it is not reused: the caller rebuilds it, and
    no tag moves onto it)."""
    tag = store.tag_with_key(key)
    if tag is None:
        return None
    target = store.digest(tag) or ""
    bare = unattested(store, config, repo, tag, target) if target else None
    if bare is not None:
        log(bare.line(repo))
        return bare
    log(f"reusing {repo.familiar}:{tag}: an image with build key {key[:10]} exists")
    local = not config.registry_url
    result = BuildResult(_short_name(repo), "reused", tag, target, image_id=target if local else "")
    if not moves_latest:
        return result
    current = store.digest(MOVING_TAG)
    if current is None:
        _note(result, guarded_move(store, MOVING_TAG, target, tag, None, "build"))
    elif current != target:
        result.notes.append(f"{MOVING_TAG} stays on {short_digest(current)} (a rollback or newer build); "
                            "--force rebuilds and moves it")
    return result


def _short_name(repo: Reference) -> str:
    """The repository's last path component: the profile name (plus a suffix for an image with extras)."""
    return repo.path.rsplit("/", 1)[-1]


def engine_build(plan: Plan, config: Config, engine: Engine, trace: Trace) -> tuple[str, PipLog]:
    """Write the plan's context (sweeping those killed builds left behind first) and build it with the engine,
    every timestamp set to the plan's SOURCE_DATE_EPOCH; ``(image id, what pip did)``.  Nothing is tagged or
    pushed.  Raises BuildError (step ``build``), also when the context cannot be written (a full disk)."""
    log = trace.log
    sweep_contexts()
    with trace.timed("build"), build_context() as tmp:
        try:
            write_context(plan.context(), plan.added, tmp, link=True)
        except OSError as exc:
            raise BuildError(f"cannot write the build context in {tmp}: {exc.strerror or exc}", "build") from None
        log(f"building {plan.request.profile.name} (build key {plan.key[:10]})")
        pip = PipLog()
        with Heartbeat(log, "building", pip=pip) as beat:
            spec = EngineBuild({BUILD_KEY: plan.key, ENGINE: engine.name}, config.build_network, config.build_args,
                               no_cache=plan.request.options.no_cache, source_date_epoch=plan.source_date_epoch,
                               platform=None if plan.platform == this_host() else plan.platform,
                               cache_repo=config.build_cache)
            image_id = engine.build(tmp, spec, beat.sink)
    return image_id, pip


def check_built(plan: Plan, config: Config, engine: Engine, image_id: str, trace: Trace) -> tuple[CheckRun,
                                                                                                  PlatformResult]:
    """Run the in-image check of ``plan``'s freshly built image, natively or under QEMU (:func:`check_mode`), and
    say which and how long it took; raises BuildError (step ``check``) when it fails or cannot run here (an image
    that was not checked is never tagged)."""
    log, mode = trace.log, check_mode(plan.platform, this_host())
    if mode.how == "not checked":
        raise BuildError(f"{mode.describe()}: this host has no QEMU handler for it in binfmt_misc", "check")
    started = time.monotonic()
    with trace.timed("check"), Heartbeat(log, "checking") as beat:
        log(f"checking {short_digest(image_id)} ({plan.platform}, {mode.describe()}) in a container")
        checked = run_check(engine, image_id, config.build_network, beat.sink, gpu=plan.request.options.gpu_check)
    seconds = round(time.monotonic() - started, 1)
    log(f"check: {plan.platform} ran {mode.describe()} in {seconds:.1f} s")
    return checked, PlatformResult(plan.platform, image_id=image_id, check=mode.describe(), check_seconds=seconds)


@dataclass(frozen=True)
class FreshImage:
    """A freshly built image: its engine id, what pip did (nothing for an assembled one), the assembled image (its
    OCI layout, pushed as it is, and its layout engine), else None, and the upload of its layers that started while
    it was made."""

    image_id: str
    pip: PipLog
    assembled: AssembledImage | None = None
    early: EarlyUpload | None = None


@contextlib.contextmanager
def built_image(plan: Plan, config: Config, engine: Engine, trace: Trace, *,
                upload_to: Reference | None = None) -> Iterator[FreshImage]:
    """Build ``plan``'s image: assembled (:mod:`.assembled`, its layout kept until the block ends) where the plan
    renders so (:func:`imagectl.render.context.assembled`), else by the engine from the Dockerfile alone.
    ``upload_to``: the repository the image will be pushed to; an assembled image's layers are uploaded there as
    they are written (:mod:`.early_upload`; stopped when the block ends).  Raises BuildError naming the step, and
    for an assembled build on an engine that is no layout engine (:func:`~imagectl.engine.select.layout_engine`)."""
    if not assembled(plan.spec, config, NETRC_FILE if plan.netrc else ""):
        image_id, pip = engine_build(plan, config, engine, trace)
        yield FreshImage(image_id, pip)
        return
    layouts = layout_engine(engine)
    if layouts is None:
        raise BuildError(f"[build] install = \"assembled\" needs the buildah engine; the {engine.name} engine builds "
                         "the lock with pip (set [build] install = \"pip\")", "build")
    sweep_quietly(layouts, trace.log)  # what killed builds left: their folders (GBs of layers), containers, layers
    try:
        work = contextlib.ExitStack()
        folder = work.enter_context(build_context())
    except OSError as exc:
        raise BuildError(f"cannot make a folder to assemble the image in: {exc.strerror or exc}", "build") from None
    with work:
        early = None
        if upload_to is not None:
            early = EarlyUpload.to(upload_to, config, trace.log)
            work.callback(early.close)
        with assembled_build(plan, config, layouts, trace, folder, early) as image:
            yield FreshImage(image.image_id, PipLog(), image, early)


def _build(plan: Plan, store: TagStore, config: Config, engine: Engine, trace: Trace) -> BuildResult:
    upload_to = plan.repository if config.registry_url else None
    with built_image(plan, config, engine, trace, upload_to=upload_to) as built:
        return _check_tag_push(plan, store, config, engine, trace, built)


def _check_tag_push(plan: Plan, store: TagStore, config: Config, engine: Engine, trace: Trace,  # noqa: PLR0913
                    built: FreshImage) -> BuildResult:
    repo, publish, log = plan.repository, bool(config.registry_url), trace.log
    image_id, pip = built.image_id, built.pip
    checked, platform = check_built(plan, config, engine, image_id, trace)
    if built.assembled is not None:  # the size budget, on the image as built: before it is pushed or tagged
        layout_gate(plan, config, built.assembled.layout)
    this_image = image_of(engine, repo, image_id, registry=publish)
    with trace.timed("tag"):
        tag = immutable_tag(plan.request.profile, plan.key, image=image_id)
        try:
            existing = existing_immutable(store, tag, this_image)
        except OperationError as exc:
            raise BuildError(str(exc), "tag") from None
        if not publish:
            engine.tag(image_id, repo.familiar, tag)
    target, pushed_bytes = existing or image_id, None
    if publish and existing is None:  # by digest: no tag names it before its attestations are attached
        log(f"pushing {repo.familiar}:{tag} by its digest; tagged once its attestations are attached")
        with trace.timed("push"), Heartbeat(log, "pushing") as beat:
            early = built.early.finish() if built.early else None  # the layers sent while the image was made
            pushed = push_by_digest(engine, image_id, repo, config, beat.sink,
                                    built.assembled.layout if built.assembled else None)
        target, pushed_bytes = pushed.digest, pushed.uploaded + (early.uploaded if early else 0)
        if built.assembled is None:  # the size budget, on the pushed image: before its attestations and tags
            pushed_gate(plan, config, repo, target)
    elif publish:
        log(f"{repo.familiar}:{tag} already names this image ({short_digest(existing)}): not pushed again")
    attested = attest_build(plan, config, engine, BuiltImage(image_id, target, checked), trace)  # SBOM, provenance
    if publish:
        with trace.timed("tag"):
            name_published(store, tag, target, this_image)
            engine.tag(image_id, repo.familiar, tag)
    result = BuildResult(_short_name(repo), "built", tag, target, image_id=image_id, notes=attested,
                         downloads=list(pip.downloads), engine=engine.name, reproducible=engine.reproducible,
                         pushed_bytes=pushed_bytes, platforms=[replace(platform, digest=target if publish else "")])
    if pushed_bytes is not None and engine.name == "docker" and config.registry_compression != "gzip":
        result.notes.append(f"[registry] compression = {config.registry_compression} is the buildah engine's: the "
                            "Docker engine pushed gzip layers")
    if not plan.request.moves_latest:
        result.notes.append(_NOT_MOVED.format(platform=plan.platform))
        return result
    with trace.timed("tag"):
        _note(result, guarded_move(store, MOVING_TAG, target, tag, store.digest(MOVING_TAG), "build"))
    try:  # the registry's moving tag has moved: the local copy is a convenience, not a reason to fail
        if publish:
            engine.tag(image_id, repo.familiar, MOVING_TAG)
        else:
            _copy_to_docker(engine, image_id, repo.familiar, tag, result)
        info = engine.inspect(image_id)
        result.size = info.size if info else 0
    except ImagectlError as exc:
        result.notes.append(f"local tag {MOVING_TAG} not updated: {exc}")
    return result


def _copy_to_docker(engine: Engine, image_id: str, name: str, tag: str, result: BuildResult) -> None:
    """A local-only build of an engine without a daemon is also copied into a local Docker daemon where one
    answers, under the same tags, so ``docker run`` finds it; raises EngineError when the copy fails."""
    if engine.share_with_docker(image_id, name, (tag, MOVING_TAG)):
        result.notes.append(f"also copied into the local Docker daemon as {name}:{tag} and :{MOVING_TAG}")


def _note(result: BuildResult, moved: MoveResult) -> BuildResult:
    if moved.note:
        result.notes.append(f"{MOVING_TAG}: {moved.note}")
    return result


@dataclass
class _Job:
    """One request on its way through ``build_many``: its trace, repository, start, and its plan or what stopped
    it (a conflicting extra, or the failed result)."""

    request: BuildRequest
    trace: Trace
    repository: str = ""
    started: float = field(default_factory=time.monotonic)
    plan: Plan | None = None
    plans: tuple[Plan, ...] = ()  # one per platform (the first is ``plan``)
    conflict: ExtrasConflictError | None = None
    result: BuildResult | None = None
    sizes: SizeReport | None = None  # where a size budget applies


def _job(request: BuildRequest, config: Config, make_log: Callable[[str], LineSink]) -> _Job:
    job = _Job(request, Trace(make_log(request.profile.name), hold=bool(request.options.extras)))
    with contextlib.suppress(ImagectlError):  # a failure says why the repository cannot be named
        job.repository = repository(request.repository_name, config).familiar
    return job


IndexBuilder = Callable[[Sequence[Plan], Config, Engine, Trace], BuildResult]
"""Builds the plans of several platforms into one image index (:func:`imagectl.images.multiplatform.build_index`,
which builds on this module, so the caller hands it in)."""


def build_many(requests: Sequence[BuildRequest], config: Config, engine: Engine, jobs: int,  # noqa: PLR0913 - imports one way
               make_log: Callable[[str], LineSink], index_builder: IndexBuilder | None = None) -> list[BuildResult]:
    """Plan every request, then build the planned ones, ``jobs`` at a time; a request of several platforms is built
    by ``index_builder`` (a failed result without one).  Raises InputError, before anything is planned, when the
    ``[attest]`` key cannot sign (:func:`~imagectl.evidence.keys.signing_key`; with a registry: attestations are
    attached only there), and before anything is built, when an extra names a package of a profile's lock at
    another version; any other failure of one request
    does not stop the others: it is a ``failed`` result with its error (and a BuildError's step and log tail, which
    the caller shows where the log was not shown as it streamed), the phases it timed and its real elapsed time."""
    if config.registry_url:  # the key attestations are signed with: proven before anything is planned or built
        signing_key(config)
    work = [_job(request, config, make_log) for request in requests]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        try:
            list(pool.map(lambda job: _plan_job(job, config, engine), work))
            for job in work:
                if job.conflict is not None:
                    raise InputError(f"{job.request.profile.name}: {job.conflict}")
            for job in work:
                job.trace.release()
            return list(pool.map(lambda job: _build_job(job, config, engine, index_builder), work))
        except BaseException as exc:  # Ctrl-C reaches this thread: the builds on the pool's end on their stops
            for job in work:
                job.trace.stop.set(exc)
            raise


def _plan_job(job: _Job, config: Config, engine: Engine) -> None:
    """Plan ``job`` in place: its plan, its conflicting extra, or its failed result."""
    try:
        job.plans = tuple(plan_build(job.request, config, base_resolver(config, engine), job.trace, platform)
                          for platform in job.request.platforms)
        job.sizes = expected_gate(job.plans, config, job.trace.log)  # over the budget: nothing is built
        if job.sizes is not None and job.sizes.refusal:
            raise BuildError(job.sizes.refusal, SIZE_STEP)
        job.plan = job.plans[0]
    except ExtrasConflictError as exc:
        job.conflict = exc
    except ImagectlError as exc:
        job.result = _failed(job, exc)


def _build_job(job: _Job, config: Config, engine: Engine, index_builder: IndexBuilder | None) -> BuildResult:
    """Build ``job``'s plan (or return its planning failure), with its phases and its seconds since it started."""
    if job.plan is not None:
        try:
            if len(job.plans) > 1:
                if index_builder is None:
                    raise OperationError("building several platforms needs an index builder (a caller's bug)")
                job.result = _finish(job.plan, index_builder(job.plans, config, engine, job.trace))
            else:
                job.result = build_one(job.plan, config, engine, job.trace)
        except ImagectlError as exc:
            job.result = _failed(job, exc)
    result = job.result
    assert result is not None  # a job was planned and built, or failed
    result.phases, result.seconds = job.trace.seconds, round(time.monotonic() - job.started, 1)
    result.sizes = result.sizes or job.sizes
    return result


def _failed(job: _Job, exc: ImagectlError) -> BuildResult:
    """The failed result of ``exc``: a BuildError's step, message and log tail, or any other error's message."""
    step, tail = (exc.step, exc.log_tail.splitlines()) if isinstance(exc, BuildError) else ("", [])
    error = f"{step}: {exc}" if step else str(exc)
    return BuildResult(job.request.profile.name, "failed", error=error, step=step, log_tail=tail,
                       exit_code=exc.exit_code, repository=job.repository)
