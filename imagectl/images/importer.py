"""``imagectl import``: take a team's own image into a managed repository, with history, rollback and promotion.

1. **Read** the source's configuration without pulling where possible: a reference whose first component is
   a registry host (``ghcr.io/team/img:1``, ``127.0.0.1:5000/x``, ``localhost/x``) is read through the
   registry API (one manifest GET, one config blob GET); any other reference is a local engine image.
2. **Check** what it really contains: the in-image check script of the *named profile* is rendered and run
   in a throw-away container of the image (pulled into the engine first when it is only in a registry), with
   the image's own ``python`` (else ``python3``).  A foreign image has no imagectl labels, so the report is
   compared with the profile from the matrix (:func:`expectations_from_profile`), and the profiles whose
   framework, version, CUDA and Python the report matches are listed (:func:`matching_profiles`).
   Disagreements are warnings; with ``strict`` they fail the import (OperationError) before anything is
   copied.  ``check=False`` skips this step (no engine needed between two registries).  A source that is an
   image index (a multi-platform image) is checked by its child for this host's platform, pulled by that
   child's digest; a note says which platform ran, and an index without one for this host cannot be checked
   here (OperationError: import it with ``check=False``).
3. **Copy** it into ``[REGISTRY/]NAMESPACE/NAME`` under an immutable tag of the naming scheme: the profile's
   versions, the time of the import, and as build key the hex of the source manifest digest (a local image:
   of its first repository digest, else of its image id).  Registry to registry: :func:`copy_image` (blobs
   mounted within one registry, streamed across registries, manifest bytes unchanged so the digest stays).
   An index is copied whole: every child manifest and its blobs, then the index (digest unchanged).
   Local image to registry: tag and push.  No registry configured: a local tag.  A source imported before
   (same key) is not copied again.  An immutable tag is never overwritten: right before it is written it is
   read (one HEAD); naming another image fails the import (OperationError, nothing copied), naming this very
   image skips the copy.
4. **Move** the moving tag only when the repository has none yet (as a reused build does), or always with
   ``set_latest``.  One Move with action ``import`` is logged: the moving tag's when it moved, else the
   immutable tag's own (so the log still says who imported what, when).

The engine is used only where a step needs it (the check, a local source, a copy into the local engine): pass
a :class:`imagectl.engine.select.LazyEngine` and an import between two registries with ``check=False`` never
connects to one.  Everything here returns data; the CLI formats it.
"""

from __future__ import annotations

import platform as host
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..config import Config
from ..engine import Engine, LineSink
from ..errors import InputError, OperationError
from ..grammar import major_minor
from ..image_spec import ImageSpec
from ..imagecheck.compare import Finding, compare, failed, finding_text
from ..imagecheck.run import run_foreign_check
from ..labels import PROFILE, expectations_from_profile
from ..matrix.model import Framework, Matrix, Profile, Release, Variant
from ..matrix.names import build_profile
from ..matrix.platforms import platform_of_machine
from ..reference import Reference, names_registry, parse_reference
from ..tags.managed import ManagedRepository, open_tag_store
from ..tags.moves import MoveResult, guarded_move
from ..tags.naming import MOVING_TAG, immutable_tag, short_digest
from ..tags.store import Move, TagStore, now, who
from .immutable import existing_immutable, image_of

_SHOWN = 5  # disagreements spelled out in a note


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    """What the user asked for."""

    strict: bool = False  # disagreements with the profile fail the import
    set_latest: bool = False  # move the moving tag even when it exists
    check: bool = True  # run the in-image check


@dataclass(frozen=True)
class ImportEnvironment:
    """What an import works with: the matrix its profiles come from, the configuration (registry, network), the
    engine (used only by the steps that need one, see the module docstring) and where its progress lines go."""

    matrix: Matrix
    config: Config
    engine: Engine
    log: LineSink


@dataclass(frozen=True)
class SourceImage:
    """The image to import as found: where, its digest (registry) or id (engine), labels, creation time."""

    reference: Reference
    _: KW_ONLY
    in_registry: bool
    digest: str
    labels: Mapping[str, str]
    created: str
    key: str  # hex digits the immutable tag's key part is taken from
    platforms: tuple[str, ...] = ()  # an image index's platforms (() for a single image)
    host_child: str = ""  # an index's image for this host's platform, what the check pulls ("" for none)


@dataclass
class ImportResult:
    """What an import found and did."""

    source: SourceImage
    repository: str
    _: KW_ONLY
    tag: str = ""
    digest: str = ""
    checked: bool = False
    report: Mapping[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    matches: list[str] = field(default_factory=list)
    reused: bool = False
    copied: str = ""
    move: MoveResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def disagreements(self) -> list[Finding]:
        """The findings where the image disagrees with the profile (errors, not warnings)."""
        return failed(self.findings)


def report_facts(report: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(framework, release, CUDA major.minor, Python major.minor) a check report found ("" where unknown)."""
    fw = report.get("framework") or {}
    return (str(fw.get("name") or ""), str(fw.get("version") or "").split("+")[0], major_minor(fw.get("cuda")) or "",
            major_minor(report.get("python")) or "")


def profile_matches(profile: Profile, report: Mapping[str, Any]) -> bool:
    """Whether the check ``report`` found ``profile``'s framework, release, CUDA build and Python (pure)."""
    wanted = (profile.framework.name, profile.release.version, profile.variant.cuda, profile.python)
    return report_facts(report) == wanted


def matching_profiles(report: Mapping[str, Any], matrix: Matrix) -> list[str]:
    """The profiles whose framework, release, CUDA build (major.minor) and Python the check ``report``
    matches (pure); [] when it matches no profile of the matrix."""
    name, version, cuda, python = report_facts(report)
    fw = matrix.frameworks.get(name)
    if fw is None or not version:
        return []
    found = []
    for release in fw.releases:
        if release.version != version or python not in release.python:
            continue
        found += [_profile_name(matrix, fw, release, variant, python) for variant in release.variants
                  if variant.cuda == cuda]
    return found


def _profile_name(matrix: Matrix, fw: Framework, release: Release, variant: Variant, python: str) -> str:
    """The name of the profile of ``variant`` of ``release`` on ``python``: by the minor version for the newest
    release of its minor, else by the full version."""
    newest = next(r for r in fw.releases if r.minor == release.minor) is release
    version = release.minor if newest else release.version
    try:
        return build_profile(matrix, fw, release, variant, version, python=python).name
    except InputError:  # no base image or OS Python for it: name the combination plainly
        return f"{fw.name}-{version}-{fw.tag_of(variant.cuda)}-py{python}"


def read_source(text: str, config: Config, engine: Engine) -> SourceImage:
    """The source image ``text`` names, read without pulling (registry API, or the engine's inspect).

    Raises ValidationError for a malformed reference, NotFoundError/AuthError/RegistryError from its
    registry, OperationError when a local image does not exist, EngineError when the engine is unreachable.
    """
    ref = parse_reference(text)
    if names_registry(text):
        from ..registry.access import client_for  # here: the registry package loads requests

        client = client_for(ref.domain, config.insecure_hosts, config.registry_timeout)
        manifest = client.get_manifest(ref.path, ref.digest or ref.tag or "latest")
        image = client.get_image_config(ref.path, manifest)  # an index's: its linux/amd64 child's (else the first)
        created = image.created.isoformat() if image.created else ""
        return SourceImage(ref, in_registry=True, digest=manifest.digest, labels=dict(image.labels), created=created,
                           key=manifest.digest.split(":")[-1], **_index_facts(manifest))
    info = engine.inspect(text)
    if info is None:
        raise OperationError(f"import: the local engine has no image {text} (to import from a registry, name it: "
                             f"docker.io/{ref.path}, ghcr.io/..., HOST:PORT/...)")
    key_from = info.repo_digests[0].rpartition("@")[2] if info.repo_digests else info.id
    return SourceImage(ref, in_registry=False, digest=info.id, labels=dict(info.labels), created=info.created,
                       key=key_from.split(":")[-1])


def _index_facts(manifest: Any) -> dict[str, Any]:
    """``platforms`` and ``host_child`` of a source ``manifest`` that is an image index (nothing for an image)."""
    from ..registry.manifest import is_platform_entry, platform_name  # the registry package loads requests

    if not manifest.is_index:
        return {}
    entries = [c for c in manifest.children() if is_platform_entry(c)]
    here = platform_of_machine(host.machine())
    child = next((c.digest for c in entries if platform_name(c.platform) == here), "")
    return {"platforms": tuple(platform_name(c.platform) or short_digest(c.digest) for c in entries),
            "host_child": child}


def check_script(profile: Profile, config: Config) -> str:
    """The in-image check script of ``profile`` (the one its builds carry); raises TemplateError."""
    from ..render.dockerfile import context_files  # here: rendering loads jinja2

    return context_files(ImageSpec(profile), config)["imagectl-check.py"].decode()


def import_image(text: str, managed: ManagedRepository, options: ImportOptions, env: ImportEnvironment) -> ImportResult:
    """Import the image ``text`` into ``managed`` (steps in the module docstring).

    Raises OperationError when ``strict`` and the image disagrees with the profile (nothing copied),
    ValidationError/InputError for bad input, RegistryError/EngineError when a copy or the check fails.
    """
    source = read_source(text, env.config, env.engine)
    where = "registry" if source.in_registry else "local engine"
    env.log(f"{text}: {short_digest(source.digest)} in the {where}, created {source.created or 'at an unknown time'}")
    result = ImportResult(source, managed.reference.familiar)
    engine_image = _check(result, managed, env) if options.check else None
    labelled = source.labels.get(PROFILE)
    if labelled and labelled != managed.profile.name:
        result.notes.append(f"its imagectl labels say it was built as {labelled}")
    _judge(result, managed, options)
    store = open_tag_store(managed.reference, env.config, env.engine)
    existing = store.tag_with_key(source.key)
    if existing:
        result.tag, result.digest, result.reused = existing, store.digest(existing) or "", True
        env.log(f"{source.reference.familiar} was imported before as {existing}")
    else:
        result.tag = immutable_tag(managed.profile, source.key, datetime.now(timezone.utc))
        result.digest, result.copied = _copy(result, managed.reference, store, env, engine_image)
    result.move = _move_latest(store, result, options)
    return result


def _check(result: ImportResult, managed: ManagedRepository, env: ImportEnvironment) -> str:
    """Run the profile's check in the source image; fills the result's report, findings and matches.
    Returns the engine's id of the image (pulled when it was only in a registry)."""
    source = result.source
    if source.platforms and not source.host_child:
        raise OperationError(f"import: {source.reference.familiar} is an image index of {', '.join(source.platforms)}"
                             f", none of them this host's ({host.machine()}): its check cannot run here; import it"
                             " with --no-check, or on a host of one of them")
    if source.platforms:
        result.notes.append(f"an image index of {', '.join(source.platforms)}: the check ran on this host's "
                            f"platform's image ({short_digest(source.host_child)}) only")
    image = _local_copy(result.source, env.engine, env.log)
    report = run_foreign_check(env.engine, image, check_script(managed.profile, env.config), env.config.build_network)
    result.checked, result.report = True, report
    result.findings = compare(expectations_from_profile(managed.profile), report)
    result.matches = matching_profiles(report, env.matrix)
    return image


def _local_copy(source: SourceImage, engine: Engine, log: LineSink) -> str:
    """The engine's reference of the source image, pulled by digest when it is only in a registry."""
    if not source.in_registry:
        return source.digest
    pinned = f"{source.reference.repository}@{source.host_child or source.digest}"
    local = engine.inspect(pinned)
    if local is None:
        log(f"pulling {pinned} to run the in-image check")
        local = engine.pull(pinned, log)
    return str(local.id)


def _judge(result: ImportResult, managed: ManagedRepository, options: ImportOptions) -> None:
    """Notes on how the image compares with the matrix; raises OperationError when ``strict`` and it disagrees."""
    if not result.checked:
        result.notes.append("not checked (--no-check): what the image contains is unknown")
        return
    problems = [finding_text(f) for f in result.disagreements]
    if not result.matches:
        result.notes.append("the image matches no profile of the matrix (framework, version, CUDA and Python)")
    elif not profile_matches(managed.profile, result.report):
        result.notes.append(f"the image matches {', '.join(result.matches)}, not {managed.profile.name}")
    if problems:
        more = f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
        shown = "; ".join(problems[:_SHOWN]) + more
        result.notes.append(f"{len(problems)} disagreements with {managed.profile.name}: {shown}")
    if options.strict and (problems or not result.matches):
        raise OperationError(f"import --strict: {result.source.reference.familiar}"
                             f" disagrees with {managed.profile.name}: "
                             + "; ".join(problems[:_SHOWN] or result.notes[-1:]) + "; nothing imported")


def _copy(result: ImportResult, target: Reference, store: TagStore, env: ImportEnvironment,
          engine_image: str | None) -> tuple[str, str]:
    """Put the result's source under ``target`` and the result's tag; (the digest it got, how it was copied).
    Raises OperationError when that tag already names another image (nothing is copied)."""
    source, tag, registry = result.source, result.tag, bool(env.config.registry_url)
    already = "already there: the tag names this image"
    if registry and source.in_registry:
        if existing_immutable(store, tag, lambda digest: digest == source.digest):
            return source.digest, already
        return _registry_copy(source, target, tag, env)
    image = engine_image or _local_copy(source, env.engine, env.log)
    existing = existing_immutable(store, tag, image_of(env.engine, target, image, registry=registry))
    if existing:
        return existing, already
    env.engine.tag(image, target.familiar, tag)
    if not registry:
        return image, "tagged in the local engine"
    env.log(f"pushing {target.familiar}:{tag}")
    return env.engine.push(target.familiar, tag, env.log).digest, "pushed from the local engine"


def _registry_copy(source: SourceImage, target: Reference, tag: str, env: ImportEnvironment) -> tuple[str, str]:
    """Copy the source, in a registry, to ``target:tag`` in the configured one; (its digest, how it was copied)."""
    from ..registry.access import client_for  # here: the registry package loads requests
    from ..registry.copy import Endpoint, copy_image
    from ..registry.referrers import copy_referrers

    config = env.config
    src = Endpoint(client_for(source.reference.domain, config.insecure_hosts, config.registry_timeout),
                   source.reference.path)
    same_registry = source.reference.domain == target.domain
    dst_client = src.client if same_registry else client_for(target.domain, config.insecure_hosts,
                                                             config.registry_timeout)
    dst = Endpoint(dst_client, target.path)
    env.log(f"copying {source.reference.repository}@{short_digest(source.digest)} to {target}:{tag}")
    report = copy_image(src, source.digest, dst, tag)
    # its SBOM, provenance, check report, signatures: those about this image, at most [registry] max_referrers
    attested = copy_referrers(src, source.digest, dst, limit=config.max_referrers)
    for note in attested.notes():
        env.log(f"note: {note}")
    how = (f"registry copy: {len(report.mounted)} blobs mounted, {len(report.uploaded)} streamed,"
           f" {len(report.skipped)} already there, {len(attested.copied)} attestations")
    return report.digest, how


def _move_latest(store: TagStore, result: ImportResult, options: ImportOptions) -> MoveResult | None:
    """Move the moving tag when there is none yet or ``set_latest``; else log the import on the immutable tag."""
    current = store.digest(MOVING_TAG)
    if current is None or options.set_latest:
        return guarded_move(store, MOVING_TAG, result.digest, result.tag, current, "import")
    if current != result.digest:
        result.notes.append(f"{MOVING_TAG} stays on {short_digest(current)};"
                            f" move it with 'imagectl rollback NAME --to {result.tag}' or import with --set-latest")
    if not result.reused:
        store.record(Move(tag=result.tag, to=result.digest, previous=None, action="import", when=now(), by=who(),
                          to_tag=result.tag))
    return None
