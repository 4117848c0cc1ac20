"""imagectl/cache.py: several entries per kind (least recently used evicted past the bound), corrupt entries
recomputed, IMAGECTL_NO_CACHE, and writers racing each other over the same folder."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from imagectl import cache


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder (``$XDG_CACHE_HOME/imagectl``) with the cache on."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "imagectl"


@pytest.fixture
def inputs(tmp_path: Path) -> list[Path]:
    source = tmp_path / "input.toml"
    source.write_text("x = 1\n")
    return [source]


class Computed:
    """A compute function that counts its calls and returns ``(extra, call number)``."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, extra: str) -> tuple[str, int]:
        self.calls += 1
        return extra, self.calls


def lookup(inputs: list[Path], compute: Computed, extra: str, kind: str = "context", keep: int = cache.KEEP_PER_KIND):
    return cache.cached(kind, inputs, lambda: compute(extra), extra=extra, keep=keep)


def entries(home: Path, kind: str = "context") -> list[Path]:
    return sorted(home.glob(f"{kind}-*.pickle"))


def entry_of(home: Path, inputs: list[Path], extra: str, kind: str = "context") -> Path:
    return home / f"{kind}-{cache.cache_key(kind, inputs, extra)}.pickle"


def test_the_suite_never_uses_the_real_cache_or_state():
    # tests/conftest.py points both at a scratch folder for the whole session
    assert cache.cache_dir() != Path.home() / ".cache" / "imagectl"
    assert not Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(Path.home() / ".cache")
    assert not Path(os.environ["XDG_STATE_HOME"]).is_relative_to(Path.home() / ".local" / "state")


def test_several_keys_of_one_kind_all_hit_afterwards(home, inputs):
    compute = Computed()
    profiles = [f"profile-{n}" for n in range(10)]
    first = [lookup(inputs, compute, name) for name in profiles]
    assert compute.calls == 10 and len(entries(home)) == 10
    assert [lookup(inputs, compute, name) for name in profiles] == first
    assert compute.calls == 10  # every one a hit: building one profile does not evict the others


def test_the_bound_holds_and_the_least_recently_used_goes(home, inputs):
    compute = Computed()
    for name in "abc":
        lookup(inputs, compute, name, keep=3)
    for age, name in enumerate("abc"):  # a oldest ... c newest, whatever the clock's resolution
        os.utime(entry_of(home, inputs, name), ns=(10**18 + age * 10**9,) * 2)
    lookup(inputs, compute, "a", keep=3)  # a hit makes "a" the most recently used
    lookup(inputs, compute, "d", keep=3)  # ... so "b" is evicted
    assert compute.calls == 4
    assert entries(home) == sorted(entry_of(home, inputs, name) for name in "acd")
    for name in "abcdefgh":
        lookup(inputs, compute, name, keep=3)
    assert len(entries(home)) == 3 and entry_of(home, inputs, "h") in entries(home)


def test_eviction_keeps_other_kinds(home, inputs):
    compute = Computed()
    lookup(inputs, compute, "m", kind="matrix")
    for name in "abcde":
        lookup(inputs, compute, name, keep=2)
    assert len(entries(home)) == 2 and len(entries(home, "matrix")) == 1
    calls = compute.calls
    lookup(inputs, compute, "m", kind="matrix")
    assert compute.calls == calls


def test_a_corrupt_entry_is_recomputed_and_replaced(home, inputs):
    compute = Computed()
    assert lookup(inputs, compute, "a") == ("a", 1)
    entry_of(home, inputs, "a").write_bytes(b"\x80\x05 not a pickle")
    assert lookup(inputs, compute, "a") == ("a", 2)
    assert lookup(inputs, compute, "a") == ("a", 2)  # the rewritten entry is a hit again


def test_a_changed_input_is_a_new_key(home, inputs):
    compute = Computed()
    lookup(inputs, compute, "a")
    inputs[0].write_text("x = 22\n")
    assert lookup(inputs, compute, "a") == ("a", 2)


def test_errors_are_not_cached(home, inputs):
    def fail() -> str:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cache.cached("context", inputs, fail)
    assert entries(home) == []
    assert cache.cached("context", inputs, lambda: "fine") == "fine"


def test_no_cache_bypasses_reads_and_writes(home, inputs, monkeypatch):
    compute = Computed()
    lookup(inputs, compute, "a")
    monkeypatch.setenv("IMAGECTL_NO_CACHE", "1")
    assert lookup(inputs, compute, "a") == ("a", 2)  # the entry on disk is not read
    assert lookup(inputs, compute, "b") == ("b", 3)
    assert entries(home) == [entry_of(home, inputs, "a")]  # nor is anything written


def test_an_unwritable_cache_is_bypassed(home, inputs, monkeypatch):
    home.parent.mkdir(parents=True)
    home.write_text("a file where the folder should be")
    compute = Computed()
    assert lookup(inputs, compute, "a") == ("a", 1)
    assert lookup(inputs, compute, "a") == ("a", 2)


def test_temporary_files_of_dead_writers_are_removed(home, inputs):
    home.mkdir(parents=True)
    stale, fresh = home / "context-0123.abc.tmp", home / "context-4567.def.tmp"
    stale.write_bytes(b"partial")
    fresh.write_bytes(b"being written")
    os.utime(stale, (1, 1))
    lookup(inputs, Computed(), "a")
    assert not stale.exists() and fresh.exists()


def test_racing_writers_and_evictions_leave_a_bounded_readable_cache(home, inputs):
    errors: list[BaseException] = []

    def worker(number: int) -> None:
        compute = Computed()
        try:
            for n in range(30):
                name = f"p{(n * (number + 1)) % 12}"
                assert lookup(inputs, compute, name, keep=4)[0] == name
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(entries(home)) <= 4 and list(home.glob("*.tmp")) == []
