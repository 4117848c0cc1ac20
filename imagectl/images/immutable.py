"""Immutable tags are never overwritten: what a tag names, read right before it is written.

Their names end with the image id (:func:`imagectl.tags.naming.immutable_tag`), so two builds of one key in the
same second (``--force``, ``-j``, two machines) get two names; and right before a tag is written (locally, then
pushed; or copied by an import) it is read (one HEAD): a tag that already names another image fails the write,
one that already names this very image is not written again.  Failing, not renaming: the name is unique by
construction, so a clash means something else wrote that tag.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine import Engine
from ..errors import OperationError
from ..reference import Reference
from ..tags.naming import short_digest
from ..tags.store import TagStore


def existing_immutable(store: TagStore, tag: str, is_this_image: Callable[[str], bool]) -> str | None:
    """What the immutable ``tag`` names before it is written: None when it does not exist yet, the digest it
    names when ``is_this_image(digest)`` (writing it again would change nothing).  One read of the tag.

    Raises OperationError when it names another image (an immutable tag is never overwritten), and
    RegistryError/EngineError when the tag cannot be read.
    """
    existing = store.digest(tag)
    if existing is None or is_this_image(existing):
        return existing
    raise OperationError(f"{store.repository.familiar}:{tag} already names another image ({short_digest(existing)}):"
                         " an immutable tag is never overwritten; nothing was pushed")


def image_of(engine: Engine, repo: Reference, image_id: str, *, registry: bool) -> Callable[[str], bool]:
    """Whether a digest read from ``repo``'s store is the local image ``image_id``: in the local engine its id;
    in a registry a digest the engine recorded for it when it pushed it there (a repo digest)."""
    def same(digest: str) -> bool:
        if not registry:
            return digest == image_id
        info = engine.inspect(image_id)
        return info is not None and f"{repo.familiar}@{digest}" in info.repo_digests

    return same
