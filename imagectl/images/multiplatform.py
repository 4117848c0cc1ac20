"""``build --platform linux/amd64,linux/arm64``: one image per platform, checked, then one OCI image index.

Each platform is planned on its own (its own lock, :func:`~imagectl.lock.make.lock_for`, so its own build key) and
the index's build key is derived from theirs (:func:`.platforms.index_key`): an unchanged build is found by one tag
listing and reused whole.  Otherwise, in this order, so that a failure leaves every tag where it was:

1. each platform is built (buildah ``--platform``) and checked in a container, natively or under QEMU, before the
   next one is built; nothing is tagged yet;
2. the images are written as one OCI layout (each exported as the engine pushes it, blobs shared) whose root is
   the index, each entry annotated with how its image was checked, and pushed blob by blob: the blobs, each
   platform's image manifest and the index, all by digest; no tag names any of them yet (:mod:`.publish`);
3. each platform's image gets its SBOM, provenance and check report (attestations name the image, not the index);
4. the immutable tag is put onto the index (:func:`.publish.name_published`), then the moving tag moves onto it
   (one manifest PUT each, :func:`~imagectl.tags.moves.guarded_move`): every platform at once.

An index the build key finds whose images lack their attestations is not reused but rebuilt, as a one-platform
image is (:mod:`.publish`).

An index needs a registry: the CLI refuses several platforms without ``[registry] url``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Config
from ..engine import Engine
from ..errors import BuildError, OperationError
from ..evidence.attach import BuiltImage, attest_build
from ..imagecheck.run import CheckRun
from ..progress.heartbeat import Heartbeat
from ..tags.managed import open_tag_store
from ..tags.moves import guarded_move
from ..tags.naming import MOVING_TAG, immutable_tag, short_digest
from ..tags.store import TagStore
from .builder import BuildResult, PlatformResult, built_image, check_built, rebuilt, reuse_key
from .immutable import existing_immutable
from .publish import Unattested, name_published
from .plan import Plan
from .platforms import OCI_INDEX, IndexEntry, index_key, index_manifest
from .trace import Trace


@dataclass(frozen=True)
class _Built:
    plan: Plan
    image_id: str
    check: CheckRun
    result: PlatformResult


def build_index(plans: Sequence[Plan], config: Config, engine: Engine, trace: Trace) -> BuildResult:
    """Build, check and push every platform of ``plans`` (one per platform, of one request), push their index, attest
    the images and put the index under the immutable and moving tags (see the module docstring), or reuse it; raises
    BuildError naming the failing step."""
    first = plans[0]
    repo, log = first.repository, trace.log
    store = open_tag_store(repo, config, engine)
    key = index_key({plan.platform: plan.key for plan in plans})
    found: BuildResult | Unattested | None = None
    if not first.request.options.force:
        with trace.timed("lookup"):
            found = reuse_key(key, repo, store, log, config=config)
    if isinstance(found, BuildResult):
        found.platforms = [PlatformResult(c.platform, c.digest) for c in store.children(found.digest)
                           if not c.attachment]
        return found
    return rebuilt(found, _build_index(plans, key, store, config, engine, trace))


def _build_index(plans: Sequence[Plan], key: str, store: TagStore, config: Config, engine: Engine,  # noqa: PLR0913
                 trace: Trace) -> BuildResult:
    """Build, check, push, attest and tag the index of ``plans`` (steps 1 to 4 of the module docstring)."""
    repo = plans[0].repository
    built, downloads = [], []
    with contextlib.ExitStack() as images:  # an assembled image's layout lives until the index is pushed
        for plan in plans:
            fresh = images.enter_context(built_image(plan, config, engine, trace))
            downloads += fresh.pip.downloads
            check, checked = check_built(plan, config, engine, fresh.image_id, trace)
            built.append(_Built(plan, fresh.image_id, check, checked))
        digest, tag, pushed, children = _push_index(built, key, config, engine, store, trace)
    notes: list[str] = []
    for item in built:  # each platform's image is attested, as a one-platform build's is
        notes += attest_build(item.plan, config, engine, BuiltImage(item.image_id, children[item.plan.platform],
                                                                    item.check), trace)
    result = BuildResult(repo.path.rsplit("/", 1)[-1], "built", tag, digest, notes=sorted(set(notes)),
                         downloads=downloads, engine=engine.name, reproducible=engine.reproducible,
                         pushed_bytes=pushed, image_id=digest,
                         platforms=[replace(b.result, digest=children[b.plan.platform]) for b in built])
    with trace.timed("tag"):
        name_published(store, tag, digest, lambda found: False)
        moved = guarded_move(store, MOVING_TAG, digest, tag, store.digest(MOVING_TAG), "build")
    if moved.note:
        result.notes.append(f"{MOVING_TAG}: {moved.note}")
    return result


def _push_index(built: Sequence[_Built], key: str, config: Config, engine: Engine,  # noqa: PLR0913
                store: TagStore, trace: Trace) -> tuple[str, str, int | None, dict[str, str]]:
    """Write the images and their index as one OCI layout and push it by its digest (its immutable tag is put once
    its images are attested); ``(index digest, tag, bytes sent or None, platform -> image digest)``.  Raises
    BuildError (step ``tag`` or ``push``)."""
    from ..registry.access import client_for  # here: the registry package loads requests
    from ..registry.layout_push import push_layout

    first = built[0].plan
    repo, log = first.repository, trace.log
    with tempfile.TemporaryDirectory(prefix="imagectl-index-") as tmp:
        with trace.timed("push"):
            layout, entries = _index_layout(built, engine, Path(tmp))
        data = (layout / "blobs" / "sha256" / _root_hex(layout)).read_bytes()
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        tag = immutable_tag(first.request.profile, key, image=digest)
        try:
            existing = existing_immutable(store, tag, lambda found: found == digest)
        except OperationError as exc:
            raise BuildError(str(exc), "tag") from None
        children = {e.platform: e.digest for e in entries}
        if existing is not None:
            log(f"{repo.familiar}:{tag} already names this index ({short_digest(digest)}): not pushed again")
            return digest, tag, None, children
        log(f"pushing {repo.familiar}:{tag} (an index of {', '.join(children)}) by its digest; tagged once its "
            "images' attestations are attached")
        with trace.timed("push"), Heartbeat(log, "pushing") as beat:
            client = client_for(repo.domain, config.insecure_hosts, config.registry_timeout)
            try:
                done = push_layout(client, layout, repo.path, None, on_line=beat.sink)
            except OperationError as exc:
                raise BuildError(f"push of {repo.familiar}:{tag}: {exc}", "push") from None
    return done.digest, tag, done.uploaded, children


def _index_layout(built: Sequence[_Built], engine: Engine, tmp: Path) -> tuple[Path, list[IndexEntry]]:
    """One OCI layout in ``tmp/index`` holding every image of ``built`` (each exported by the engine, blobs
    linked in) and, as its root, their index; the index's entries."""
    from ..registry.layout import link_or_copy, root_manifest

    engine_dirs, layout = tmp / "images", tmp / "index"
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    engine_dirs.mkdir()
    entries = []
    for number, item in enumerate(built):
        exported = engine_dirs / str(number)
        try:
            engine.export_layout(item.image_id, exported)
        except OperationError as exc:
            raise BuildError(f"cannot write the {item.plan.platform} image as an OCI layout: {exc}", "push") from None
        manifest = root_manifest(exported)
        entries.append(IndexEntry(item.plan.platform, manifest.media_type, manifest.digest, len(manifest.raw),
                                  item.result.check))
        for blob in (exported / "blobs" / "sha256").iterdir():
            if not (blobs / blob.name).exists():
                link_or_copy(blob, blobs / blob.name)
    data = index_manifest(entries)
    hex_digest = hashlib.sha256(data).hexdigest()
    (blobs / hex_digest).write_bytes(data)
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": OCI_INDEX, "digest": f"sha256:{hex_digest}", "size": len(data)}]}))
    return layout, entries


def _root_hex(layout: Path) -> str:
    return str(json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]).removeprefix("sha256:")
