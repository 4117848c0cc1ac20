"""imagectl/cache.py: entries are JSON keyed by the request's content, several per kind (least recently used evicted
past the bound), corrupt or foreign entries recomputed (and counted), nothing is ever unpickled, IMAGECTL_NO_CACHE,
and writers racing each other over the same folder."""

from __future__ import annotations

import json
import os
import pickle
import threading
from pathlib import Path

import pytest

from imagectl import cache

TEXT = cache.Kind("text", encode=lambda value: value, decode=lambda text: text)


def numbers(keep: int = cache.KEEP_PER_KIND) -> cache.Kind[int]:
    """A kind whose values are ints written as decimal text (a non-number is a corrupt entry)."""
    return cache.Kind("number", encode=str, decode=int, keep=keep)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder (``$XDG_CACHE_HOME/imagectl``) with the cache on."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "imagectl"


class Computed:
    """A compute function that counts its calls and returns the call number."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def lookup(request: dict, compute: Computed, keep: int = cache.KEEP_PER_KIND) -> int:
    return cache.cached(numbers(keep), request, compute)


def entries(home: Path, kind: str = "number") -> list[Path]:
    return sorted(home.glob(f"{kind}-*.json"))


def test_the_suite_never_uses_the_real_cache_or_state():
    # tests/conftest.py points both at a scratch folder for the whole session
    assert cache.cache_dir() != Path.home() / ".cache" / "imagectl"
    assert not Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(Path.home() / ".cache")
    assert not Path(os.environ["XDG_STATE_HOME"]).is_relative_to(Path.home() / ".local" / "state")


def signed(request: dict, value: object, *, format: int = cache.FORMAT, mac: str | None = None) -> bytes:
    """An entry for ``request`` as imagectl writes one (its MAC made with this user's secret unless given)."""
    secret = cache.cache_secret()
    assert secret is not None
    text = value if isinstance(value, str) else ""
    entry = {"format": format, "key": request, "value": value, "mac": mac or cache._mac(secret, request, text)}
    return json.dumps(entry).encode()


def test_an_entry_is_plain_json_holding_its_request_value_and_mac(home):
    request = {"as_of": "2024-06-12", "inputs": ["torch==2.3.1"], "grace_days": 7}
    assert lookup(request, Computed()) == 1
    [entry] = entries(home)
    assert json.loads(entry.read_text()) == json.loads(signed(request, "1"))
    assert entry.name == f"number-{cache.cache_key('number', request)}.json"
    secret = cache.secret_path()
    assert not secret.is_relative_to(home) and secret.stat().st_mode & 0o777 == 0o600


def test_an_entry_made_without_this_users_secret_is_not_trusted(home, tmp_path, monkeypatch):
    compute = Computed()
    lookup({"n": 1}, compute)
    entry = cache.entry_path(numbers(), {"n": 1})
    planted = json.loads(entry.read_text()) | {"value": "666"}  # the request and format right, the value not
    entry.write_text(json.dumps(planted))
    assert lookup({"n": 1}, compute) == 2  # the old MAC does not cover the new value: recomputed
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "another-machine"))
    assert lookup({"n": 1}, compute) == 3  # another secret: nothing this cache holds is trusted


def test_the_key_is_the_requests_content_in_any_key_order(home):
    compute = Computed()
    assert lookup({"a": 1, "b": [1, 2]}, compute) == 1
    assert lookup({"b": [1, 2], "a": 1}, compute) == 1  # the same request: a hit
    assert lookup({"a": 1, "b": (1, 2)}, compute) == 1  # a tuple is the same JSON as a list
    for changed in ({"a": 2, "b": [1, 2]}, {"a": 1, "b": [2, 1]}, {"a": 1}, {"a": 1, "b": [1, 2], "c": None}):
        calls = compute.calls
        assert lookup(changed, compute) == calls + 1, changed  # any change of any value is another entry


def test_several_keys_of_one_kind_all_hit_afterwards(home):
    compute = Computed()
    firsts = [lookup({"n": n}, compute) for n in range(5)]
    assert [lookup({"n": n}, compute) for n in range(5)] == firsts and compute.calls == 5


def test_the_bound_holds_and_the_least_recently_used_goes(home):
    compute = Computed()
    for n in range(4):
        lookup({"n": n}, compute, keep=3)
        os.utime(cache.entry_path(numbers(), {"n": n}), (1000 + n, 1000 + n))
    lookup({"n": 1}, compute, keep=3)  # a hit: {"n": 1} is the most recently used now
    lookup({"n": 9}, compute, keep=3)
    left = {json.loads(p.read_text())["key"]["n"] for p in entries(home)}
    assert left == {1, 3, 9}


def test_eviction_keeps_other_kinds(home):
    cache.cached(TEXT, {"n": 0}, lambda: "other kind")
    for n in range(5):
        lookup({"n": n}, Computed(), keep=2)
    assert len(entries(home)) == 2 and len(entries(home, "text")) == 1


@pytest.mark.parametrize("corrupt", [
    lambda: b"\x80\x05 not json",
    lambda: signed({"n": 1}, "not a number"),  # signed, but the kind's decoder refuses it
    lambda: signed({"n": 2}, "7"),  # another request's entry
    lambda: signed({"n": 1}, "7", format=cache.FORMAT + 1),  # another layout
    lambda: signed({"n": 1}, 7),  # not text
    lambda: json.dumps(["a", "list"]).encode(),
])
def test_a_corrupt_or_foreign_entry_is_recomputed_and_replaced(home, corrupt):
    compute = Computed()
    assert lookup({"n": 1}, compute) == 1
    cache.entry_path(numbers(), {"n": 1}).write_bytes(corrupt())
    assert lookup({"n": 1}, compute) == 2 and compute.calls == 2  # one recompute, counted
    assert lookup({"n": 1}, compute) == 2 and compute.calls == 2  # the rewritten entry is a hit again


class Planted:
    """What a poisoned pickle would do when unpickled."""

    def __reduce__(self):
        return (Path.touch, (Path(os.environ["PLANTED_MARKER"]),))


def test_a_pickle_planted_in_the_cache_is_never_unpickled(home, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv("PLANTED_MARKER", str(marker))
    home.mkdir(parents=True)
    cache.entry_path(numbers(), {"n": 1}).write_bytes(pickle.dumps(Planted()))
    (home / f"number-{cache.cache_key('number', {'n': 1})}.pickle").write_bytes(pickle.dumps(Planted()))
    assert lookup({"n": 1}, Computed()) == 1
    assert not marker.exists()


def test_errors_are_not_cached(home):
    def fail() -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cache.cached(numbers(), {"n": 1}, fail)
    assert entries(home) == []
    assert cache.cached(numbers(), {"n": 1}, lambda: 5) == 5


def test_no_cache_bypasses_reads_and_writes(home, monkeypatch):
    compute = Computed()
    lookup({"n": 1}, compute)
    monkeypatch.setenv("IMAGECTL_NO_CACHE", "1")
    assert lookup({"n": 1}, compute) == 2  # the entry on disk is not read
    assert lookup({"n": 2}, compute) == 3
    assert entries(home) == [cache.entry_path(numbers(), {"n": 1})]  # nor is anything written


def test_no_secret_no_cache(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("the state folder cannot be made")
    compute = Computed()
    assert (lookup({"n": 1}, compute), lookup({"n": 1}, compute)) == (1, 2) and entries(home) == []


def test_an_unwritable_cache_is_bypassed(home):
    home.parent.mkdir(parents=True)
    home.write_text("a file where the folder should be")
    compute = Computed()
    assert lookup({"n": 1}, compute) == 1
    assert lookup({"n": 1}, compute) == 2


def test_temporary_files_of_dead_writers_are_removed(home):
    home.mkdir(parents=True)
    stale, fresh = home / "number-0123.abc.tmp", home / "number-4567.def.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"being written")
    os.utime(stale, (1, 1))
    lookup({"n": 1}, Computed())
    assert not stale.exists() and fresh.exists()


def test_racing_writers_and_evictions_leave_a_bounded_readable_cache(home):
    errors: list[BaseException] = []
    bounded = cache.Kind("text", encode=lambda value: value, decode=lambda text: text, keep=4)

    def worker(number: int) -> None:
        try:
            for n in range(30):
                key = {"p": (n * (number + 1)) % 12}
                assert cache.cached(bounded, key, lambda key=key: json.dumps(key)) == json.dumps(key)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(entries(home, "text")) <= 4 and list(home.glob("*.tmp")) == []
