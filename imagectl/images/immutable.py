"""Immutable tags are never overwritten: what a tag names, read right before it is written.

Their names end with the image id (:func:`imagectl.tags.naming.immutable_tag`), so two builds of one key in the
same second (``--force``, ``-j``, two machines) get two names; and right before a tag is written (locally, then
pushed; or copied by an import) it is read (one HEAD): a tag that already names another image fails the write,
one that already names this very image is not written again.  Failing, not renaming: the name is unique by
construction, so a clash means something else wrote that tag.

"This very image", for a build (:class:`ThisImage`): the same image *content*, whoever pushed it.  An image's id
is the digest of its config, which holds every label (the build key among them) and the diff id of every layer;
so a manifest whose config digest is this image's id holds this very image, though another process or machine
pushed it (its manifest digest may even differ, with other layer compression).  That is what two identical builds
racing each other meet (issue 36, item 2): a reproducible engine (buildah) gives both the same image, so, done in
the same second, the same name; the second finds the first's push under it, pushes nothing, and reports the
first's image.  It used to fail, because only the engine's own record of its pushes counted, and that record is
per process (buildah) or per daemon (Docker).  Two builds of the same inputs that give two *different* images (the
Docker engine is not reproducible: file mtimes reach its layers) are not identical: they get two names and both are
published, as two ``--force`` builds are; neither fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..engine import Engine
from ..errors import OperationError
from ..reference import Reference
from ..tags.naming import short_digest
from ..tags.store import TagStore


def existing_immutable(store: TagStore, tag: str, is_this_image: Callable[[str], bool]) -> str | None:
    """What the immutable ``tag`` names before it is written: None when it does not exist yet, the digest it
    names when ``is_this_image(digest)`` (writing it again would change nothing), or, for a :class:`ThisImage`,
    when the image under it has this image's id (pushed by another build of the very same image: one more GET).

    Raises OperationError when it names another image (an immutable tag is never overwritten), and
    RegistryError/EngineError when the tag cannot be read.
    """
    existing = store.digest(tag)
    if existing is None or same_image(store, existing, is_this_image):
        return existing
    raise OperationError(f"{store.repository.familiar}:{tag} already names another image ({short_digest(existing)}):"
                         " an immutable tag is never overwritten; nothing was pushed")


def same_image(store: TagStore, digest: str, is_this_image: Callable[[str], bool]) -> bool:
    """Whether the image ``digest`` of ``store`` is the one ``is_this_image`` stands for: it says so, or, for a
    :class:`ThisImage` in a registry, the image under ``digest`` has its id (one GET; see the module docstring).
    Raises RegistryError when that manifest cannot be read."""
    if is_this_image(digest):
        return True
    if not isinstance(is_this_image, ThisImage) or not is_this_image.registry:
        return False
    found = store.image_id(digest)
    return found is not None and _hex(found) == _hex(is_this_image.image_id)


def _hex(image_id: str) -> str:
    """An image id without its ``sha256:`` (buildah gives ids without it, Docker with it)."""
    return image_id.rpartition(":")[2]


@dataclass(frozen=True)
class ThisImage:
    """Whether a digest read from ``repo``'s store is the local image ``image_id``: in the local engine its id; in
    a registry (``registry``) a digest the engine recorded for it when it pushed it there (a repo digest), or the
    image itself (see the module docstring: :func:`existing_immutable` asks the store for that)."""

    engine: Engine
    repo: Reference
    image_id: str
    registry: bool

    def __call__(self, digest: str) -> bool:
        if not self.registry or digest == self.image_id:
            return _hex(digest) == _hex(self.image_id)
        info = self.engine.inspect(self.image_id)
        return info is not None and f"{self.repo.familiar}@{digest}" in info.repo_digests


def image_of(engine: Engine, repo: Reference, image_id: str, *, registry: bool) -> ThisImage:
    """Whether a digest read from ``repo``'s store is the local image ``image_id`` (:class:`ThisImage`)."""
    return ThisImage(engine, repo, image_id, registry)
