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

Then the index (:func:`.platforms.index_manifest`, each entry annotated with where its check ran: ``native`` or
``emulated on x86_64``) is put under its immutable tag and the moving tag moved onto it (one manifest PUT each).
One platform needs no index: the moving tag moves onto that image.  An index with the same build key already
there is reused (the moving tag moved onto it only where it does not exist yet, as ``build`` reuses).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..engine import Engine, LineSink
from ..errors import ImagectlError, OperationError
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


@dataclass(frozen=True)
class Child:
    """One platform's image the index names: its platform, immutable tag, manifest digest and where its check
    ran (``native``, ``emulated on x86_64``)."""

    platform: str
    tag: str
    digest: str
    checked: str


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
                "platforms": [{"platform": c.platform, "tag": c.tag, "digest": c.digest, "check": c.checked}
                              for c in self.children]}


def assemble_index(request: BuildRequest, config: Config, engine: Engine, log: LineSink) -> IndexResult:
    """Assemble and tag the index of ``request``'s platforms (see the module docstring).

    Raises OperationError when a platform's image is missing, of another platform or not checked, or an immutable
    tag names another index; InputError/OperationError of planning (a lock that cannot be had); RegistryError.
    """
    from ..registry.access import client_for  # here: the registry package loads requests

    plans = [plan_build(request, config, base_resolver(config, engine), Trace(), p) for p in request.platforms]
    repo = plans[0].repository
    store = open_tag_store(repo, config, engine)
    client = client_for(repo.domain, config.insecure_hosts, config.registry_timeout)
    children = [_child(plan, store, client) for plan in plans]
    name = request.profile.name
    result = IndexResult(name, repo.familiar, children[0].tag, children[0].digest, "single", children)
    if len(children) > 1:
        result = _index(plans, children, store, client, log)
    for child in children:
        log(f"{child.platform}: {repo.familiar}:{child.tag} ({short_digest(child.digest)}, checked {child.checked})")
    current = store.digest(MOVING_TAG)
    if current == result.digest:
        result.notes.append(f"{MOVING_TAG} already names {short_digest(result.digest)}")
    elif result.status == "reused" and current is not None:
        result.notes.append(f"{MOVING_TAG} stays on {short_digest(current)} (a rollback or newer build)")
    else:
        moved = guarded_move(store, MOVING_TAG, result.digest, result.tag, current, "build")
        result.notes += [f"{MOVING_TAG}: {moved.note}"] if moved.note else []
    return result


def _child(plan: Plan, store: Any, client: RegistryClient) -> Child:
    """The image ``plan``'s build pushed, with where its check ran; raises OperationError when there is none, it
    is of another platform, or it carries no passing check report of its platform."""
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
    checked = check_report_where(client, repo.path, digest, platform)
    if checked is None:
        raise OperationError(f"index {name}: {repo.familiar}:{tag} carries no passing check report: not checked on "
                             f"{platform}; nothing assembled (build it again with a registry: imagectl build {name} "
                             f"--platform {platform} --push)")
    return Child(platform, tag, digest, checked)


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


def check_report_where(client: RegistryClient, repository: str, digest: str, platform: str) -> str | None:
    """Where the passing check report attached to image ``digest`` says its check ran (``native``, ``emulated on
    x86_64``), when it is about that image on ``platform``; None when there is no such report.  Signatures are not
    verified here (``imagectl verify`` does that).  Raises RegistryError when the registry cannot be read."""
    from ..evidence.attach import PREDICATE_ANNOTATION
    from ..evidence.statement import CHECK_REPORT
    from ..registry.referrers import list_referrers

    for referrer in list_referrers(client, repository, digest):
        if referrer.annotations.get(PREDICATE_ANNOTATION) != CHECK_REPORT:
            continue
        predicate = _predicate(client, repository, referrer.digest, digest)
        where = predicate.get("where") if isinstance(predicate, Mapping) else None
        if not isinstance(where, Mapping) or predicate.get("result") != "pass" or where.get("platform") != platform:
            continue
        host = str(where.get("host") or "")
        return "native" if host == MACHINES.get(platform) else f"emulated on {host or 'another host'}"
    return None


def _predicate(client: RegistryClient, repository: str, artifact: str, subject: str) -> Mapping[str, Any] | None:
    """The predicate of the statement artifact ``artifact`` carries when it is about ``subject``, else None."""
    from ..evidence import dsse
    from ..evidence.statement import PAYLOAD_TYPE, parse_statement, subject_digests

    try:
        layers = client.get_manifest(repository, artifact).layers()
        if len(layers) != 1:
            return None
        data = client.read_blob(repository, layers[0].digest, CHECK_REPORT_LIMIT)
        if layers[0].media_type != PAYLOAD_TYPE:
            data = dsse.open_envelope(json.loads(data))[1]
        statement = parse_statement(data, "check report")
    except (ImagectlError, ValueError):  # a malformed or unreadable artifact is no check report
        return None
    predicate = statement.get("predicate")
    return predicate if subject in subject_digests(statement) and isinstance(predicate, Mapping) else None
