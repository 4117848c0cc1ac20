"""``imagectl verify``: read an image's attestations back from its registry and check them against the image.

For the image's manifest digest D, every referrer (:func:`imagectl.registry.referrers.list_referrers`) is read:

- its ``subject`` must be D, its one layer must match its digest (the client checks every blob it reads), its
  statement must be an in-toto v1 statement whose subject is D and whose predicate type is the one its annotation
  announces;
- its layout is one imagectl attached (:func:`.bundle.open_layer`): a Sigstore bundle (cosign's layout, what build
  attaches now), a DSSE envelope artifact (what build attached before: images pushed then still carry it) or a plain
  statement (unsigned); the report names each one's ``layout``;
- with a public key (``[attest] public_key``, else the public half of ``[attest] key``) every attestation must be a
  DSSE envelope (in a bundle or not) with a valid Ed25519 signature by that key; without one, signatures are not
  checked and the report says ``unsigned`` (or ``signed, not checked``): it never claims a signature it did not check;
- there must be an SBOM, a provenance and a check report;
- and they must agree with the image's labels: the SBOM's Python set is ``imagectl.lock.packages`` plus
  ``imagectl.extras`` (:func:`.sbom.python_problems`), the SBOM's and the provenance's lock sha256 are
  ``imagectl.lock.sha256``, the provenance's base digest is ``org.opencontainers.image.base.digest`` and its build
  key ``imagectl.build-key``, and the check report passed.

Each problem is one line of :attr:`VerifyReport.problems`; the CLI prints them and exits 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import ConfigError, ImagectlError, OperationError, RegistryError
from ..labels import BUILD_KEY, EXTRAS, LOCK_PACKAGES, LOCK_SHA256, OCI_BASE_DIGEST, split_packages
from ..matrix.model import Matrix
from ..reference import Reference
from . import dsse
from .attach import REQUIRED
from .bundle import STATEMENT_LAYOUT, announced_predicate, is_bundle_type, open_layer
from .sbom import LOCK_PROPERTY, os_package_count, parse_sbom, python_problems, python_set, sbom_property
from .statement import (
    CHECK_REPORT,
    CYCLONEDX_BOM,
    PAYLOAD_TYPE,
    PREDICATE_NAMES,
    SLSA_PROVENANCE,
    parse_statement,
    subject_digests,
)

if TYPE_CHECKING:
    from ..registry.client import RegistryClient
    from ..registry.referrers import Referrer

MAX_PAYLOAD_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Checked:
    """One attestation as verify read it: its predicate type, artifact digest, signature state and whether it holds
    (no problem of its own)."""

    predicate_type: str
    digest: str
    signature: str  # unsigned, verified ed25519:KEYID, not checked, invalid
    ok: bool
    layout: str = ""  # sigstore-bundle, dsse (imagectl's before bundles), statement; "" when unreadable


@dataclass
class VerifyReport:
    """What verify found: the image, its attestations and one line per problem."""

    image: str
    digest: str
    attestations: list[Checked] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    signatures: str = "unsigned"

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (``verify --json``)."""
        return {"image": self.image, "digest": self.digest, "ok": self.ok, "signatures": self.signatures,
                "attestations": [asdict(a) for a in self.attestations], "problems": list(self.problems)}


def kind_name(predicate_type: str) -> str:
    """``sbom``, ``provenance``, ``check report`` or the predicate type itself."""
    return PREDICATE_NAMES.get(predicate_type, predicate_type or "attestation")


def verify_image(client: RegistryClient, ref: Reference, public: dsse.PublicKey | None) -> VerifyReport:
    """Verify the attestations of image ``ref`` in ``client``'s registry (see the module docstring).

    Raises NotFoundError when the image does not exist, RegistryError when the registry cannot be read.
    """
    from ..registry.referrers import list_referrers

    manifest = client.get_manifest(ref.path, ref.digest or ref.tag or "latest")
    report = VerifyReport(f"{ref.repository}@{manifest.digest}", manifest.digest)
    labels = client.get_image_config(ref.path, manifest).labels
    found: dict[str, list[dict[str, Any]]] = {}
    for referrer in list_referrers(client, ref.path, manifest.digest):
        predicate = _read(client, ref.path, referrer, manifest.digest, public, report)
        if predicate is not None:
            found.setdefault(predicate[0], []).append(predicate[1])
    announced = {a.predicate_type for a in report.attestations}
    for wanted in REQUIRED:
        if wanted not in announced:  # one that is there but wrong has its own lines
            report.problems.append(f"missing {kind_name(wanted)}: no attestation of {wanted} refers to the image")
    report.problems += _agreement(found, labels)
    report.signatures = _signature_summary(report.attestations, public)
    return report


def _read(client: RegistryClient, repository: str, referrer: Referrer, digest: str,  # noqa: PLR0913
          public: dsse.PublicKey | None, report: VerifyReport) -> tuple[str, dict[str, Any]] | None:
    """(predicate type, predicate) of one referrer when it holds, else None with its problems added."""
    announced = announced_predicate(referrer.annotations)
    name = f"{kind_name(announced)} {referrer.digest[:19]}"
    problems: list[str] = []
    signature, layout = "unsigned", ""
    predicate: tuple[str, dict[str, Any]] | None = None
    try:
        statement, signature, layout = _statement(client, repository, referrer, digest, public, problems)
        if statement is not None:
            predicate = _predicate(statement, announced, digest, problems)
    except (ImagectlError, ValueError) as exc:
        problems.append(str(exc))
    if announced or problems:
        report.attestations.append(Checked(announced, referrer.digest, signature, not problems, layout))
    report.problems += [f"{name}: {p}" for p in problems]
    return None if problems else predicate


def _statement(client: RegistryClient, repository: str, referrer: Referrer, digest: str,  # noqa: PLR0913
               public: dsse.PublicKey | None, problems: list[str]) -> tuple[dict[str, Any] | None, str, str]:
    """The statement an artifact carries, its signature state and its layout; problems are added to ``problems``."""
    from ..registry.referrers import subject_of

    artifact = client.get_manifest(repository, referrer.digest)
    subject = subject_of(artifact)
    if subject != digest:
        problems.append(f"its subject is {subject or 'missing'}, not the image {digest}")
        return None, "unsigned", ""
    layers = artifact.layers()
    if len(layers) != 1:
        problems.append(f"has {len(layers)} layers, not one statement")
        return None, "unsigned", ""
    try:
        data = client.read_blob(repository, layers[0].digest, MAX_PAYLOAD_BYTES)
    except RegistryError as exc:
        problems.append(f"its statement cannot be read: {exc}")
        return None, "unsigned", ""
    payload, signature, layout = _unwrap(layers[0].media_type, data, public, problems)
    if payload is None:
        return None, signature, layout
    return parse_statement(payload, "its statement"), signature, layout


def _unwrap(media_type: str, data: bytes, public: dsse.PublicKey | None,
            problems: list[str]) -> tuple[bytes | None, str, str]:
    """The statement bytes of a layer (an envelope's verified payload), the signature state and the layout."""
    try:
        layer = open_layer(media_type, data)
    except dsse.SignatureError as exc:
        problems.append(str(exc))
        return None, "invalid" if _signed_layout(media_type) else "unsigned", ""
    if layer.envelope is None:
        if public is not None:
            problems.append("unsigned, but a key is configured: every attestation must be signed by it")
        return layer.statement, "unsigned", STATEMENT_LAYOUT
    try:
        if public is None:
            return dsse.open_envelope(layer.envelope)[1], "not checked", layer.layout
        kind, payload = dsse.verify(layer.envelope, public)
    except dsse.SignatureError as exc:
        problems.append(f"signature: {exc}")
        return None, "invalid", layer.layout
    if kind != PAYLOAD_TYPE:
        problems.append(f"its envelope carries {kind[:80]}, not an in-toto statement")
        return None, "invalid", layer.layout
    return payload, f"verified ed25519:{public.keyid[:16]}", layer.layout


def _signed_layout(media_type: str) -> bool:
    """Whether a layer of ``media_type`` claims to be a signed layout (an envelope or a bundle)."""
    return media_type == dsse.ENVELOPE_TYPE or is_bundle_type(media_type)


def _predicate(statement: Mapping[str, Any], announced: str, digest: str,
               problems: list[str]) -> tuple[str, dict[str, Any]] | None:
    subjects = subject_digests(statement)
    if digest not in subjects:
        problems.append(f"its statement is about {', '.join(subjects) or 'nothing'}, not the image {digest}")
        return None
    kind = str(statement.get("predicateType") or "")
    if announced and kind != announced:
        problems.append(f"its statement's predicate type is {kind[:80]}, not the announced {announced[:80]}")
        return None
    return kind, dict(statement["predicate"])


def _agreement(found: Mapping[str, list[dict[str, Any]]], labels: Mapping[str, str]) -> list[str]:
    """The problems of the attestations against each other and the image's labels."""
    locked = split_packages(labels.get(LOCK_PACKAGES)) if labels.get(LOCK_PACKAGES) else None
    extras = split_packages(labels.get(EXTRAS))
    lock_sha = labels.get(LOCK_SHA256) or ""
    out: list[str] = []
    for sbom in found.get(CYCLONEDX_BOM, []):
        out += _sbom_problems(sbom, locked, extras, lock_sha)
    for provenance in found.get(SLSA_PROVENANCE, []):
        out += _provenance_problems(provenance, labels, lock_sha)
    for check in found.get(CHECK_REPORT, []):
        if check.get("result") != "pass":
            out.append(f"check report: the in-image check did not pass ({check.get('result')!r})")
    return out


def _sbom_problems(predicate: Mapping[str, Any], locked: dict[str, str] | None, extras: dict[str, str],
                   lock_sha: str) -> list[str]:
    try:
        document = parse_sbom(json.dumps(predicate).encode())
    except OperationError as exc:
        return [f"sbom: {exc}"]
    out = [f"sbom: Python distributions are not the lock plus the extras of the labels: {p}"
           for p in python_problems(python_set(document), locked, extras)]
    stated = sbom_property(document, LOCK_PROPERTY) or ""
    if lock_sha and stated != lock_sha:
        out.append(f"sbom: lock sha256 {stated or 'missing'}, the label {LOCK_SHA256} says {lock_sha}")
    if os_package_count(document) == 0 and sbom_property(document, "imagectl:dpkg") == "status":
        out.append("sbom: lists no OS packages though it says it read the dpkg status")
    return out


def _dependency(predicate: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for item in (predicate.get("buildDefinition") or {}).get("resolvedDependencies") or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            return item
    return {}


def _provenance_problems(predicate: Mapping[str, Any], labels: Mapping[str, str], lock_sha: str) -> list[str]:
    out = []
    lock = str((_dependency(predicate, "lock").get("digest") or {}).get("sha256") or "")
    if lock_sha and lock != lock_sha:
        out.append(f"provenance: lock sha256 {lock or 'missing'}, the label {LOCK_SHA256} says {lock_sha}")
    base = (_dependency(predicate, "base-image").get("digest") or {}).get("sha256")
    label_base = labels.get(OCI_BASE_DIGEST, "")
    if label_base and f"sha256:{base}" != label_base:
        out.append(f"provenance: base image sha256:{base}, the label {OCI_BASE_DIGEST} says {label_base}")
    key = ((predicate.get("buildDefinition") or {}).get("internalParameters") or {}).get("buildKey")
    if labels.get(BUILD_KEY) and key != labels[BUILD_KEY]:
        out.append(f"provenance: build key {str(key)[:16]}, the label {BUILD_KEY} says {labels[BUILD_KEY][:16]}")
    return out


def _signature_summary(checked: list[Checked], public: dsse.PublicKey | None) -> str:
    """``verified (KEY)``, ``unsigned`` or ``signed, not checked (no public key)``, or ``mixed``."""
    states = {c.signature for c in checked if c.predicate_type in REQUIRED}
    if not states or states == {"unsigned"}:
        return "unsigned"
    if public is not None and all(s.startswith("verified") for s in states):
        return f"verified (ed25519 key {public.keyid[:16]})"
    if states == {"not checked"}:
        return "signed, not checked (no [attest] public_key or key configured)"
    return "mixed: " + ", ".join(sorted(states))


def verify_target(text: str, matrix: Matrix, config: Config) -> Reference:
    """The image ``verify`` means: a reference naming its registry (``HOST/path:tag``, ``...@sha256:...``) as
    written, else the moving tag of the managed repository ``text`` names (a profile, or a profile with a suffix).

    Raises UnknownProfileError/ValidationError for a name that is neither, ConfigError without a registry (a
    local image carries no attestations: ConfigError, exit 2).
    """
    from ..reference import names_registry, parse_reference
    from ..tags.managed import resolve_managed
    from ..tags.naming import MOVING_TAG

    if names_registry(text):
        return parse_reference(text)
    repo = resolve_managed(text, matrix, config).reference
    if not config.registry_url:
        raise ConfigError(f"verify {text}: no [registry] url configured; attestations live in a registry (a local"
                          " image carries none)")
    return repo.with_tag(MOVING_TAG)


def public_key(config: Config) -> dsse.PublicKey | None:
    """The key signatures are checked with: ``[attest] public_key``, else the public half of ``[attest] key``, else
    None.  Raises ConfigError for a key file that is not an Ed25519 PEM key."""
    if config.attest_public_key:
        return dsse.load_public_key(config.attest_public_key)
    if config.attest_key:
        return dsse.public_half(dsse.load_signing_key(config.attest_key))
    return None


def verify(text: str, matrix: Matrix, config: Config) -> VerifyReport:
    """Verify the image ``text`` names (:func:`verify_target`, :func:`verify_image`); raises what they raise."""
    from ..registry.access import client_for  # here: the registry package loads requests

    ref = verify_target(text, matrix, config)
    key = public_key(config)
    client = client_for(ref.domain, config.insecure_hosts, config.registry_timeout)
    return verify_image(client, ref, key)
