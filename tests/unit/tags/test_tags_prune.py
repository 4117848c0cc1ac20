"""plan_prune (pure) and execute_prune against an in-memory store with registry semantics."""

from __future__ import annotations

from datetime import timedelta

import pytest
from tagfakes import NOW, FakeStore, digest_of, tag_on

from imagectl.tags.history import TagInfo, read_listing
from imagectl.tags.naming import tag_time
from imagectl.tags.prune import Deletion, execute_prune, plan_prune


def info(day: int, digest: int | None = None) -> TagInfo:
    tag = tag_on(day)
    return TagInfo(tag, digest_of(digest if digest is not None else day), tag_time(tag))


def decisions(plan: list[Deletion]) -> dict[str, bool]:
    return {d.tag: d.delete for d in plan}


def test_keeps_the_newest_n_and_deletes_the_rest():
    tags = [info(d) for d in (1, 2, 3, 4, 5)]
    plan = plan_prune(tags, set(), keep=2, min_age=timedelta(0), now=NOW)
    assert [d.tag for d in plan] == [tag_on(d) for d in (5, 4, 3, 2, 1)]  # newest first
    assert decisions(plan) == {tag_on(5): False, tag_on(4): False, tag_on(3): True, tag_on(2): True, tag_on(1): True}
    assert plan[0].reason == "one of the newest 2"
    assert "older than the newest 2" in plan[2].reason


def test_never_deletes_a_pointed_image():
    tags = [info(d) for d in (1, 2, 3)]
    plan = plan_prune(tags, {digest_of(1)}, keep=1, min_age=timedelta(0), now=NOW)
    assert decisions(plan) == {tag_on(3): False, tag_on(2): True, tag_on(1): False}
    assert plan[2].reason == "a moving tag or channel points to its image"


def test_never_deletes_a_tag_younger_than_min_age():
    tags = [info(d) for d in (1, 20, 30)]  # NOW is 2024-02-01
    plan = plan_prune(tags, set(), keep=0, min_age=timedelta(days=7), now=NOW)
    assert decisions(plan) == {tag_on(30): False, tag_on(20): True, tag_on(1): True}
    assert plan[0].reason == "younger than 7 days"


def test_a_shared_image_goes_only_with_all_its_tags():
    # day 3 (kept) and day 1 (beyond keep) share one image: deleting the manifest would delete day 3 too
    tags = [info(3, digest=9), info(2), info(1, digest=9)]
    plan = plan_prune(tags, set(), keep=1, min_age=timedelta(0), now=NOW)
    assert decisions(plan) == {tag_on(3): False, tag_on(2): True, tag_on(1): False}
    assert plan[2].reason == f"its image is shared with kept tag {tag_on(3)}"


def test_keep_zero_and_nothing_to_do():
    assert plan_prune([], set(), keep=0, min_age=timedelta(0), now=NOW) == []
    assert all(d.delete for d in plan_prune([info(1), info(2)], set(), keep=0, min_age=timedelta(0), now=NOW))
    with pytest.raises(ValueError):
        plan_prune([], set(), keep=-1, min_age=timedelta(0), now=NOW)


def seeded(days=(1, 2, 3, 4)) -> FakeStore:
    store = FakeStore()
    for d in days:
        store.add(tag_on(d), digest_of(d))
    store.add("latest", digest_of(days[-1]))
    return store


def plan_for(store: FakeStore, keep: int) -> list[Deletion]:
    listing = read_listing(store)
    return plan_prune(list(listing.immutable), set(listing.pointers.values()), keep, timedelta(0), NOW)


def test_execute_deletes_what_the_plan_says():
    store = seeded()
    report = execute_prune(store, plan_for(store, keep=2))
    assert sorted(report.deleted) == [tag_on(1), tag_on(2)]
    assert sorted(store.tag_map) == sorted([tag_on(3), tag_on(4), "latest"])
    assert not report.failed and not report.restored


def test_execute_skips_an_image_a_pointer_moved_onto_after_the_plan():
    store = seeded()
    plan = plan_for(store, keep=2)
    store.tag_map["stable"] = digest_of(1)  # a promotion between plan and execution
    report = execute_prune(store, plan)
    assert report.deleted == [tag_on(2)]
    assert report.skipped == [(tag_on(1), "stable now points to its image")]
    assert store.tag_map["stable"] == digest_of(1) and digest_of(1) in store.manifests


def test_execute_puts_back_a_pointer_that_moved_onto_the_image_during_the_delete():
    store = seeded()
    plan = plan_for(store, keep=3)  # deletes day 1 only

    def rollback_meanwhile(tag: str) -> None:  # after prune's check, before its delete
        store.tag_map["latest"] = digest_of(1)

    store.hooks["delete"] = rollback_meanwhile
    report = execute_prune(store, plan)
    assert report.restored == ["latest"]
    assert store.tag_map["latest"] == digest_of(1) and digest_of(1) in store.manifests
    # the image stays after all, with its immutable tag (issue 36, item 2: it used to be reported deleted, tagless)
    assert report.deleted == [] and report.skipped == [(tag_on(1), "latest moved onto its image while it was being "
                                                                   "deleted")]
    assert store.tag_map[tag_on(1)] == digest_of(1)


def test_execute_marks_each_image_before_reading_the_tags_again_and_deleting_it():
    store = seeded()
    plan = plan_for(store, keep=3)  # deletes day 1 only
    marked: list[str] = []

    def promote_onto_a_new_channel(digest: str) -> None:  # after the plan and the first listing, before the mark
        marked.append(digest)
        store.tag_map["canary"] = digest_of(1)

    store.hooks["begin_delete"] = promote_onto_a_new_channel
    store.calls.clear()
    report = execute_prune(store, plan)
    assert marked == [digest_of(1)] and report.deleted == []
    assert report.skipped == [(tag_on(1), "canary now points to its image")]
    assert store.tag_map["canary"] == digest_of(1) and store.marks == []
    names = [c[0] for c in store.calls]
    assert names.index("begin_delete") < len(names) - 1 - names[::-1].index("tags") < names.index("end_delete")


def test_execute_skips_a_new_immutable_tag_on_the_same_image():
    store = seeded()
    plan = plan_for(store, keep=2)
    store.add(tag_on(9), digest_of(1))  # a build made meanwhile produced the very same image
    report = execute_prune(store, plan)
    assert tag_on(1) in [t for t, _ in report.skipped]
    assert store.tag_map[tag_on(9)] == digest_of(1)


def counted(calls: list[tuple[str, ...]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for call in calls:
        found[call[0]] = found.get(call[0], 0) + 1
    return found


def executed_with_two_pointers(images: int) -> tuple[dict[str, int], int]:
    """(store calls by operation, images deleted) of pruning ``images`` images down to the newest 2, with
    ``latest`` and ``stable`` pointing into the kept ones."""
    store = seeded(days=tuple(range(1, images + 1)))
    store.add("stable", digest_of(images - 1))
    plan = plan_for(store, keep=2)
    store.calls.clear()
    report = execute_prune(store, plan)
    assert len(report.deleted) == images - 2 and not report.skipped and not report.restored
    return counted(store.calls), len(report.deleted)


def test_execute_costs_a_mark_a_listing_and_two_reads_per_pointer_per_deleted_image():
    small, deleted_small = executed_with_two_pointers(10)
    large, deleted_large = executed_with_two_pointers(28)
    for calls, deleted in ((small, deleted_small), (large, deleted_large)):
        assert calls["tags"] == 1 + deleted  # at the start, then right before each delete (after its mark)
        assert calls["digest"] == 2 + 4 * deleted  # the two pointers at the start, then before and after each delete
        assert calls["begin_delete"] == calls["end_delete"] == calls["delete"] == deleted and "point" not in calls
    per_image = (sum(large.values()) - sum(small.values())) / (deleted_large - deleted_small)
    assert per_image == 8  # linear: a mark, a listing, four pointer reads, one delete, the mark removed


def test_a_pointer_that_moved_makes_prune_list_again_and_see_new_tags():
    store = seeded(days=(1, 2, 3, 4, 5, 6))
    plan = plan_for(store, keep=2)  # deletes days 4, 3, 2, 1 (in that order)

    def build_and_promote_meanwhile(tag: str) -> None:  # right before the first delete
        store.add(tag_on(9), digest_of(9))
        store.tag_map["latest"] = digest_of(9)  # a build moved latest: a writer is active
        store.tag_map["canary"] = digest_of(2)  # a promotion onto a brand new channel
        store.add(tag_on(8, 99), digest_of(3))  # a new immutable tag on an image that is going

    store.hooks["delete"] = build_and_promote_meanwhile
    store.calls.clear()
    report = execute_prune(store, plan)
    assert report.deleted == [tag_on(4), tag_on(1)]
    assert sorted(report.skipped) == sorted([(tag_on(3), f"{tag_on(8, 99)} now points to its image"),
                                             (tag_on(2), "canary now points to its image")])
    assert counted(store.calls)["tags"] == 1 + 4 + 1  # the start, before each of 4 deletes, after latest moved
    assert store.tag_map["canary"] == digest_of(2) and store.tag_map[tag_on(8, 99)] == digest_of(3)
