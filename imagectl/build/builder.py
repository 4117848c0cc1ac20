"""``imagectl build``: render, reuse or build, check, tag, push, move the moving tag.

The order is what makes a failure leave nothing behind: the image is built and checked before any tag is
made; the immutable tag is pushed before the moving tag moves; the moving tag moves in the registry (one
manifest PUT) before the local one.  A failure at any step raises BuildError and leaves every moving tag
where it was; nothing is deleted.

Reuse: the build key (see :mod:`.key`) is stored as a label and written into the immutable tag, so an
unchanged profile is found with one engine query (local) or one tag listing (registry).  A reused image
moves the moving tag only where the moving tag does not exist yet: ``build`` never undoes a rollback unless
something changed or ``--force`` is given.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..cache import cached
from ..config import Config
from ..errors import BuildError, ImagectlError, OperationError
from ..matrix.model import Profile
from ..reference import Reference, parse_reference
from ..render.context import base_reference
from ..resources import template_files
from ..tags.naming import MOVING_TAG, immutable_tag, repository
from ..tags.managed import open_tag_store
from ..tags.moves import MoveResult, guarded_move
from ..tags.store import RegistryTagStore, TagStore
from .base import resolve_base_digest
from .check import Finding, compare, expectations, failed, format_findings, parse_report
from .engine import Engine, LineSink
from .files import context_files_on_disk, file_digests, place_files
from .key import KEY_LABEL, build_key

CHECK_COMMAND = ["python", "/opt/imagectl/check.py"]


@dataclass(frozen=True)
class BuildOptions:
    """What the user asked for."""

    push: bool = False
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


@dataclass
class BuildResult:
    """One line of the summary table."""

    profile: str
    status: str  # built, reused, failed
    tag: str = ""
    digest: str = ""
    size: int = 0
    seconds: float = 0.0
    error: str = ""
    notes: list[str] = field(default_factory=list)


def build_one(profile: Profile, config: Config, engine: Engine, options: BuildOptions, log: LineSink) -> BuildResult:
    """Build (or reuse) one profile end to end; raises BuildError naming the failing step."""
    started = time.monotonic()
    user_base = parse_reference(options.base) if options.base else None
    base = base_reference(profile, config, base=user_base)
    log(f"base image {base}")
    base_digest = resolve_base_digest(base, config, engine)
    def render() -> dict[str, bytes]:  # imports Jinja only when the context is not cached
        from ..render.dockerfile import context_files

        return context_files(profile, config, base_digest=base_digest, extras=options.extras, base_image=user_base)

    files = cached("context", template_files(config), render, extra=repr((profile, config, base_digest, options.extras, user_base)))
    added = context_files_on_disk(config.context_dirs)
    key = build_key(files, base_digest, config.build_args, file_digests(added))
    repo = repository(repository_name(profile, options), config)
    store = open_tag_store(repo, config, lambda: engine)
    result = None if options.force else _reuse(profile, key, repo, store, engine, options, log)
    if result is None:
        result = _build(profile, files, added, key, repo, store, config, engine, options, log)
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _reuse(profile: Profile, key: str, repo: Reference, store: TagStore, engine: Engine,
           options: BuildOptions, log: LineSink) -> BuildResult | None:
    suffix = f"-{key[:10]}"
    if isinstance(store, RegistryTagStore):
        tag = next((t for t in store.tags() if t.endswith(suffix)), None)
    else:
        tag = _local_tag_with_key(engine, repo, key)
    if tag is None:
        return None
    target = store.digest(tag) or ""
    log(f"reusing {repo.familiar}:{tag}: an image with build key {key[:10]} exists")
    result = BuildResult(repo.path.rsplit("/", 1)[-1], "reused", tag, target)
    current = store.digest(MOVING_TAG)
    if current is None:
        _note(result, guarded_move(store, MOVING_TAG, target, tag, None, "build"))
    elif current != target:
        result.notes.append(f"{MOVING_TAG} stays on {current[:19]} (a rollback or newer build); --force rebuilds and moves it")
    return result


def _local_tag_with_key(engine: Engine, repo: Reference, key: str) -> str | None:
    """The local immutable tag of ``repo`` whose image has build key ``key``: the moving tag's image is asked
    first (one inspect: the usual case of an unchanged profile), then every image with that label."""
    current = engine.inspect(f"{repo.familiar}:{MOVING_TAG}")
    candidates = [current] if current and current.labels.get(KEY_LABEL) == key else engine.find_by_label(KEY_LABEL, key)
    prefix = f"{repo.familiar}:"
    tags = [t[len(prefix):] for info in candidates for t in info.tags if t.startswith(prefix)]
    return next((t for t in tags if t.endswith(f"-{key[:10]}")), None)


def _build(profile: Profile, files: dict[str, bytes], added: dict[str, Path], key: str, repo: Reference,
           store: TagStore, config: Config, engine: Engine, options: BuildOptions, log: LineSink) -> BuildResult:
    labels = {KEY_LABEL: key}
    from ..render.dockerfile import write_context

    with tempfile.TemporaryDirectory(prefix="imagectl-") as tmp:
        write_context(files, Path(tmp))
        place_files(added, Path(tmp))
        log(f"building {profile.name} (build key {key[:10]})")
        image_id = engine.build(Path(tmp), labels, config.build_network, config.build_args, options.no_cache, log)
    run_check(engine, image_id, config.build_network, options.gpu_check, log)
    tag = immutable_tag(profile, key)
    engine.tag(image_id, repo.familiar, tag)
    target = image_id
    if config.registry_url:
        log(f"pushing {repo.familiar}:{tag}")
        target = engine.push(repo.familiar, tag, log)
    moved = guarded_move(store, MOVING_TAG, target, tag, store.digest(MOVING_TAG), "build")
    result = _note(BuildResult(repo.path.rsplit("/", 1)[-1], "built", tag, target), moved)
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


def check_findings(engine: Engine, image: str, labels: dict[str, str], network: str | None, gpu: bool) -> list[Finding]:
    """Run the in-image check in a container of ``image`` and compare its report with ``labels``.

    Raises OperationError when the image has no imagectl labels or the check script does not run.
    """
    expect = expectations(labels)
    status, output = engine.run(image, CHECK_COMMAND + (["--gpu"] if gpu else []), network, gpus=gpu)
    if status != 0:
        raise OperationError(f"the in-image check exited with status {status}: {output.strip()[-300:]}")
    return compare(expect, parse_report(output))


def run_check(engine: Engine, image: str, network: str | None, gpu: bool, log: LineSink) -> list[Finding]:
    """The in-image check of a fresh build; raises BuildError (step ``check``) on any mismatch."""
    info = engine.inspect(image)
    try:
        findings = check_findings(engine, image, dict(info.labels) if info else {}, network, gpu)
    except OperationError as exc:
        raise BuildError(str(exc), "check") from None
    report = format_findings(findings)
    for line in report.splitlines():
        log(f"check: {line}")
    bad = failed(findings)
    if bad:
        raise BuildError(f"in-image check failed: {'; '.join(f'{f.what}: expected {f.expected}, found {f.actual}' for f in bad)}", "check", report)
    return findings


def build_many(profiles: Sequence[Profile], config: Config, engine: Engine, options: BuildOptions, jobs: int,
               make_log: Callable[[str], LineSink]) -> list[BuildResult]:
    """Build several profiles, ``jobs`` at a time; a failure of one does not stop the others."""
    from concurrent.futures import ThreadPoolExecutor

    def one(profile: Profile) -> BuildResult:
        log = make_log(profile.name)
        try:
            return build_one(profile, config, engine, options, log)
        except BuildError as exc:
            for line in exc.log_tail.splitlines()[-20:]:
                log(f"| {line}")
            return BuildResult(profile.name, "failed", error=f"{exc.step}: {exc}")
        except ImagectlError as exc:
            return BuildResult(profile.name, "failed", error=str(exc))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, profiles))


def summary_table(results: Sequence[BuildResult]) -> str:
    """The final table: profile, tag, digest, size, seconds, built or reused."""
    from ..describe import format_table

    rows = [{
        "profile": r.profile, "status": r.status, "tag": r.tag or "-", "digest": (r.digest or "-")[:19],
        "size": f"{r.size / 1e6:.0f} MB" if r.size else "-", "seconds": f"{r.seconds:.1f}",
    } for r in results]
    return format_table(rows, ("profile", "status", "tag", "digest", "size", "seconds"))
