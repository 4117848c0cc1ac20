"""``imagectl index NAME --platforms linux/amd64,linux/arm64``: the index job of the CI fan-out.

Each per-platform job ran ``imagectl build NAME --platform P --push``: one platform's image, checked, pushed under
its immutable tag (whose name carries its build key), attested (its check report among the attestations), the
moving tag left alone (:mod:`.builder`).  This command finds those images again the way a build finds an image to
reuse: it plans each platform as ``build`` would (the same lock, base digest and build key) and looks the key up in
the repository's tags (one listing), so it takes exactly the images those inputs make, never an older or another
one.  Each must be an image of its platform (its config says so) whose check report (an attestation, see
:mod:`imagectl.evidence.attach`) passed on that platform; a platform's image that is missing, of another
platform, or without a passing check report refuses the whole command (OperationError, exit 1), and nothing is
written.

Whose check report counts (:func:`find_check_report`): with a key configured (``[attest] public_key``, else the
public half of ``[attest] key``, read before anything is planned), only a report signed by that key; an image
whose passing report is unsigned, or signed by another key, refuses the whole command, naming the image and the
reason.  Without a key nothing can be checked: an unsigned report is taken and its platform marked ``unsigned``
(a signed one ``signed, not checked``), in the log, a note and ``--json``'s ``signature`` of each platform, so
the output never claims a signature it did not check (as ``imagectl verify`` says it).

Then the index (:func:`.platforms.index_manifest`, each entry annotated with where its check ran: ``native`` or
``emulated on x86_64``) is put under its immutable tag and the moving tag moved onto it (one manifest PUT each).
One platform needs no index: the moving tag moves onto that image.  An index with the same build key already
there is reused (the moving tag moved onto it only where it does not exist yet, as ``build`` reuses).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..engine import Engine, LineSink
from ..errors import ImagectlError, OperationError
from ..evidence import dsse
from ..evidence.verify import public_key
from ..matrix.model import MACHINES
from ..tags.managed import open_tag_store
from ..tags.moves import guarded_move
from ..tags.naming import MOVING_TAG, immutable_tag, short_digest
from .builder import base_resolver
from .immutable import existing_immutable
from .plan import BuildRequest, Plan, plan_build
from .platforms import OCI_INDEX, IndexEntry, index_key, index_manifest
from .trace import Trace

if TYPE_CHECKING:
    from ..registry.client import RegistryClient

CHECK_REPORT_LIMIT = 16 * 1024 * 1024
UNSIGNED = "unsigned"
NOT_CHECKED = "signed, not checked"  # signed, but no key is configured to check it with


@dataclass(frozen=True)
class Child:
    """One platform's image the index names: its platform, immutable tag, manifest digest and where its check
    ran (``native``, ``emulated on x86_64``)."""

    platform: str
    tag: str
    digest: str
    checked: str
    signature: str = UNSIGNED  # of its check report: "verified ed25519:KEYID", UNSIGNED or NOT_CHECKED


@dataclass
class IndexResult:
    """What ``index`` did: the tag and digest the moving tag now names (or already named), whether it is a new
    index, the children, and notes."""

    profile: str
    repository: str
    tag: str
    digest: str
    status: str  # "assembled", "reused" or "single" (one platform: its image itself)
    children: list[Child] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` document."""
        return {"profile": self.profile, "repository": self.repository, "tag": self.tag, "digest": self.digest,
                "status": self.status, "notes": list(self.notes),
                "platforms": [{"platform": c.platform, "tag": c.tag, "digest": c.digest, "check": c.checked,
                               "signature": c.signature} for c in self.children]}


def assemble_index(request: BuildRequest, config: Config, engine: Engine, log: LineSink) -> IndexResult:
    """Assemble and tag the index of ``request``'s platforms (see the module docstring).

    Raises OperationError when a platform's image is missing, of another platform or not checked, or an immutable
    tag names another index, or a check report is unsigned or signed by another key than the configured one;
    ConfigError for a key file that is no Ed25519 PEM key; InputError/OperationError of planning (a lock that cannot
    be had); RegistryError.
    """
    from ..registry.access import client_for  # here: the registry package loads requests

    key = public_key(config)  # first: a key that cannot be read stops the command before anything is read
    plans = [plan_build(request, config, base_resolver(config, engine), Trace(), p) for p in request.platforms]
    repo = plans[0].repository
    store = open_tag_store(repo, config, engine)
    client = client_for(repo.domain, config.insecure_hosts, config.registry_timeout)
    children = [_child(plan, store, client, key) for plan in plans]
    name = request.profile.name
    result = IndexResult(name, repo.familiar, children[0].tag, children[0].digest, "single", children)
    if len(children) > 1:
        result = _index(plans, children, store, client, log)
    for child in children:
        log(f"{child.platform}: {repo.familiar}:{child.tag} ({short_digest(child.digest)}, checked {child.checked}, "
            f"check report {child.signature})")
        if key is None:
            result.notes.append(f"{child.platform}: {repo.familiar}:{child.tag}: its check report is {child.signature}"
                                " (no [attest] key configured to check it with)")
    current = store.digest(MOVING_TAG)
    if current == result.digest:
        result.notes.append(f"{MOVING_TAG} already names {short_digest(result.digest)}")
    elif result.status == "reused" and current is not None:
        result.notes.append(f"{MOVING_TAG} stays on {short_digest(current)} (a rollback or newer build)")
    else:
        moved = guarded_move(store, MOVING_TAG, result.digest, result.tag, current, "build")
        result.notes += [f"{MOVING_TAG}: {moved.note}"] if moved.note else []
    return result


def _child(plan: Plan, store: Any, client: RegistryClient, key: dsse.PublicKey | None) -> Child:
    """The image ``plan``'s build pushed, with where its check ran; raises OperationError when there is none, it
    is of another platform, or it carries no passing check report of its platform that counts under ``key``."""
    platform, repo = plan.platform, plan.repository
    name = plan.request.profile.name
    tag = store.tag_with_key(plan.key)
    digest = store.digest(tag) if tag else None
    if tag is None or digest is None:
        raise OperationError(f"index {name}: no {platform} image with build key {plan.key[:10]} in {repo.familiar} "
                             f"(build and push it first: imagectl build {name} --platform {platform} --push)")
    manifest = client.get_manifest(repo.path, digest)
    config = None if manifest.is_index else client.get_image_config(repo.path, manifest)
    found = f"{config.os or 'linux'}/{config.architecture}" if config else "an index"
    if found != platform:
        raise OperationError(f"index {name}: {repo.familiar}:{tag} is {found}, not a {platform} image")
    report = find_check_report(client, repo.path, digest, platform, key)
    if report is None:
        raise OperationError(f"index {name}: {repo.familiar}:{tag} carries no passing check report: not checked on "
                             f"{platform}; nothing assembled (build it again with a registry: imagectl build {name} "
                             f"--platform {platform} --push)")
    if report.refused:
        raise OperationError(f"index {name}: {repo.familiar}:{tag} ({short_digest(digest)}): {report.refused}; "
                             "nothing assembled")
    return Child(platform, tag, digest, report.where, report.signature)


def _index(plans: Sequence[Plan], children: Sequence[Child], store: Any, client: RegistryClient,
           log: LineSink) -> IndexResult:
    """Put the index of ``children`` under its immutable tag (or find the one with its key); its result."""
    from ..registry.manifest import Manifest

    first = plans[0]
    repo, name = first.repository, first.request.profile.name
    key = index_key({p.platform: p.key for p in plans})
    found = store.tag_with_key(key)
    if found is not None:
        digest = store.digest(found) or ""
        log(f"reusing {repo.familiar}:{found}: an index with build key {key[:10]} exists")
        return IndexResult(name, repo.familiar, found, digest, "reused", list(children))
    entries = []
    for child in children:
        manifest = client.get_manifest(repo.path, child.digest)
        entries.append(IndexEntry(child.platform, manifest.media_type, child.digest, len(manifest.raw),
                                  child.checked))
    data = index_manifest(entries)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    tag = immutable_tag(first.request.profile, key, image=digest)
    if existing_immutable(store, tag, lambda d: d == digest) is None:
        log(f"pushing {repo.familiar}:{tag} (an index of {', '.join(c.platform for c in children)})")
        client.put_manifest(repo.path, tag, Manifest.from_bytes(data, OCI_INDEX))
    return IndexResult(name, repo.familiar, tag, digest, "assembled", list(children))


@dataclass(frozen=True)
class CheckReport:
    """A passing check report of one image on one platform: where it ran (``native``, ``emulated on x86_64``), its
    signature state (``verified ed25519:KEYID``, UNSIGNED, NOT_CHECKED) and, when it does not count under the
    configured key, why ("" when it counts)."""

    where: str
    signature: str
    refused: str = ""


def find_check_report(client: RegistryClient, repository: str, digest: str, platform: str,
                      key: dsse.PublicKey | None) -> CheckReport | None:
    """The passing check report attached to image ``digest`` about that image on ``platform`` (None when there is
    none): one signed by ``key`` when there is one; else, with a ``key``, the first such report refused (unsigned,
    or no valid signature by ``key``); without a ``key``, the first one, unchecked.  Raises RegistryError when the
    registry cannot be read."""
    from ..evidence.bundle import announced_predicate
    from ..evidence.statement import CHECK_REPORT
    from ..registry.referrers import list_referrers

    found: list[CheckReport] = []
    for referrer in list_referrers(client, repository, digest):
        if announced_predicate(referrer.annotations) != CHECK_REPORT:
            continue
        read = _predicate(client, repository, referrer.digest, digest, key)
        if read is None:
            continue
        predicate, signature, refused = read
        where = predicate.get("where")
        if not isinstance(where, Mapping) or predicate.get("result") != "pass" or where.get("platform") != platform:
            continue
        host = str(where.get("host") or "")
        ran = "native" if host == MACHINES.get(platform) else f"emulated on {host or 'another host'}"
        found.append(CheckReport(ran, signature, refused))
    return next((r for r in found if not r.refused), found[0] if found else None)


def check_report_where(client: RegistryClient, repository: str, digest: str, platform: str) -> str | None:
    """Where the passing check report attached to image ``digest`` says its check ran, signatures not checked
    (:func:`find_check_report` without a key); None when there is none.  Raises RegistryError."""
    report = find_check_report(client, repository, digest, platform, None)
    return report.where if report else None


def _predicate(client: RegistryClient, repository: str, artifact: str, subject: str,
               key: dsse.PublicKey | None) -> tuple[Mapping[str, Any], str, str] | None:
    """(the predicate, its signature state, why it does not count under ``key`` or "") of the statement artifact
    ``artifact`` carries when it is about ``subject``, else None (a malformed or unreadable artifact is no report)."""
    from ..evidence.bundle import open_layer
    from ..evidence.statement import parse_statement, subject_digests

    try:
        layers = client.get_manifest(repository, artifact).layers()
        if len(layers) != 1:
            return None
        layer = open_layer(layers[0].media_type, client.read_blob(repository, layers[0].digest, CHECK_REPORT_LIMIT))
        signature, refused = _signature(layer.envelope, key)
        data = layer.statement if layer.envelope is None else dsse.open_envelope(layer.envelope)[1]
        statement = parse_statement(data, "check report")
    except (ImagectlError, ValueError):
        return None
    predicate = statement.get("predicate")
    if subject not in subject_digests(statement) or not isinstance(predicate, Mapping):
        return None
    return predicate, signature, refused


def _signature(envelope: Mapping[str, Any] | None, key: dsse.PublicKey | None) -> tuple[str, str]:
    """(the signature state, why the report does not count under ``key`` or "") of a check report's layer, its DSSE
    envelope (in a Sigstore bundle or not) or None for a plain statement.  Raises SignatureError for an envelope that
    is no envelope."""
    if envelope is None:
        if key is None:
            return UNSIGNED, ""
        return UNSIGNED, f"its check report is unsigned, and only one signed by the [attest] key {_named(key)} counts"
    if key is None:
        dsse.open_envelope(envelope)
        return NOT_CHECKED, ""
    try:
        dsse.verify(envelope, key)
    except dsse.SignatureError:
        signers = [dsse.hex_keyid(str(s.get("keyid") or "?")) for s in envelope.get("signatures") or ()
                   if isinstance(s, dict)]
        if any(dsse.names_key(signer, key) for signer in signers):
            return "invalid", f"its check report's signature by the [attest] key {_named(key)} does not verify"
        by = f"signed by another key (ed25519:{', '.join(s[:16] for s in signers)})" if signers else "not signed"
        return "invalid", f"its check report is {by}, not by the [attest] key {_named(key)}"
    return f"verified {_named(key)}", ""


def _named(key: dsse.PublicKey) -> str:
    return f"ed25519:{key.keyid[:16]}"
