"""What an immutable tag names before it is written (issue 36, item 2): this very image pushed by another build
(another process or machine: the engine has no record of that push) is this image, not a clash."""

from __future__ import annotations

import pytest

from imagectl.errors import OperationError
from imagectl.images.immutable import existing_immutable, image_of
from tests.unit.images.enginefake import FakeEngine
from tests.unit.tags.tagfakes import FakeStore

TAG = "2.3.1-cu121-py3.10-20240501T120000-aaaaaaaaaa-bbbbbbbbbbbb"


def setup() -> tuple[FakeStore, FakeEngine, str]:
    store, engine = FakeStore(), FakeEngine()
    return store, engine, engine.add_image("built:local")  # built here, pushed nowhere by this engine


def test_a_tag_naming_a_manifest_of_this_very_image_pushed_by_another_build_is_this_image():
    store, engine, image_id = setup()
    store.add(TAG, "sha256:" + "1" * 64)
    store.image_ids["sha256:" + "1" * 64] = image_id  # its config is this image's: the same image, pushed elsewhere
    found = existing_immutable(store, TAG, image_of(engine, store.repository, image_id, registry=True))
    assert found == "sha256:" + "1" * 64 and ("image_id", found) in store.calls


def test_ids_without_the_algorithm_compare_alike():
    store, engine, image_id = setup()
    store.add(TAG, "sha256:" + "1" * 64)
    store.image_ids["sha256:" + "1" * 64] = image_id
    bare = image_id.removeprefix("sha256:")  # buildah gives ids so
    assert existing_immutable(store, TAG, image_of(engine, store.repository, bare, registry=True)) is not None


def test_a_tag_naming_another_image_is_still_a_clash():
    store, engine, image_id = setup()
    store.add(TAG, "sha256:" + "2" * 64)
    store.image_ids["sha256:" + "2" * 64] = "sha256:" + "3" * 64
    with pytest.raises(OperationError, match="already names another image"):
        existing_immutable(store, TAG, image_of(engine, store.repository, image_id, registry=True))


def test_a_plain_check_asks_the_store_nothing_more():
    store, engine, image_id = setup()
    store.add(TAG, "sha256:" + "2" * 64)
    with pytest.raises(OperationError, match="already names another image"):
        existing_immutable(store, TAG, lambda digest: False)
    assert not [c for c in store.calls if c[0] == "image_id"]
