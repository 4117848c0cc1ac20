"""Rollback and promotion: which image, the checks around the move, and what is logged."""

from __future__ import annotations

import pytest
from tagfakes import FakeStore, digest_of, move, tag_on

from imagectl.errors import InputError, OperationError, ValidationError
from imagectl.tags.history import read_listing
from imagectl.cli.tag_views import describe_move
from imagectl.tags.moves import guarded_move, previous_target, promote, resolve_target, rollback
from imagectl.tags.naming import check_channel


def three_builds() -> FakeStore:
    """Builds on days 1, 2, 3, each moving latest, logged."""
    store = FakeStore()
    previous = None
    for d in (1, 2, 3):
        store.add(tag_on(d), digest_of(d))
        store.log.append(move("latest", digest_of(d), previous, to_tag=tag_on(d)))
        previous = digest_of(d)
    store.add("latest", digest_of(3))
    return store


def test_previous_is_where_the_log_says_latest_was_before_its_last_move():
    store = three_builds()
    store.tag_map["latest"] = digest_of(1)
    store.log.append(move("latest", digest_of(1), digest_of(3), "rollback"))
    target = previous_target(digest_of(1), store.log, read_listing(store))
    assert target.tag == tag_on(3)  # a second rollback undoes the first


def test_previous_without_a_log_is_the_newest_older_immutable_tag():
    store = three_builds()
    store.log.clear()
    assert previous_target(digest_of(3), [], read_listing(store)).tag == tag_on(2)
    assert previous_target(digest_of(2), [], read_listing(store)).tag == tag_on(1)


def test_an_unlogged_move_goes_back_to_the_logs_last_known_position():
    store = three_builds()
    store.tag_map["latest"] = digest_of(2)  # moved without a log entry (a killed imagectl, a docker push)
    assert previous_target(digest_of(2), store.log, read_listing(store)).tag == tag_on(3)  # where it was before


def test_an_unlogged_move_whose_last_known_image_is_gone_falls_back_to_tag_times():
    store = three_builds()
    store.tag_map["latest"] = digest_of(2)
    store.remove_manifest(digest_of(3))
    assert previous_target(digest_of(2), store.log, read_listing(store)).tag == tag_on(1)


class Killed(BaseException):
    """kill -9 between the tag PUT and the log record (not an ImagectlError: nothing catches it)."""


def kill_before_the_record(store: FakeStore) -> None:
    def die(tag: str) -> None:
        raise Killed()

    store.hooks["record"] = die


def test_a_rollback_killed_before_its_log_entry_is_still_undone_by_the_next_rollback():
    """Before: the next rollback said "no earlier immutable image is left" (latest was on the oldest image)."""
    store = three_builds()
    kill_before_the_record(store)
    with pytest.raises(Killed):
        rollback(store, to=tag_on(1))
    assert store.tag_map["latest"] == digest_of(1) and len(store.log) == 3  # moved, not logged
    result = rollback(store)
    assert (result.changed, result.target, result.target_tag) == (True, digest_of(3), tag_on(3))
    assert store.log[-1].previous == digest_of(1)


def test_a_build_killed_before_its_log_entry_rolls_back_to_the_image_before_it():
    store = three_builds()
    store.add(tag_on(4), digest_of(4))
    kill_before_the_record(store)
    with pytest.raises(Killed):
        guarded_move(store, "latest", digest_of(4), tag_on(4), digest_of(3), "build")
    assert rollback(store).target_tag == tag_on(3)


def test_moves_log_the_immutable_tag_they_came_from():
    store = three_builds()
    rollback(store)
    assert (store.log[-1].to_tag, store.log[-1].from_tag) == (tag_on(2), tag_on(3))
    promote(store, "stable", tag_on(1))
    promote(store, "stable")
    assert (store.log[-1].to_tag, store.log[-1].from_tag) == (tag_on(2), tag_on(1))  # latest named by its move


def test_rollback_and_promote_work_from_the_immutable_tags_when_the_log_is_unreadable():
    store = three_builds()
    store.log.clear()
    store.problems.append("reg/ml/torch:imagectl-history: unreadable move log (Expecting value); ignored")
    result = rollback(store)
    assert result.target == digest_of(2) and "move log has 1 unreadable part" in result.note
    assert promote(store, "stable", tag_on(1)).target == digest_of(1)


@pytest.mark.parametrize("channel", ["imagectl-history", "imagectl-move-20240101T000000000000Z-0-latest",
                                     "imagectl-", "imagectl-anything"])
def test_reserved_names_are_never_channels(channel):
    """Before: ``--channel imagectl-history`` overwrote the move log with a pointer to an image."""
    store = three_builds()
    store.add("imagectl-history", digest_of(9))
    with pytest.raises(ValidationError, match="reserved"):
        promote(store, channel)
    assert store.tag_map["imagectl-history"] == digest_of(9) and not [c for c in store.calls if c[0] == "point"]


def test_reserved_names_are_never_sources_and_immutable_shapes_never_channels():
    store = three_builds()
    store.add("imagectl-history", digest_of(9))
    with pytest.raises(ValidationError, match="--from 'imagectl-history'.*imagectl's own records"):
        promote(store, "stable", "imagectl-history")
    with pytest.raises(ValidationError, match="--to 'imagectl-history'"):
        rollback(store, to="imagectl-history")
    with pytest.raises(ValidationError, match="shape of an immutable tag"):
        check_channel(tag_on(1))
    assert "stable" not in store.tag_map and store.tag_map["latest"] == digest_of(3)
    assert promote(store, "stable", "latest").target == digest_of(3)  # latest, a channel, a tag still go
    assert promote(store, "canary", "stable").target == digest_of(3)


def test_noop_moves_in_the_log_are_skipped():
    store = three_builds()
    store.log.append(move("latest", digest_of(3), digest_of(3)))  # a reused build logs a move onto itself
    assert previous_target(digest_of(3), store.log, read_listing(store)).tag == tag_on(2)


def test_previous_that_was_pruned_falls_back_to_tag_times():
    store = three_builds()
    store.remove_manifest(digest_of(2))
    assert previous_target(digest_of(3), store.log, read_listing(store)).tag == tag_on(1)


def test_nothing_to_roll_back_to():
    store = FakeStore()
    store.add(tag_on(1), digest_of(1))
    store.add("latest", digest_of(1))
    with pytest.raises(OperationError, match="no earlier immutable image"):
        previous_target(digest_of(1), [], read_listing(store))
    with pytest.raises(OperationError, match="does not exist yet"):
        previous_target(None, [], read_listing(FakeStore()))


def test_resolve_target_by_tag_digest_and_prefix():
    listing = read_listing(three_builds())
    assert resolve_target(tag_on(2), listing).digest == digest_of(2)
    assert resolve_target(digest_of(1), listing).tag == tag_on(1)
    store = FakeStore()
    store.add(tag_on(1), "sha256:" + "a" * 64)
    store.add(tag_on(2), "sha256:" + "a" * 12 + "b" * 52)
    store.add(tag_on(3), "sha256:" + "c" * 64)
    listing = read_listing(store)
    assert resolve_target("sha256:" + "c" * 12, listing).tag == tag_on(3)
    with pytest.raises(InputError, match="ambiguous"):
        resolve_target("sha256:" + "a" * 12, listing)
    with pytest.raises(InputError, match="is not the digest"):
        resolve_target("sha256:" + "c" * 8, listing)  # too short to be a prefix


def test_resolve_target_refuses_anything_else_with_the_choices():
    listing = read_listing(three_builds())
    for bad in ("latest", "nope", "sha256:" + "f" * 64, "sha256:00", tag_on(9)):
        with pytest.raises(InputError) as caught:
            resolve_target(bad, listing, "reg/ml/torch")
        assert tag_on(3) in str(caught.value) and "choose one of" in str(caught.value)


def test_rollback_moves_latest_with_one_point_and_logs_it():
    store = three_builds()
    store.calls.clear()
    result = rollback(store)
    assert result.changed and result.previous == digest_of(3) and result.target == digest_of(2)
    assert store.tag_map["latest"] == digest_of(2)
    assert [c for c in store.calls if c[0] == "point"] == [("point", "latest", digest_of(2))]
    logged = store.log[-1]
    assert (logged.tag, logged.action, logged.previous, logged.to, logged.to_tag) == (
        "latest", "rollback", digest_of(3), digest_of(2), tag_on(2)
    )


def test_rollback_to_where_it_points_is_a_noop():
    store = three_builds()
    before = len(store.log)
    result = rollback(store, to=tag_on(3))
    assert not result.changed and "nothing to do" in describe_move(result, "reg/ml/torch")
    assert len(store.log) == before and not [c for c in store.calls if c[0] == "point"]


def test_rollback_to_a_target_deleted_meanwhile_leaves_latest():
    store = three_builds()
    store.hooks["point"] = lambda tag, target: store.remove_manifest(target)  # a prune wins the race
    with pytest.raises(OperationError, match="no longer exists"):
        rollback(store, to=tag_on(1))
    assert store.tag_map["latest"] == digest_of(3)


def test_a_rollback_whose_target_a_prune_deletes_right_after_the_put_fails_and_puts_latest_back():
    """Issue 36, item 2: the move used to put its tag back on the deleted manifest and say "changed"."""
    store = three_builds()
    real_point = store.point
    points = []

    def point_then_pruned(tag: str, target: str) -> None:
        real_point(tag, target)
        points.append(target)
        if len(points) == 1:  # a prune deletes the target's manifest right after the PUT: latest goes with it
            store.remove_manifest(target)

    store.point = point_then_pruned  # type: ignore[method-assign]
    logged = len(store.log)
    with pytest.raises(OperationError, match="was deleted by a concurrent prune while this rollback") as failed:
        rollback(store, to=tag_on(1))
    assert f"latest is back on {digest_of(3)[:19]}; nothing is logged" in str(failed.value)
    assert points == [digest_of(1), digest_of(3)]
    assert store.tag_map["latest"] == digest_of(3) and len(store.log) == logged


def test_a_promote_onto_a_new_channel_whose_target_a_prune_deleted_fails_and_leaves_no_channel():
    store = three_builds()
    store.hooks["deleting"] = lambda target: store.remove_manifest(target)  # the prune deleted it: stable went too
    with pytest.raises(OperationError, match="stable does not exist, as before"):
        promote(store, "stable", tag_on(1))
    assert "stable" not in store.tag_map and all(m.tag != "stable" for m in store.log)


def test_a_move_whose_target_lost_its_immutable_tag_under_it_fails():
    """A PUT that brought a pruned manifest back: the tag stands, but the image's immutable tag is gone."""
    store = three_builds()

    def pruned_then_put_back(target: str) -> None:
        del store.tag_map[tag_on(1)]

    store.hooks["deleting"] = pruned_then_put_back
    with pytest.raises(OperationError, match="was deleted by a concurrent prune"):
        promote(store, "stable", tag_on(1))
    assert "stable" not in store.tag_map


def test_a_move_waits_while_a_prune_has_marked_its_target():
    store = three_builds()
    store.marks.append(digest_of(1))
    waited = []

    def decided(target: str) -> None:  # the prune decides (keeps the image) while the move waits
        waited.append(target)
        store.marks.remove(target)

    store.hooks["deleting"] = lambda target: store.hooks.__setitem__("deleting", decided)
    result = promote(store, "stable", tag_on(1))
    assert result.changed and waited == [digest_of(1)] and store.tag_map["stable"] == digest_of(1)
    assert [c for c in store.calls if c[0] == "deleting"] == [("deleting", digest_of(1))] * 2  # marked, then not


def test_promote_from_latest_a_tag_and_another_channel():
    store = three_builds()
    assert promote(store, "stable").target == digest_of(3)
    assert promote(store, "canary", tag_on(1)).target == digest_of(1)
    assert promote(store, "stable", "canary").target == digest_of(1)
    assert [m.action for m in store.log[-3:]] == ["promote"] * 3
    assert store.tag_map["stable"] == digest_of(1) and store.tag_map["latest"] == digest_of(3)


def test_promote_refuses_bad_channels_and_sources():
    store = three_builds()
    for channel in ("latest", "Stable", tag_on(1), ""):
        with pytest.raises(ValidationError):
            promote(store, channel)
    with pytest.raises(InputError, match="no such tag"):
        promote(store, "stable", "nightly")
    with pytest.raises(OperationError, match="nothing to promote"):
        promote(FakeStore(), "stable")


def test_the_usual_rollback_reads_no_tag_listing():
    store = three_builds()
    store.calls.clear()
    rollback(store)
    assert ("tags",) not in store.calls
    assert [c for c in store.calls if c[0] == "digest"] == [  # plan, target, re-read before the PUT, read back
        ("digest", "latest"), ("digest", tag_on(2)), ("digest", "latest"), ("digest", "latest"),
        ("digest", tag_on(2)),  # and the target's immutable tag: still there, so no prune deleted it meanwhile
    ]
    store.calls.clear()
    rollback(store, to=tag_on(1))
    assert ("tags",) not in store.calls
    store.calls.clear()
    rollback(store, to=digest_of(3))  # a digest needs the listing to know it is an immutable image
    assert ("tags",) in store.calls and store.tag_map["latest"] == digest_of(3)


def test_a_log_naming_a_retagged_previous_image_falls_back_to_the_listing():
    store = three_builds()
    del store.tag_map[tag_on(2)]
    store.add(tag_on(9, 2), digest_of(2))  # the day-2 image now only has another immutable tag
    result = rollback(store)
    assert result.target == digest_of(2) and result.target_tag == tag_on(9, 2)


# ---- read, verify, write, verify (issue 24, item 4); through a real registry and a delaying proxy: test_races.py

def other_writer(store: FakeStore, to: int, read: int | None = None) -> None:
    """Another process's whole rollback of latest onto image ``to``, from image ``read`` (where it read latest;
    default: where latest is now): its PUT, then its record."""
    previous = digest_of(read) if read else store.tag_map.get("latest")
    store.tag_map["latest"] = digest_of(to)
    store.log.append(move("latest", digest_of(to), previous, "rollback", to_tag=tag_on(to)))


def test_a_tag_moved_since_the_plan_read_it_stops_the_move_before_anything_is_written():
    store = three_builds()
    store.hooks["log_position"] = lambda tag: other_writer(store, 1)  # between the plan and the PUT
    with pytest.raises(OperationError) as caught:
        rollback(store)
    message = str(caught.value)
    assert f"latest was moved from {digest_of(3)[:19]} to {digest_of(1)[:19]} by test@host (rollback" in message
    assert "nothing changed" in message and ("point", "latest", digest_of(2)) not in store.calls
    assert store.tag_map["latest"] == digest_of(1) and len(store.log) == 4  # only the other writer's move


def test_a_move_whose_put_lands_after_another_writers_whole_move_puts_the_tag_back_and_fails():
    """The lost update: a PUT held up in the network overwrote a concurrent rollback that finished meanwhile,
    both exited 0, and both records said FROM the same image."""
    store = three_builds()
    store.hooks["point"] = lambda tag, target: other_writer(store, 1)  # it finished before this PUT landed
    with pytest.raises(OperationError) as caught:
        rollback(store)
    message = str(caught.value)
    assert "latest: test@host (rollback at" in message and f"to {tag_on(1)} ({digest_of(1)[:19]})" in message
    assert "put back on" in message and "this rollback is not logged" in message
    assert store.tag_map["latest"] == digest_of(1)  # where the other writer left it, as it reported
    assert [m.previous for m in store.log[3:]] == [digest_of(3)]  # one move from day 3, not two


def test_a_move_overtaken_by_a_concurrent_move_from_the_same_image_fails_and_leaves_the_tag():
    store = three_builds()
    store.hooks["moves_since"] = lambda tag: other_writer(store, 1, read=3)  # read day 3 too; its PUT came later
    with pytest.raises(OperationError, match="latest stays on"):
        rollback(store)
    assert store.tag_map["latest"] == digest_of(1) and len(store.log) == 4


def test_a_later_move_from_where_this_one_left_the_tag_is_no_rival():
    store = three_builds()

    store.hooks["moves_since"] = lambda tag: other_writer(store, 1)  # it read latest after this PUT: on day 2
    result = rollback(store)
    assert result.changed and result.target == digest_of(2)
    assert [(m.previous, m.to) for m in store.log[3:]] == [(digest_of(2), digest_of(1)), (digest_of(3), digest_of(2))]


def test_a_move_that_names_its_image_starts_from_where_another_writer_left_the_tag():
    """rollback --to, promote, build and import do not depend on where the tag was: they re-plan."""
    store = three_builds()
    store.hooks["log_position"] = lambda tag: other_writer(store, 2)  # between the plan and the PUT
    result = rollback(store, to=tag_on(1))
    assert result.changed and result.previous == digest_of(2) and store.tag_map["latest"] == digest_of(1)
    assert [(m.previous, m.to) for m in store.log[3:]] == [(digest_of(3), digest_of(2)), (digest_of(2), digest_of(1))]
    assert store.log[-1].from_tag == tag_on(2)


def test_a_move_that_names_its_image_and_lands_after_another_is_logged_after_it():
    store = three_builds()
    store.hooks["point"] = lambda tag, target: other_writer(store, 2)  # its whole move before this PUT landed
    result = rollback(store, to=tag_on(1))
    assert result.changed and store.tag_map["latest"] == digest_of(1) and "after test@host (rollback" in result.note
    assert [(m.previous, m.to) for m in store.log[3:]] == [(digest_of(3), digest_of(2)), (digest_of(2), digest_of(1))]


def test_a_move_another_writer_already_made_changes_nothing():
    store = three_builds()
    store.hooks["log_position"] = lambda tag: other_writer(store, 1)
    result = rollback(store, to=tag_on(1))
    assert not result.changed and result.note == "another writer moved it there" and len(store.log) == 4
