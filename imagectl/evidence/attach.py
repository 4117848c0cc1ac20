"""What ``build`` does after it pushed an image by its digest and before any tag names it (see "Custody" in
:mod:`imagectl.images.publish`): make the image's SBOM, provenance and check report, each an in-toto statement about
the image's manifest digest, sign them when ``[attest] key`` is set (DSSE, Ed25519; else they are attached
``unsigned`` and say so), and attach them to the image as OCI 1.1 artifacts (:mod:`imagectl.registry.referrers`): a
signed one as a Sigstore bundle, the layout cosign and the admission controllers read (:mod:`.bundle`), an unsigned
one as the plain statement.

The SBOM's Python set must be the lock plus the extras (:func:`.sbom.python_problems`), else the build fails at step
``attest`` and no tag names the image.  An image already carrying all three (pushed before, attested then) is not
attested again; one carrying some of them (a try that failed part way) gets the others only.  The key is read through
:func:`.keys.signing_key`, which ``build`` called before it built anything.  A build without a registry attaches
nothing, and its notes say so: a local image cannot carry referrers.

The OS packages come from the image itself: one throw-away container reads ``/etc/os-release`` and
``/var/lib/dpkg/status`` (an image without dpkg gets an SBOM without OS packages, and a note).  Its output ends with
a mark; output without it was cut short and fails the step (``attest``) instead of making an SBOM that silently
lacks the packages after the cut.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from ..assemble.layer import layer_compression, writer_name
from ..config import Config
from ..engine import Engine, LineSink
from ..errors import BuildError, ImagectlError, OperationError
from ..image_spec import ImageSpec
from ..imagecheck.run import CheckRun
from ..lock.lockfile import canonical_name
from ..matrix.facts import profile_facts
from ..matrix.model import Profile
from ..reference import Reference
from ..render.context import NETRC_FILE, assembled
from . import dsse
from .provenance import BuildFacts, CheckFacts, EngineFacts, check_predicate, provenance_predicate, templates_digest
from .sbom import (
    DebPackage,
    OsRelease,
    SbomInputs,
    make_sbom,
    parse_dpkg_status,
    parse_os_release,
    parse_sbom,
    python_problems,
    python_set,
)
from .bundle import BUNDLE_MEDIA_TYPE, announced_predicate, bundle_annotations, make_bundle
from .keys import signing_key
from .statement import (CHECK_REPORT, CYCLONEDX_BOM, PAYLOAD_TYPE, PREDICATE_ANNOTATION, PREDICATE_NAMES,
                        SLSA_PROVENANCE, statement, to_bytes)

if TYPE_CHECKING:
    from ..registry.client import RegistryClient
    from ..registry.manifest import Descriptor
    from ..registry.referrers import Artifact

SIGNATURE_ANNOTATION = "dev.imagectl.signature"  # "unsigned" (or, before bundles, "ed25519:KEYID")
CREATED_ANNOTATION = "org.opencontainers.image.created"
UNSIGNED = "unsigned"
REQUIRED = (CYCLONEDX_BOM, SLSA_PROVENANCE, CHECK_REPORT)  # what an image is published with
NO_REGISTRY_NOTE = ("attestations (SBOM, provenance, check report) not attached: no [registry] url, and a local image"
                    " cannot carry referrers")
_SEPARATOR = "--imagectl-dpkg-status--"
_END = "--imagectl-dpkg-end--"
# Run in a container of the image: its os-release, a separator, its dpkg status, then an end mark on a line of its
# own (output cut short lacks it) (nothing user-controlled here)
_OS_SCRIPT = ("cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null; "
              f"echo {_SEPARATOR}; cat /var/lib/dpkg/status 2>/dev/null || echo {_SEPARATOR}missing; "
              f"echo; echo {_END}")


class _Options(Protocol):
    @property
    def extras(self) -> tuple[str, ...]: ...
    @property
    def base(self) -> str | None: ...
    @property
    def gpu_check(self) -> bool: ...


class _Request(Protocol):
    @property
    def profile(self) -> Profile: ...
    @property
    def options(self) -> _Options: ...


class _Chosen(Protocol):
    @property
    def origin(self) -> str: ...


class PlannedBuild(Protocol):
    """What attesting reads of a build's plan (:class:`imagectl.images.plan.Plan` is one)."""

    @property
    def request(self) -> _Request: ...
    @property
    def spec(self) -> ImageSpec: ...
    @property
    def lock(self) -> _Chosen: ...
    @property
    def files(self) -> Mapping[str, bytes]: ...
    @property
    def key(self) -> str: ...
    @property
    def repository(self) -> Reference: ...
    @property
    def netrc(self) -> bytes: ...


class BuildTrace(Protocol):
    """Where a build logs, times its phases, and when it started (:class:`imagectl.images.trace.Trace` is one)."""

    started: datetime

    def log(self, line: str) -> None: ...
    def timed(self, name: str) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class BuiltImage:
    """An image ``build`` made: the engine's id, the manifest digest it was pushed as, and its check's run."""

    image_id: str
    digest: str
    check: CheckRun


@dataclass(frozen=True)
class Attestation:
    """One statement ready to attach: what it is (its predicate type) and its layer (media type, bytes)."""

    predicate_type: str
    media_type: str
    data: bytes
    signature: str  # UNSIGNED or "ed25519:KEYID"


def attest_build(plan: PlannedBuild, config: Config, engine: Engine, built: BuiltImage,
                 trace: BuildTrace) -> list[str]:
    """Attest and attach (see the module docstring); the notes for the build's result.

    Raises BuildError (step ``attest``) when the SBOM disagrees with the lock, cannot be made, or the registry
    refuses an artifact; the image is in the registry by its digest only: no tag names it yet.
    """
    if not config.registry_url:
        return [NO_REGISTRY_NOTE]
    with trace.timed("attest"):
        try:
            return _attest(plan, config, engine, built, trace.log, trace.started)
        except BuildError:
            raise
        except ImagectlError as exc:
            raise BuildError(f"cannot attest {plan.repository.familiar}@{built.digest}: {exc}", "attest") from None


def _attest(plan: PlannedBuild, config: Config, engine: Engine, built: BuiltImage, log: LineSink,  # noqa: PLR0913
            started: datetime) -> list[str]:
    from ..registry.access import client_for  # here: the registry package loads requests

    repo = plan.repository
    client = client_for(repo.domain, config.insecure_hosts, config.registry_timeout)
    manifest = client.get_manifest(repo.path, built.digest)
    present = _present(client, repo.path, built.digest)
    if set(REQUIRED) <= present:
        log(f"{repo.familiar}@{built.digest[:19]} already carries its SBOM, provenance and check report")
        return []
    finished = datetime.now(timezone.utc)
    statements, notes = _statements(plan, engine, built, _image_platform(client, repo, manifest),
                                    (started, finished), layer_writer(plan, config))
    signing = signing_key(config)
    # one attached by an earlier try that failed after it is not attached twice
    missing = [(kind, document) for kind, document in statements if kind not in present]
    attach_statements(client, repo.path, _descriptor(manifest), missing, signing, finished)
    how = f"signed (ed25519, key {signing.keyid[:16]}; Sigstore bundles)" if signing else UNSIGNED
    log(f"attached SBOM, provenance and check report to {repo.familiar}@{built.digest[:19]}: {how}")
    return notes + ([] if signing else ["attestations attached unsigned (no [attest] key)"])


def attach_statements(client: RegistryClient, repository: str, subject: Descriptor,  # noqa: PLR0913
                      statements: Sequence[tuple[str, Mapping[str, Any]]], signing: dsse.SigningKey | None,
                      created: datetime) -> None:
    """Attach each (predicate type, statement) of ``statements`` to image ``subject``: signed by ``signing``, a
    Sigstore bundle artifact (:mod:`.bundle`), else the plain statement.  Raises RegistryError when a write fails."""
    from ..registry.referrers import attach

    when = created.isoformat().replace("+00:00", "Z")
    for predicate_type, document in statements:
        attach(client, repository, subject, _artifact(_wrap(predicate_type, to_bytes(document), signing), when))


def _present(client: RegistryClient, repository: str, digest: str) -> set[str]:
    """The predicate types of the attestations image ``digest`` of ``repository`` carries."""
    from ..registry.referrers import list_referrers

    return {announced_predicate(r.annotations) for r in list_referrers(client, repository, digest)}


def missing_attestations(client: RegistryClient, repository: str, digest: str) -> list[str]:
    """What of the SBOM, provenance and check report image ``digest`` of ``repository`` lacks, by name (``sbom``,
    ``provenance``, ``check report``): [] when it carries all three.  One referrers listing; raises
    RegistryError when it cannot be read."""
    present = _present(client, repository, digest)
    return [PREDICATE_NAMES[kind] for kind in REQUIRED if kind not in present]


def _descriptor(manifest: Any) -> Descriptor:
    from ..registry.manifest import Descriptor

    return Descriptor(manifest.media_type, manifest.digest, len(manifest.raw))


def _image_platform(client: RegistryClient, repo: Reference, manifest: Any) -> str:
    config = client.get_image_config(repo.path, manifest)
    return f"{config.os or 'linux'}/{config.architecture or 'unknown'}"


def _wrap(predicate_type: str, payload: bytes, signing: dsse.SigningKey | None) -> Attestation:
    """The statement as attached: in a Sigstore bundle signed by ``signing``, else the statement itself."""
    if signing is None:
        return Attestation(predicate_type, PAYLOAD_TYPE, payload, UNSIGNED)
    bundle = to_bytes(make_bundle(payload, signing))
    return Attestation(predicate_type, BUNDLE_MEDIA_TYPE, bundle, f"ed25519:{signing.keyid}")


def _artifact(made: Attestation, created: str) -> Artifact:
    """The artifact of ``made``: a bundle as cosign attaches one (artifactType the bundle's media type, cosign's
    annotations), a plain statement as imagectl always did."""
    from ..registry.referrers import Artifact

    if made.media_type == BUNDLE_MEDIA_TYPE:
        kind, annotations = BUNDLE_MEDIA_TYPE, bundle_annotations(made.predicate_type)
    else:
        kind = PAYLOAD_TYPE
        annotations = {PREDICATE_ANNOTATION: made.predicate_type, SIGNATURE_ANNOTATION: made.signature}
    return Artifact(kind, made.media_type, made.data, {**annotations, CREATED_ANNOTATION: created})


def layer_writer(plan: PlannedBuild, config: Config) -> str:
    """The byte format of the layers imagectl wrote itself for ``plan`` (an assembled build:
    :func:`imagectl.render.context.assembled` decides for the build and for this alike; with ``[registry] compression
    = "zstd"`` it names the zstd encoder too: :func:`imagectl.assemble.layer.writer_name`), else "" (the engine wrote
    them all)."""
    if not assembled(plan.spec, config, NETRC_FILE if plan.netrc else ""):
        return ""
    return writer_name(layer_compression(config.registry_compression))


def _statements(plan: PlannedBuild, engine: Engine, built: BuiltImage, image_platform: str,  # noqa: PLR0913
                span: tuple[datetime, datetime], writer: str) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The three statements (predicate type, statement) and the notes; raises BuildError when the SBOM's Python set
    is not the lock plus the extras."""
    name = plan.repository.familiar
    engine_facts = engine_identity(engine)
    debs, release, dpkg = read_os_packages(engine, built.image_id)
    notes = [] if dpkg == "status" else [f"the SBOM lists no OS packages: {dpkg}"]
    sbom = _sbom(plan, built, debs, release, dpkg, span[1])
    provenance = provenance_predicate(_build_facts(plan, built, engine_facts, span, writer))
    check = check_predicate(CheckFacts(built.check.command, built.check.gpu, built.check.report,
                                       built.check.findings, engine_facts, image_platform, platform.machine()))
    return [(CYCLONEDX_BOM, statement(name, built.digest, CYCLONEDX_BOM, sbom)),
            (SLSA_PROVENANCE, statement(name, built.digest, SLSA_PROVENANCE, provenance)),
            (CHECK_REPORT, statement(name, built.digest, CHECK_REPORT, check))], notes


def _sbom(plan: PlannedBuild, built: BuiltImage, debs: Sequence[DebPackage], release: OsRelease,  # noqa: PLR0913
          dpkg: str, when: datetime) -> dict[str, Any]:
    """The SBOM document, its Python set checked against the lock plus the extras (BuildError otherwise)."""
    spec = plan.spec
    locked = spec.locked
    extras = [p for p in spec.extras_lock if canonical_name(p.name) in spec.added]
    inventory = built.check.report.get("packages")
    inputs = SbomInputs(plan.repository.familiar, built.digest, locked.packages if locked else (), extras,
                        dict(inventory) if isinstance(inventory, Mapping) else {}, debs, release,
                        locked.sha256 if locked else "", dpkg, when)
    document = parse_sbom(make_sbom(inputs))
    problems = python_problems(python_set(document), locked.versions if locked else None, spec.added)
    if problems:
        raise BuildError(f"the SBOM's Python distributions are not the lock plus the extras: {problems[0]}", "attest")
    return document


def _build_facts(plan: PlannedBuild, built: BuiltImage, engine: EngineFacts, span: tuple[datetime, datetime],
                 writer: str) -> BuildFacts:
    spec, request = plan.spec, plan.request
    lock, public = spec.install_lock, spec.public_base
    return BuildFacts(
        profile=request.profile.name, matrix_entry=profile_facts(request.profile),
        extras=tuple(request.options.extras), user_base=request.options.base,
        lock_sha256=spec.locked.sha256 if spec.locked else "", lock_origin=str(plan.lock.origin),
        lock_id=lock.header.lock_id, base=str(public),
        base_digest=spec.base_digest or "", templates_sha256=templates_digest(plan.files), build_key=plan.key,
        engine=engine, started=span[0], finished=span[1], repository=plan.repository.familiar,
        gpu_check=built.check.gpu, layer_writer=writer,
    )


def engine_identity(engine: Engine) -> EngineFacts:
    """The engine's name and version (``docker``, ``20.10.24``); "unknown" where the engine cannot tell."""
    name = str(getattr(engine, "name", "") or type(engine).__name__.lower().replace("engine", "") or "unknown")
    version = "unknown"
    ask = getattr(engine, "version", None)
    if callable(ask):
        with suppress(ImagectlError):
            version = str(ask())
    return EngineFacts(name, version)


def read_os_packages(engine: Engine, image: str) -> tuple[list[DebPackage], OsRelease, str]:
    """(the dpkg packages, the os-release, "status" or why there are none) of ``image``, read in one throw-away
    container.  Raises EngineError/OperationError when the container cannot run, OperationError when its output
    came back cut short (:func:`os_packages_of`)."""
    status, output = engine.run(image, ["sh", "-c", _OS_SCRIPT])
    if status != 0:
        return [], OsRelease(), f"reading the OS packages exited with status {status}: {output.strip()[-200:]}"
    try:
        return os_packages_of(output)
    except OperationError as exc:
        raise OperationError(f"reading the OS packages of {image[:19]}: {exc}") from None


def os_packages_of(output: str) -> tuple[list[DebPackage], OsRelease, str]:
    """(the dpkg packages, the os-release, "status" or why there are none) of the output of :data:`_OS_SCRIPT`
    (pure).  Raises OperationError when the output lacks its end mark: it was cut short, and an SBOM made of it would
    miss the packages after the cut and say nothing of it."""
    before, found, _ = output.rpartition("\n" + _END + "\n")
    if not found:
        raise OperationError(f"the output ended before its end mark ({len(output)} characters): the dpkg status "
                             "came back cut short")
    release_text, _, dpkg_text = before.partition(_SEPARATOR + "\n")
    if dpkg_text.startswith(_SEPARATOR + "missing"):
        return [], parse_os_release(release_text), "the image has no /var/lib/dpkg/status"
    return parse_dpkg_status(dpkg_text), parse_os_release(release_text), "status"
