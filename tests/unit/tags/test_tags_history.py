"""History rows, JSON and text, from an in-memory store."""

from __future__ import annotations

from dataclasses import replace

from tagfakes import FakeStore, digest_of, move, tag_on

from imagectl.cli.tag_views import format_history, format_versions, history_json, moves_json
from imagectl.tags.history import image_versions, read_history
from imagectl.tags.naming import immutable_parts

LABELS = {"imagectl.framework": "torch", "imagectl.framework.version": "2.3.1", "imagectl.cuda": "12.1",
          "imagectl.cudnn": "8.9.2.26", "imagectl.nccl": "2.20.5", "imagectl.python": "3.10"}


def store_with_history() -> FakeStore:
    store = FakeStore()
    for d in (1, 2, 3):
        store.add(tag_on(d), digest_of(d))
        store.label_map[digest_of(d)] = LABELS
    store.add("latest", digest_of(2))
    store.add("stable", digest_of(1))
    store.add("canary", digest_of(7))  # an image no immutable tag names (pushed by hand)
    store.log += [move("latest", digest_of(1), None), move("latest", digest_of(2), digest_of(1)),
                  move("latest", digest_of(3), digest_of(2)), move("latest", digest_of(2), digest_of(3), "rollback"),
                  move("stable", digest_of(1), None, "promote")]
    return store


def test_history_entries_newest_first_with_pointers_and_current():
    history = read_history(store_with_history())
    rows = history_json(history)
    assert [r["tag"] for r in rows] == [tag_on(3), tag_on(2), tag_on(1), "canary"]
    assert [r["current"] for r in rows] == [False, True, False, False]
    assert [r["pointed_by"] for r in rows] == [[], ["latest"], ["stable"], ["canary"]]
    assert rows[3]["immutable"] is False and rows[3]["tagged"] is None
    assert rows[0]["versions"]["nccl"] == "2.20.5" and rows[0]["created"].startswith("2024-05-01")
    assert {"tag", "digest", "created", "current"} <= set(rows[0])
    assert [m["action"] for m in rows[1]["moves"]] == ["build", "rollback"]
    assert rows[1]["moves"][1]["from_tag"] == tag_on(3)


def test_moves_json_newest_first():
    moves = moves_json(read_history(store_with_history()))
    assert [(m["tag"], m["action"]) for m in moves][:2] == [("stable", "promote"), ("latest", "rollback")]


def test_text_names_images_by_tag_and_marks_the_current_one():
    text = format_history(read_history(store_with_history()))
    assert text.splitlines()[0] == "registry.example.com/ml/torch-2.3-cu121"
    assert text.splitlines()[1].split()[:2] == ["CUR", "TAG"]
    current = next(line for line in text.splitlines() if line.startswith("*"))
    assert tag_on(2) in current and "latest" in current
    assert "torch 2.3.1 cuda 12.1 cudnn 8.9.2.26 nccl 2.20.5 py3.10" in current
    assert "rollback" in text and "promote" in text


def test_versions_come_from_labels_else_from_the_tag_name():
    assert image_versions(LABELS, tag_on(1))["cudnn"] == "8.9.2.26"
    assert image_versions({}, tag_on(1)) == {"version": "2.3.1", "cuda": "cu121", "python": "3.10"}
    assert image_versions({}, "latest") == {}
    assert format_versions(image_versions({}, tag_on(1))) == "2.3.1 cu121 py3.10"


def test_an_unreadable_image_still_has_a_row():
    store = store_with_history()
    store.manifests.discard(digest_of(3))  # config unreadable
    row = history_json(read_history(store))[0]
    assert row["tag"] == tag_on(3) and row["created"] is None and row["versions"]["version"] == "2.3.1"


def test_naming_parts():
    assert immutable_parts(tag_on(1)) == {"version": "2.3.1", "cuda": "cu121", "python": "3.10",
                                          "stamp": "20240101T120000", "key": "0000000001"}
    assert immutable_parts("latest") is None


def test_history_carries_what_of_the_log_could_not_be_read():
    store = store_with_history()
    store.problems.append("reg/ml/torch:imagectl-move-x: not a readable move record (no annotation); ignored")
    history = read_history(store)
    assert history.problems == tuple(store.problems) and len(history.moves) == 5


def test_logged_from_tags_name_images_pruned_since():
    store = store_with_history()
    store.log.append(replace(move("latest", digest_of(3), digest_of(8), "rollback", to_tag=tag_on(3)),
                             from_tag=tag_on(8)))
    moves = moves_json(read_history(store))
    assert moves[0]["from_tag"] == tag_on(8) and moves[0]["to_tag"] == tag_on(3)
