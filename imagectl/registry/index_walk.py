"""Walking an image index and the manifests under it: the one place for the rule of how deep indexes may nest.

An index may list other indexes (the OCI image spec allows it), and a registry, honest or not, decides how deep that
goes: a hostile one serves 1,500 levels.  Every walk over an index's children goes through :func:`walk_index`, which
keeps its own stack (no recursion, so no RecursionError however deep) and refuses a manifest with more than
``MAX_INDEX_DEPTH`` indexes above it, in one line naming where the walk began and the depth.  Eight is what the common
engines follow (containerd's and Docker's image pulls give up on deeper nesting too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from ..errors import RegistryError
from .manifest import Descriptor, Manifest

MAX_INDEX_DEPTH = 8  # indexes above the deepest manifest a walk follows


class IndexDepthError(RegistryError):
    """An index nests deeper than :data:`MAX_INDEX_DEPTH` (exit 1)."""


def _all_children(manifest: Manifest) -> Sequence[Descriptor]:
    return manifest.children()


def walk_index(root: Manifest, fetch: Callable[[Descriptor], Manifest | None], where: str, *,
               follow: Callable[[Manifest], Sequence[Descriptor]] = _all_children,
               limit: int = MAX_INDEX_DEPTH) -> Iterator[Manifest]:
    """``root`` and every manifest under it, each after all of those below it (the order a registry takes them in).

    ``fetch(child)`` reads a child's manifest, or None to leave it (and what is under it) out; ``follow`` says which
    entries of a manifest to go into (default: all of an index's, none of an image's); a digest met twice is gone
    into once.  ``where`` names the start for the message (``registry HOST: REPO@DIGEST``).  Raises IndexDepthError,
    before reading it, for a manifest with more than ``limit`` indexes above it; what ``fetch`` raises.
    """
    seen = {root.digest}
    stack: list[tuple[Manifest, Iterator[Descriptor]]] = [(root, iter(follow(root)))]
    while stack:
        manifest, pending = stack[-1]
        child = next(pending, None)
        if child is None:
            stack.pop()
            yield manifest
            continue
        if child.digest in seen:
            continue
        if len(stack) >= limit + 1:
            raise IndexDepthError(f"{where}: image indexes nest more than {limit} deep (the index at depth {limit}, "
                                  f"{manifest.digest}, lists {child.digest}); refusing to follow them further")
        seen.add(child.digest)
        loaded = fetch(child)
        if loaded is not None:
            stack.append((loaded, iter(follow(loaded))))
