"""History and prune over image indexes (multi-platform images): history shows the platforms; what stays reaches
its children, what goes takes the children nothing else reaches.  Against the in-memory store with a registry's
semantics."""

from __future__ import annotations

from datetime import timedelta

from tagfakes import NOW, FakeStore, digest_of, tag_on

from imagectl.cli.tag_views import format_history, history_json
from imagectl.tags.history import TagInfo, read_history
from imagectl.tags.naming import tag_time
from imagectl.tags.prune import execute_prune, plan_for_store, plan_prune, reachable
from imagectl.tags.store import ChildManifest

AMD, ARM = "linux/amd64", "linux/arm64"


def info(day: int, digest: int | None = None) -> TagInfo:
    tag = tag_on(day)
    return TagInfo(tag, digest_of(digest if digest is not None else day), tag_time(tag))


def index(*children: tuple[int, str]) -> tuple[ChildManifest, ...]:
    return tuple(ChildManifest(digest_of(n), platform) for n, platform in children)


def test_reachable_follows_indexes_at_any_depth():
    contents = {digest_of(1): index((10, AMD), (2, "")), digest_of(2): index((20, ARM))}
    held = reachable({digest_of(1): "kept-tag"}, contents)
    assert held == {digest_of(n): "kept-tag" for n in (1, 10, 2, 20)}


def test_the_children_of_a_deleted_index_go_unless_a_kept_index_names_them():
    # day 2 (kept) and day 1 (deleted) are indexes sharing their amd64 child 100; day 1's arm64 child 101 is its own
    contents = {digest_of(2): index((100, AMD), (200, ARM)), digest_of(1): index((100, AMD), (101, ARM))}
    plan = plan_prune([info(2), info(1)], set(), keep=1, min_age=timedelta(0), now=NOW, contents=contents)
    tags = [(d.tag, d.delete) for d in plan if d.tag]
    assert tags == [(tag_on(2), False), (tag_on(1), True)]
    children = {d.digest: d for d in plan if not d.tag}
    assert set(children) == {digest_of(100), digest_of(101)}  # the kept index's own children are no rows at all
    assert children[digest_of(101)].delete and children[digest_of(101)].platform == ARM
    assert children[digest_of(101)].index == tag_on(1)
    assert not children[digest_of(100)].delete and children[digest_of(100)].reason == f"also in kept image {tag_on(2)}"


def test_a_tag_on_a_child_of_a_kept_index_is_kept():
    # day 1 tags an image (digest 50) that is the arm64 child of the kept index of day 3
    contents = {digest_of(3): index((49, AMD), (50, ARM))}
    plan = plan_prune([info(3), info(2), info(1, digest=50)], set(), keep=1, min_age=timedelta(0), now=NOW,
                      contents=contents)
    decided = {d.tag: d for d in plan}
    assert decided[tag_on(2)].delete and not decided[tag_on(1)].delete
    assert decided[tag_on(1)].reason == f"its image is in kept index {tag_on(3)}"


def test_children_of_a_pointed_index_stay_and_a_tag_on_one_stays():
    contents = {digest_of(9): index((90, AMD), (91, ARM))}
    plan = plan_prune([info(2), info(1, digest=91)], {digest_of(9)}, keep=0, min_age=timedelta(0), now=NOW,
                      contents=contents)
    decided = {d.tag: d for d in plan}
    assert decided[tag_on(2)].delete
    assert decided[tag_on(1)].reason == "its image is in an index a moving tag or channel points to"


def test_keeping_for_an_index_settles_through_chains():
    # day 1 is an index naming day 2's index, which names child 30; latest points to day 1
    contents = {digest_of(1): index((2, "")), digest_of(2): index((30, AMD))}
    plan = plan_prune([info(3), info(2), info(1)], {digest_of(1)}, keep=0, min_age=timedelta(0), now=NOW,
                      contents=contents)
    assert {d.tag: d.delete for d in plan} == {tag_on(3): True, tag_on(2): False, tag_on(1): False}


def seeded() -> FakeStore:
    store = FakeStore()
    store.add_index(tag_on(3), digest_of(3), {digest_of(300): AMD, digest_of(301): ARM})
    store.add_index(tag_on(2), digest_of(2), {digest_of(300): AMD, digest_of(201): ARM})
    store.add_index(tag_on(1), digest_of(1), {digest_of(100): AMD, digest_of(101): ARM})
    store.add("latest", digest_of(3))
    return store


def test_execution_deletes_the_children_after_their_index_and_keeps_shared_ones():
    store = seeded()
    plan = plan_for_store(store, keep=1, min_age=timedelta(0), now=NOW)
    report = execute_prune(store, plan)
    assert sorted(report.deleted) == [tag_on(1), tag_on(2)]
    assert sorted(report.deleted_children) == sorted([digest_of(100), digest_of(101), digest_of(201)])
    assert {digest_of(3), digest_of(300), digest_of(301)} <= store.manifests  # the kept index is whole
    assert digest_of(300) not in report.deleted_children
    deletes = [c for c in store.calls if c[0] in ("delete", "delete_untagged")]
    assert [c[0] for c in deletes] == ["delete", "delete", "delete_untagged", "delete_untagged", "delete_untagged"]


def test_a_child_a_new_tag_reaches_meanwhile_is_not_deleted():
    store = seeded()
    plan = plan_for_store(store, keep=1, min_age=timedelta(0), now=NOW)

    def new_index_naming_child_101(*_: str) -> None:  # a build pushes an index reusing day 1's arm64 child
        store.add_index(tag_on(9), digest_of(9), {digest_of(101): ARM})

    store.hooks["delete"] = new_index_naming_child_101
    report = execute_prune(store, plan)
    assert digest_of(101) in store.manifests and digest_of(101) not in report.deleted_children
    assert dict(report.skipped_children)[digest_of(101)] == f"{tag_on(9)} now reaches it"
    assert digest_of(100) in report.deleted_children


def test_children_stay_while_their_index_does():
    # latest moves onto day 1's index (a rollback) while day 2 is deleted: that index stays, and its children
    store = seeded()
    plan = plan_for_store(store, keep=1, min_age=timedelta(0), now=NOW)
    store.hooks["delete"] = lambda *_: store.add("latest", digest_of(1))
    report = execute_prune(store, plan)
    assert tag_on(1) not in report.deleted and {digest_of(100), digest_of(101)} <= store.manifests
    assert dict(report.skipped_children) == {digest_of(n): f"its index {tag_on(1)} is still in the repository"
                                             for n in (100, 101)}
    assert report.deleted_children == [digest_of(201)]


LABELS = {"imagectl.profile": "torch-2.3-cu121", "imagectl.framework": "torch", "imagectl.framework.version": "2.3.1",
          "imagectl.cuda": "12.1", "imagectl.cudnn": "8.9.2.26", "imagectl.python": "3.10"}


def test_history_lists_an_index_with_its_platforms_and_says_where_children_disagree():
    store = FakeStore()
    # the arm64 child comes first in the index: the amd64 one still stands for it
    store.add_index(tag_on(2), digest_of(2), {digest_of(201): ARM, digest_of(200): AMD})
    store.add_index(tag_on(1), digest_of(1), {digest_of(100): AMD, digest_of(101): ARM})
    store.label_map.update({digest_of(200): LABELS, digest_of(201): {**LABELS, "imagectl.cudnn": "9.1.0.70"},
                            digest_of(100): LABELS, digest_of(101): LABELS})
    store.add("latest", digest_of(2))
    history = read_history(store)
    rows = {r["tag"]: r for r in history_json(history)}
    assert rows[tag_on(2)]["platforms"] == [ARM, AMD] and rows[tag_on(2)]["versions"]["cudnn"] == "8.9.2.26"
    assert rows[tag_on(2)]["platform_differences"] == [f"{ARM}: cudnn 9.1.0.70 ({AMD}: 8.9.2.26)"]
    assert rows[tag_on(1)]["platform_differences"] == []
    text = format_history(history)
    assert text.splitlines()[1].split() == ["CUR", "TAG", "DIGEST", "CREATED", "VERSIONS", "PLATFORMS", "POINTED",
                                            "BY"]
    assert f"{ARM},{AMD}" in next(line for line in text.splitlines() if line.startswith("*"))
    assert f"note: {tag_on(2)}: {ARM}: cudnn 9.1.0.70 ({AMD}: 8.9.2.26)" in text.splitlines()
