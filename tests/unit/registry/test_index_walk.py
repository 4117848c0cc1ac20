"""The one walk over an index and what is under it (issue 36, item 4): iterative, children before parents, each
digest once, and refused past ``MAX_INDEX_DEPTH`` nested indexes, before the manifest past it is read."""

from __future__ import annotations

import json

import pytest

from imagectl.registry.index_walk import MAX_INDEX_DEPTH, IndexDepthError, walk_index
from imagectl.registry.manifest import OCI_INDEX, OCI_MANIFEST, Descriptor, Manifest


def _image(name: str) -> Manifest:
    body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": f"sha256:{name * 64}"[:71],
                       "size": 2}}
    return Manifest.from_bytes(json.dumps(body).encode())


def _index(*children: Manifest, arch: str = "amd64") -> Manifest:
    entries = [{"mediaType": c.media_type, "digest": c.digest, "size": len(c.raw),
                "platform": {"os": "linux", "architecture": arch}} for c in children]
    return Manifest.from_bytes(json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode())


class Store:
    """Manifests by digest, and the digests read, in order."""

    def __init__(self, *manifests: Manifest) -> None:
        self.by_digest = {m.digest: m for m in manifests}
        self.read: list[str] = []

    def fetch(self, child: Descriptor) -> Manifest:
        self.read.append(child.digest)
        return self.by_digest[child.digest]


def _chain(depth: int) -> tuple[Manifest, Store]:
    """``depth`` indexes, each listing the next, the last an image; the top and a store of them all."""
    top = _image("a")
    everything = [top]
    for _ in range(depth):
        top = _index(top)
        everything.append(top)
    return top, Store(*everything)


def test_children_come_before_their_index_and_a_digest_is_gone_into_once():
    a, b = _image("a"), _image("b")
    inner = _index(a, b)
    top = _index(inner, a)  # a listed twice
    store = Store(a, b, inner, top)
    assert [m.digest for m in walk_index(top, store.fetch, "here")] == [a.digest, b.digest, inner.digest, top.digest]
    assert store.read == [inner.digest, a.digest, b.digest]


def test_a_child_fetch_leaves_out_is_not_gone_into():
    a, b = _image("a"), _image("b")
    inner = _index(a)
    top = _index(inner, b)
    store = Store(a, b, inner, top)
    walked = walk_index(top, lambda d: None if d.digest == inner.digest else store.fetch(d), "here")
    assert [m.digest for m in walked] == [b.digest, top.digest]


def test_indexes_nested_as_deep_as_the_limit_are_walked():
    top, store = _chain(MAX_INDEX_DEPTH)
    assert len(list(walk_index(top, store.fetch, "here"))) == MAX_INDEX_DEPTH + 1


def test_one_index_deeper_is_refused_in_one_line_before_the_manifest_past_it_is_read():
    top, store = _chain(MAX_INDEX_DEPTH + 1)
    with pytest.raises(IndexDepthError) as caught:
        list(walk_index(top, store.fetch, "registry r.example: team/x@sha256:top"))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("registry r.example: team/x@sha256:top: image indexes nest "
                                                      f"more than {MAX_INDEX_DEPTH} deep")
    assert len(store.read) == MAX_INDEX_DEPTH  # the manifest at depth 9 (the image) is never asked for


def test_1500_nested_indexes_are_refused_without_recursion():
    top, store = _chain(1500)
    with pytest.raises(IndexDepthError, match=f"more than {MAX_INDEX_DEPTH} deep"):
        list(walk_index(top, store.fetch, "here"))
    assert len(store.read) == MAX_INDEX_DEPTH


def test_a_path_walk_follows_only_the_entries_it_is_told_to():
    amd, arm = _image("a"), _image("b")
    left, right = _index(amd), _index(arm, arch="arm64")
    top = _index(left, right)
    store = Store(amd, arm, left, right, top)
    path = walk_index(top, store.fetch, "here", follow=lambda m: m.children()[:1])
    assert next(path).digest == amd.digest
    assert store.read == [left.digest, amd.digest]


def test_the_limit_can_be_lower():
    top, store = _chain(3)
    with pytest.raises(IndexDepthError, match="more than 2 deep"):
        list(walk_index(top, store.fetch, "here", limit=2))
