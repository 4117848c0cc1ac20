"""History rows, JSON and text, from an in-memory store."""

from __future__ import annotations

from dataclasses import replace

from tagfakes import FakeStore, digest_of, move, tag_on

from imagectl.cli.tag_views import describe_hidden, format_history, format_versions, history_json, moves_json
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


# ---- issue 24, item 6: history reads only what it shows; against a real registry: test_tags.py

def many_tags(count: int) -> FakeStore:
    store = FakeStore()
    for n in range(count):
        store.add(tag_on(n % 28 + 1, n), digest_of(n))
    store.add("latest", digest_of(0))  # on the oldest image
    store.add("stable", digest_of(count - 1))
    store.log += [move("latest", digest_of(n), digest_of(n - 1) if n else None) for n in range(count)]
    return store


def test_history_reads_the_digests_of_the_tags_it_shows_only():
    store = many_tags(500)
    history = read_history(store, limit=20)
    newest = sorted((t for t in store.tag_map if t[0].isdigit()), key=lambda t: (t[19:34], t), reverse=True)[:20]
    assert [c[1] for c in store.calls if c[0] == "digest"] == newest + ["latest", "stable"]
    rows = history_json(history)
    assert [r["tag"] for r in rows if r["immutable"]] == newest
    assert [r["tag"] for r in rows if r["current"]] == ["latest"]  # its image is older than those shown
    assert history.hidden.tags == 480 and history.hidden.older_moves and len(history.moves) == 20
    note = describe_hidden(history, 20, only_moves=False)
    assert note == ("showing the newest 20 of each; 480 more tag(s) and older moves not shown (--limit N, or "
                    "--limit 0 for all)")


def test_history_without_a_limit_reads_everything():
    store = many_tags(30)
    history = read_history(store, limit=None)
    assert len([c for c in store.calls if c[0] == "digest"]) == 32 and len(history.moves) == 30
    assert history.hidden.tags == 0 and not history.hidden.older_moves
    assert describe_hidden(history, 0, only_moves=False) == ""
