"""Custody: an image is published only with its attestations.

A tag is how a user finds an image: ``latest``, a channel, the immutable tag ``build`` reuses by its build key.  So
no tag names an image before its SBOM, provenance and check report are attached to it.  ``build`` (and the index
of a multi-platform build, :mod:`.multiplatform`) therefore goes, after the check, in this order:

1. push the image (or the index and its images) by its digest (:func:`push_by_digest`; OCI distribution's ``PUT
   /v2/NAME/manifests/DIGEST``): the registry holds it, no tag names it;
2. attach the attestations (:func:`imagectl.evidence.attach.attest_build`), whose subject is that digest (on a
   registry without the referrers API, the tag-schema fallback writes ``sha256-HEX`` tags: they name the list of
   referrers, never the image, and no listing of the repository's tags shows them);
3. put the immutable tag (:func:`name_published`), then move the moving tag.

A failure at 1 or 2 (a registry that refuses the referrer's manifest, a 500, Ctrl-C) leaves an untagged manifest
that the registry's garbage collection removes; no tag names it, so no one pulls it, and no later ``build`` reuses
it: a reuse looks images up by their immutable tag.

Reuse (:func:`unattested`): an image the build key finds under its immutable tag, but without its attestations (an
older imagectl tagged before it attached, or someone copied the image without its referrers), is not reused: the
build rebuilds it, and the rebuild is attached and tagged in the order above.  Rebuilt rather than attested as it
is, because two of the three attestations are records of the build that made the image: the check report is what
the in-image check found when it ran in that build, and the provenance says when that build ran and on which
engine.  A later ``build`` (another process, often another machine) has neither, and writing them now for an image
it did not build or check would be a claim it cannot back.  A rebuild runs the check for real, from the layer
cache it is quick, and the buildah engine makes the very same image (same digest): its attestations then attach to
the image the old tag names too.  The moving tag never moves onto the unattested image.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config
from ..engine import Engine, LineSink, Pushed
from ..errors import BuildError, OperationError
from ..evidence.attach import missing_attestations
from ..reference import Reference
from ..tags.naming import MOVING_TAG, short_digest
from ..tags.store import TagStore
from .immutable import same_image

if TYPE_CHECKING:
    from .known_layers import RegistryLayers


def push_by_digest(engine: Engine, image_id: str, repo: Reference, config: Config,  # noqa: PLR0913
                   on_line: LineSink, layout: Path | None = None) -> Pushed:
    """Push the local image ``image_id`` to ``repo`` by its digest, no tag (step 1 of the module docstring): the
    OCI ``layout`` it was loaded from (an assembled image), else the engine's export of it
    (:meth:`~imagectl.engine.Engine.export_layout`), blob by blob, sending only what the registry lacks.  An engine
    that compresses layers itself (Docker's) leaves out of its export the layers whose blobs the registry holds
    (:mod:`.known_layers`: it compresses only the new ones), and a line says how many it compressed.  Raises
    BuildError (step ``push``)."""
    from ..registry.access import client_for  # here: the registry package loads requests
    from ..registry.layout import LayoutError
    from ..registry.layout_push import push_layout
    from .known_layers import LayerDigests, RegistryLayers

    with tempfile.TemporaryDirectory(prefix="imagectl-push-") as tmp:
        try:
            with client_for(repo.domain, config.insecure_hosts, config.registry_timeout) as client:
                if layout is None:
                    layout = Path(tmp) / "layout"
                    _export(engine, image_id, layout, RegistryLayers(client, repo.path, LayerDigests.default(),
                                                                     on_line))
                done = push_layout(client, layout, repo.path, None, on_line=on_line)
        except (OperationError, LayoutError) as exc:  # LayoutError: a blob the registry held went meanwhile
            raise BuildError(f"push of {repo.familiar}: {exc}", "push") from None
    return Pushed(done.digest, done.uploaded, done.total)


def _export(engine: Engine, image_id: str, layout: Path, known: RegistryLayers) -> None:
    """``engine``'s export of ``image_id`` into ``layout``, the blobs ``known`` finds in the registry left out; the
    mapping of layers to blobs saved, and what was compressed said.  Raises OperationError."""
    known.on_line(f"push: writing {short_digest(image_id)} as an OCI layout")
    try:
        engine.export_layout(image_id, layout, known=known)
    finally:
        known.digests.save()
    if summary := known.summary():
        known.on_line(summary)


def name_published(store: TagStore, tag: str, target: str, is_this_image: Callable[[str], bool]) -> bool:
    """Put the immutable ``tag`` onto ``target`` once its attestations are attached (step 3): read it again first,
    as another build may have written it meanwhile; True when it was written, False when it already named
    ``target`` (or, ``is_this_image``, the same image pushed by another build of it).

    Raises BuildError (step ``tag``) when it names another image by now (an immutable tag is never overwritten),
    and RegistryError when it cannot be read or written.
    """
    found = store.digest(tag)
    if found is None:
        store.point(tag, target)
        return True
    if found == target or same_image(store, found, is_this_image):  # another build of this very image wrote it
        return False
    raise BuildError(f"{store.repository.familiar}:{tag} was written meanwhile and names another image "
                     f"({short_digest(found)}): an immutable tag is never overwritten; {short_digest(target)} is in "
                     "the registry with its attestations, untagged", "tag")


@dataclass(frozen=True)
class Unattested:
    """An image the build key found under ``tag`` (``digest``) that lacks attestations: ``missing`` says which, per
    image (``sbom, provenance`` or, for an index, ``linux/arm64: check report``)."""

    tag: str
    digest: str
    missing: tuple[str, ...]

    def line(self, repo: Reference) -> str:
        """What ``build`` does about it, as one log line."""
        return (f"not reusing {repo.familiar}:{self.tag} ({short_digest(self.digest)}): it has the build key but "
                f"lacks its attestations ({'; '.join(self.missing)} missing); rebuilding it, and {MOVING_TAG} "
                "moves only onto an attested image")

    def note(self, rebuilt: str) -> str:
        """The note of the build that rebuilt it as ``rebuilt`` (a digest)."""
        same = ("the same image: its attestations are now attached to it" if rebuilt == self.digest
                else f"another image, {short_digest(rebuilt)}, attested and tagged")
        return (f"rebuilt: {self.tag} ({short_digest(self.digest)}) lacked its attestations "
                f"({'; '.join(self.missing)}); the rebuild is {same}")


def unattested(store: TagStore, config: Config, repo: Reference, tag: str, digest: str) -> Unattested | None:
    """Whether the image ``digest`` (``tag`` names it) of ``repo`` lacks any of its attestations (for an index:
    any platform's image lacks any); None when it carries them all, or without a registry (a local image cannot
    carry them).  One referrers listing per image; raises RegistryError when the registry cannot be read."""
    if not config.registry_url:
        return None
    from ..registry.access import client_for  # here: the registry package loads requests

    images = [(c.platform, c.digest) for c in store.children(digest) if not c.attachment] or [("", digest)]
    with client_for(repo.domain, config.insecure_hosts, config.registry_timeout) as client:
        gaps = [(platform, missing_attestations(client, repo.path, image)) for platform, image in images]
    missing = tuple(f"{platform}: {', '.join(names)}" if platform else ", ".join(names)
                    for platform, names in gaps if names)
    return Unattested(tag, digest, missing) if missing else None
