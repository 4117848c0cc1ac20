"""``imagectl diff A B``: the two images read from their registry and compared (:mod:`.image_diff`).

An argument names an image in one of the ways the other commands take one:

- ``REGISTRY/PATH[:TAG|@DIGEST]``: a reference that names its registry, as written (``verify``'s rule: it is taken
  as a reference when its first component is a registry host, :func:`imagectl.reference.names_registry`);
- ``NAME[:TAG|@DIGEST]``: the managed repository of NAME, a profile name or a profile name with a suffix
  (:func:`imagectl.tags.managed.resolve_managed`, as ``history`` and ``rollback`` resolve it), in the configured
  registry; without a tag its moving tag ``latest``; a TAG is any tag but imagectl's reserved ones (as ``promote
  --from``), a DIGEST a full one or, as ``rollback --to`` takes it, a prefix of 12 or more hex digits that one of
  the repository's immutable tags points to (:func:`imagectl.tags.moves.resolve_target`).

Nothing is pulled: each image costs its manifest (and for an index, its ``linux/amd64`` child's, else its first's),
its config, and its attestations as ``verify`` reads them (:func:`imagectl.evidence.verify.verify_image`), then the
check report and the SBOM that passed.  Both arguments are checked before the registry is asked anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..advisories.snapshot import Advisories, known_advisories
from ..config import Config
from ..errors import ConfigError, ImagectlError, InputError, ValidationError
from ..evidence import dsse
from ..evidence.bundle import open_layer
from ..evidence.statement import CHECK_REPORT, CYCLONEDX_BOM, parse_statement
from ..evidence.verify import MAX_PAYLOAD_BYTES, VerifyReport, public_key, verify_image
from ..matrix.model import Matrix
from ..reference import Reference, check_digest, names_registry, parse_reference
from ..tags.managed import resolve_managed
from ..tags.naming import MOVING_TAG, check_source
from .image_diff import ImageDiff, compare_images
from .image_facts import ImageFacts, Layer, check_summary, config_history, deb_packages, image_packages, layer_groups

if TYPE_CHECKING:
    from ..registry.client import RegistryClient
    from ..registry.manifest import Manifest

_DIGEST_PREFIX = re.compile(r"^sha256:[0-9a-f]{12,63}$")


@dataclass(frozen=True)
class DiffTarget:
    """An argument of ``diff`` resolved without the registry: what it said, the reference it names, and a digest
    prefix still to be looked up among the repository's immutable tags ("" for none)."""

    text: str
    reference: Reference
    digest_prefix: str = ""


def diff_target(text: str, matrix: Matrix, config: Config) -> DiffTarget:
    """The image argument ``text`` names (see the module docstring).

    Raises UnknownProfileError (with the closest names) for a NAME that is no profile, ValidationError for a
    malformed reference, tag or digest or a reserved tag, ConfigError for a NAME without a ``[registry] url``.
    """
    if names_registry(text):
        return DiffTarget(text, parse_reference(text))
    name, at, digest = text.partition("@")
    name, colon, tag = (name, "", "") if at else name.partition(":")
    repo = resolve_managed(name, matrix, config).reference
    if not config.registry_url:
        raise ConfigError(f"diff {text}: no [registry] url configured; diff reads images from a registry (or name "
                          "one as REGISTRY/PATH:TAG)")
    try:
        if at and _DIGEST_PREFIX.fullmatch(digest) and not _is_full(digest):
            return DiffTarget(text, repo.with_tag(MOVING_TAG), digest)
        if at:
            return DiffTarget(text, Reference(repo.domain, repo.path, None, check_digest(digest)))
        ref = repo.with_tag(tag if colon else MOVING_TAG)
    except ValidationError as exc:
        raise ValidationError(f"diff {text}: {exc}") from None
    return DiffTarget(text, ref.with_tag(check_source(tag, "diff TAG")) if colon else ref)


def _is_full(digest: str) -> bool:
    try:
        check_digest(digest)
    except ValidationError:
        return False
    return True


def pinned(client: RegistryClient, target: DiffTarget) -> Reference:
    """The reference of ``target``, its digest prefix looked up among the repository's immutable tags (one tag
    listing and one read per tag).  Raises InputError when no immutable tag's digest or several start with it,
    RegistryError."""
    if not target.digest_prefix:
        return target.reference
    from ..tags.history import read_listing
    from ..tags.moves import resolve_target
    from ..tags.store import RegistryTagStore

    store = RegistryTagStore(client, target.reference)
    found = resolve_target(target.digest_prefix, read_listing(store), target.reference.repository)
    return Reference(target.reference.domain, target.reference.path, None, found.digest)


def _image_of(client: RegistryClient, ref: Reference, top: Manifest) -> Manifest:
    """The image manifest whose facts stand for ``top``: itself, or down an index its ``linux/amd64`` entry, else
    its first platform's (at most MAX_INDEX_DEPTH indexes deep).  Raises RegistryError, IndexDepthError."""
    from ..registry.index_walk import walk_index
    from ..registry.manifest import is_platform_entry, pick_platform

    def follow(manifest: Manifest) -> list[Any]:
        return [pick_platform([c for c in manifest.children() if is_platform_entry(c)])] if manifest.is_index else []

    path = walk_index(top, lambda child: client.get_manifest(ref.path, child.digest),
                      f"registry {ref.domain}: {ref.repository}@{top.digest}", follow=follow)
    return next(path)  # the deepest first: the image at the end of the path


def _platforms(top: Manifest) -> tuple[str, ...]:
    from ..registry.manifest import is_platform_entry, platform_name

    return tuple(platform_name(c.platform) for c in top.children() if is_platform_entry(c))


def _predicate(client: RegistryClient, repository: str, artifact: str) -> Mapping[str, Any] | None:
    """The predicate of the statement artifact ``artifact`` that ``verify`` already judged (its subject, and its
    signature where a key is configured), in any layout imagectl attaches (:func:`imagectl.evidence.bundle.open_layer`);
    None when its statement cannot be read as one.  Raises RegistryError."""
    layers = client.get_manifest(repository, artifact).layers()
    if len(layers) != 1:
        return None
    data = client.read_blob(repository, layers[0].digest, MAX_PAYLOAD_BYTES)
    try:
        layer = open_layer(layers[0].media_type, data)
        payload = dsse.open_envelope(layer.envelope)[1] if layer.envelope is not None else layer.statement
        return parse_statement(payload, "statement")["predicate"]
    except (ImagectlError, ValueError):
        return None


def _attested(client: RegistryClient, repository: str, report: VerifyReport) -> dict[str, Mapping[str, Any]]:
    """predicate type -> the predicate of the first check report and SBOM that ``verify`` found sound."""
    out: dict[str, Mapping[str, Any]] = {}
    for item in report.attestations:
        if item.ok and item.predicate_type in (CHECK_REPORT, CYCLONEDX_BOM) and item.predicate_type not in out:
            predicate = _predicate(client, repository, item.digest)
            if predicate is not None:
                out[item.predicate_type] = predicate
    return out


def _verdict(report: VerifyReport) -> str:
    """``ok, signatures ...`` or ``N problem(s), signatures ...``: what ``verify`` says of the attestations."""
    count = len(report.problems)
    found = "ok" if report.ok else f"{count} problem{'s' if count != 1 else ''}"
    return f"{found}, signatures {report.signatures}"


def read_facts(client: RegistryClient, ref: Reference, public: dsse.PublicKey | None,  # noqa: PLR0913
               known: Advisories, where: str) -> ImageFacts:
    """The facts of image ``ref`` (see :mod:`.image_facts`); ``where`` names it in errors.

    Raises InputError for something that is not an image or carries no imagectl labels, NotFoundError when the
    registry has no such image, RegistryError when it cannot be read.
    """
    from ..registry.manifest import parse_image_config

    top = client.get_manifest(ref.path, ref.digest or ref.tag or MOVING_TAG)
    kind = top.artifact_kind()
    if kind is not None:
        raise InputError(f"{where}: {ref.repository}@{top.digest} is no image but an artifact ({kind[:80]})")
    image = _image_of(client, ref, top)
    config = image.config()
    if config is None:
        raise InputError(f"{where}: {ref.repository}@{image.digest} has no image config")
    raw = client.read_blob(ref.path, config.digest)
    parsed = parse_image_config(raw, config.digest)
    packages = image_packages(parsed.labels, where)
    layers = tuple(Layer(d.digest, d.size) for d in image.layers())
    report = verify_image(client, Reference(ref.domain, ref.path, None, image.digest), public)
    attested = _attested(client, ref.path, report)
    sbom, check = attested.get(CYCLONEDX_BOM), attested.get(CHECK_REPORT)
    return ImageFacts(
        str(ref), top.digest, image.digest, dict(parsed.labels), packages,
        created=parsed.created.isoformat() if parsed.created else "", platforms=_platforms(top), layers=layers,
        groups=layer_groups(config_history(raw), [layer.size for layer in layers]),
        os_packages=deb_packages(sbom) if sbom is not None else None,
        check=check_summary(check) if check is not None else None,
        attestations=_verdict(report), attestation_problems=tuple(report.problems),
        advisories=tuple(known.findings(packages)))


def diff_images(text_a: str, text_b: str, matrix: Matrix, config: Config) -> ImageDiff:
    """What changed from image ``text_a`` to image ``text_b`` (arguments as the module docstring says).

    Raises InputError (UnknownProfileError, ValidationError, ConfigError, or an image without imagectl labels) for
    bad input, before the registry is asked anything where the arguments alone tell; NotFoundError and
    RegistryError when a registry has no such image or cannot be read.
    """
    from ..registry.access import client_for  # here: the registry package loads requests

    targets = [diff_target(text, matrix, config) for text in (text_a, text_b)]
    public, known = public_key(config), known_advisories(config)
    clients: dict[str, RegistryClient] = {}
    facts = []
    for target in targets:
        domain = target.reference.domain
        if domain not in clients:
            clients[domain] = client_for(domain, config.insecure_hosts, config.registry_timeout)
        client = clients[domain]
        facts.append(read_facts(client, pinned(client, target), public, known, f"diff {target.text}"))
    return compare_images(facts[0], facts[1])
