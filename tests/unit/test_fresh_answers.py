"""Nothing a command answers can be stale (issue 18).

``show``, ``validate``, ``list`` and ``render`` keep no answer between runs.  An audit hook proves, cold and warm,
that each reads its matrix, lock and configuration files on every run, and that the one cache entry it may read
(the loaded matrix, :mod:`imagectl.matrix.cached`) is keyed by the SHA-256 of exactly the matrix files it opened,
as they are now.  A change of any input (a lock file, a lock directory, the configuration, a matrix file) changes
the next answer.

The one cache left, build-time locks (:func:`imagectl.lock.make.lock_for_build`), is keyed by the whole
:class:`~imagectl.lock.make.LockRequest` with its as-of *date* resolved: the hole of a lock resolved inside a
release's grace window and reused after it is closed (such a lock is never stored), and the resolution reads no
file the key does not cover.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import imagectl.lock.make
from imagectl import cache, shipped
from imagectl.config import Config
from imagectl.lock.asof import AsOf
from imagectl.lock.make import BUILD_TIME_LOCKS, LockRequest, lock_for_build, lock_request
from imagectl.lock.target import target_for
from imagectl.matrix.names import resolve_profile
from tests.unit.conftest import fake_resolve

PROFILE = "torch-2.3-cu121"
UNLOCKED = "torch-2.3-cu121-py3.11"  # no shipped lock: a build locks it at build time
REPO = Path(__file__).resolve().parents[2]

# Runs `imagectl ARGS` in this interpreter under an audit hook and writes every path it opened (resolved) to OUT.
AUDITED = textwrap.dedent("""
    import json, os, sys
    opened, recording = [], [True]

    def hook(event, args):
        if recording and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            opened.append(os.path.realpath(os.fsdecode(args[0])))

    sys.addaudithook(hook)
    from imagectl.cli import main
    code = main(sys.argv[2:])
    recording.clear()
    with open(sys.argv[1], "w") as out:
        json.dump({"code": code, "opened": sorted(set(opened))}, out)
""")


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The cache on, in a folder of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "imagectl"


def audited(tmp_path: Path, *args: str) -> tuple[int, set[Path]]:
    """Exit status and the files ``imagectl ARGS`` opened, run from ``tmp_path`` in a fresh interpreter."""
    out = tmp_path / f"opened-{len(list(tmp_path.glob('opened-*')))}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", AUDITED, str(out), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    return report["code"], {Path(p) for p in report["opened"]}


def under(paths: set[Path], root: Path) -> set[Path]:
    return {p for p in paths if p.is_relative_to(root.resolve())}


def matrix_entry_files(entry: Path) -> dict[Path, str]:
    """The matrix files a matrix cache entry's key holds, with their SHA-256."""
    return {Path(path).resolve(): digest for path, digest in json.loads(entry.read_text())["key"]["files"]}


@pytest.mark.parametrize("args", [("show", PROFILE, "--json"), ("validate",), ("list",), ("render", PROFILE)])
def test_every_file_a_command_opens_is_read_now_or_covered_by_the_key(tmp_path, own_cache, args):
    team_locks, team_matrices = tmp_path / "locks", tmp_path / "my-matrices"
    team_locks.mkdir()
    team_matrices.mkdir()
    shipped_matrices, shipped_locks = shipped.shipped_dir("matrices"), shipped.shipped_dir("matrices") / "locks"
    shutil.copy(shipped_locks / "torch-2.3.1-cu121-py3.10.txt", team_locks)  # the team's copy of the lock
    (team_matrices / "team.toml").write_text("# a team's matrix file, empty\n")
    config = tmp_path / "imagectl.toml"
    config.write_text('[paths]\nlocks = ["./locks"]\nmatrices = ["./my-matrices"]\n')

    runs = [audited(tmp_path, *args) for _ in range(2)]  # cold (the matrix loaded and stored), then warm (a hit)
    [entry] = own_cache.glob("matrix-*.json")
    keyed = matrix_entry_files(entry)
    for code, opened in runs:
        assert code == 0, args
        in_matrix_dirs = under(opened, shipped_matrices) | under(opened, team_matrices)
        matrix_files = {p for p in in_matrix_dirs if p.suffix == ".toml"}
        assert {p.name for p in matrix_files} >= {"cuda.toml", "torch.toml", "team.toml"}
        # every matrix file it opened is in the key, with the SHA-256 of its bytes now, and nothing else is
        assert keyed == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in matrix_files}, args
        # from the cache it reads the matrix entry alone (and writes it through a temporary file when cold)
        assert {p.name.split("-")[0] for p in under(opened, own_cache)} == {"matrix"}, args
        assert config.resolve() in opened  # the configuration: read every run
    if args[0] in ("show", "render"):  # the lock the profile installs: read every run, never cached
        for _, opened in runs:
            assert (team_locks / "torch-2.3.1-cu121-py3.10.txt").resolve() in opened, args
    assert {p.name for p in own_cache.iterdir()} == {entry.name}  # no answer of the command itself is kept


def test_an_edited_matrix_file_is_another_key(tmp_path, own_cache):
    team_matrices = tmp_path / "my-matrices"
    team_matrices.mkdir()
    team = team_matrices / "team.toml"
    team.write_text("# a team's matrix file\n")
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["./my-matrices"]\n')
    audited(tmp_path, "show", PROFILE)
    team.write_text("# a team's matrix file, edited\n")
    audited(tmp_path, "show", PROFILE)
    entries = sorted(own_cache.glob("matrix-*.json"), key=lambda p: p.stat().st_mtime_ns)
    assert len(entries) == 2
    assert matrix_entry_files(entries[-1])[team.resolve()] == hashlib.sha256(team.read_bytes()).hexdigest()


def show(run_cli, *args: str) -> dict:
    result = run_cli("show", PROFILE, "--json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_show_keeps_no_answer_and_answers_as_without_a_cache(run_cli, own_cache, monkeypatch):
    first = show(run_cli)
    assert show(run_cli) == first
    assert [p.name.split("-")[0] for p in own_cache.iterdir()] == ["matrix"]
    monkeypatch.setenv("IMAGECTL_NO_CACHE", "1")
    assert show(run_cli) == first


def test_a_team_lock_written_after_a_show_is_shown_and_its_removal_too(run_cli, tmp_path):
    team = tmp_path / "locks"
    team.mkdir()
    (tmp_path / "imagectl.toml").write_text('[paths]\nlocks = ["./locks"]\n')
    before = show(run_cli)
    assert before["lock"]["origin"] == "shipped"
    shutil.copy(before["lock"]["path"], team / Path(before["lock"]["path"]).name)
    after = show(run_cli)
    assert after["lock"]["origin"] == "team" and after["lock"]["path"] == str(team / Path(before["lock"]["path"]).name)
    (team / Path(before["lock"]["path"]).name).unlink()
    assert show(run_cli)["lock"]["origin"] == "shipped"


def test_an_edited_lock_file_changes_the_shown_lock(run_cli, tmp_path):
    team = tmp_path / "locks"
    team.mkdir()
    (tmp_path / "imagectl.toml").write_text('[paths]\nlocks = ["./locks"]\n')
    shipped_lock = Path(show(run_cli)["lock"]["path"])
    copy = team / shipped_lock.name
    shutil.copy(shipped_lock, copy)
    sha = show(run_cli)["lock"]["sha256"]
    copy.write_text(copy.read_text().replace("# source: ", "# source: edited, "))
    edited = show(run_cli)["lock"]
    assert edited["sha256"] != sha and edited["source"].startswith("edited, ")


def test_a_changed_configuration_changes_the_answer(run_cli, tmp_path):
    assert show(run_cli)["image"] == f"localhost/imagectl/{PROFILE}:latest"
    (tmp_path / "imagectl.toml").write_text('[registry]\nurl = "registry.example.com:5000"\nnamespace = "team"\n')
    assert show(run_cli)["image"] == f"registry.example.com:5000/team/{PROFILE}:latest"


def test_a_matrix_file_added_after_a_validate_is_validated(run_cli, tmp_path):
    extra = tmp_path / "my-matrices"
    extra.mkdir()
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["./my-matrices"]\n')
    assert run_cli("validate").code == 0
    (extra / "broken.toml").write_text("[cuda.\n")
    result = run_cli("validate")
    assert result.code == 2 and "broken.toml" in result.err


def test_a_changed_matrix_file_is_read_again_by_show(run_cli, tmp_path):
    mine = tmp_path / "my-matrices"
    mine.mkdir()
    team_cuda = mine / "cuda.toml"
    text = (shipped.shipped_dir("matrices") / "cuda.toml").read_text()
    team_cuda.write_text(text)
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["./my-matrices"]\n')
    assert show(run_cli)["min_driver"] == "530.30.02"
    floor = 'min_driver = "530.30.02"'
    assert text.count(floor) == 1
    team_cuda.write_text(text.replace(floor, 'min_driver = "535.54.03"'))
    assert show(run_cli)["min_driver"] == "535.54.03"


# -- the build-time lock cache


class Resolutions:
    """Counts the resolutions (the fake resolver's calls with the lock's inputs)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, requirements, target, as_of=None, constraints=(), prefer=()):
        self.calls += 1
        return fake_resolve(requirements, target, as_of, constraints, prefer)


@pytest.fixture
def resolutions(monkeypatch) -> Resolutions:
    counted = Resolutions()
    monkeypatch.setattr(imagectl.lock.make, "resolve", counted)
    monkeypatch.setattr(imagectl.lock.make, "first_layer_as_of", lambda *args: None)  # no upload days asked
    return counted


def release_policy(monkeypatch, uploaded: dt.date, grace_days: int = 7) -> None:
    """``--as-of release`` for a release uploaded on ``uploaded`` (no index asked)."""
    day = uploaded + dt.timedelta(days=grace_days)
    monkeypatch.setattr(imagectl.lock.make, "resolve_as_of",
                        lambda *args, **kwargs: AsOf(day.isoformat(), f"release: uploaded {uploaded}"))


def test_a_lock_inside_the_grace_window_is_never_reused_after_it(matrix, monkeypatch, resolutions, own_cache):
    profile, config = resolve_profile(UNLOCKED, matrix), Config()
    uploaded = dt.date(2024, 6, 5)  # the window: 2024-06-05 .. 2024-06-12
    release_policy(monkeypatch, uploaded)

    def on(day: dt.date):
        return lock_for_build(profile, config, today=lambda: day).lock

    inside = on(dt.date(2024, 6, 8))
    assert on(dt.date(2024, 6, 9)).text == inside.text and resolutions.calls == 2  # inside: resolved every time
    assert not own_cache.exists()  # ... and never stored
    on(dt.date(2024, 6, 12))  # the last day of the window is not over yet either
    assert resolutions.calls == 3 and not own_cache.exists()
    after = on(dt.date(2024, 6, 13))
    assert resolutions.calls == 4 and len(list(own_cache.glob("lock-*.json"))) == 1  # settled: resolved, stored
    assert on(dt.date(2025, 1, 1)).text == after.text and resolutions.calls == 4  # and reused from then on


def test_latest_is_never_cached(matrix, monkeypatch, resolutions, own_cache):
    monkeypatch.setattr(imagectl.lock.make, "resolve_as_of", lambda *args, **kwargs: AsOf("latest"))
    profile = resolve_profile(UNLOCKED, matrix)
    lock_for_build(profile, Config())
    lock_for_build(profile, Config())
    assert resolutions.calls == 2 and not own_cache.exists()


def test_every_field_of_the_request_is_in_the_key_and_nothing_else_is(matrix, monkeypatch, resolutions):
    release_policy(monkeypatch, dt.date(2024, 6, 5))
    profile = resolve_profile(UNLOCKED, matrix)
    request = lock_request(profile, Config(), None, target_for(profile, Config()))
    key = cache.cache_key(BUILD_TIME_LOCKS.name, request.key())
    for spec in dataclasses.fields(LockRequest):
        value = getattr(request, spec.name)
        other = value + 1 if isinstance(value, int) else (*value, "x") if isinstance(value, tuple) else value + "x"
        changed = dataclasses.replace(request, **{spec.name: other})
        assert cache.cache_key(BUILD_TIME_LOCKS.name, changed.key()) != key, spec.name
    assert set(request.key()) == {spec.name for spec in dataclasses.fields(LockRequest)}


def test_a_settled_lock_differs_by_what_the_key_holds(matrix, monkeypatch, resolutions, own_cache):
    release_policy(monkeypatch, dt.date(2024, 6, 5))
    profile = resolve_profile(UNLOCKED, matrix)
    lock_for_build(profile, Config(lock_grace_days=7))
    lock_for_build(profile, Config(lock_grace_days=30))  # another grace: another request
    lock_for_build(profile, Config(pip_index_url="https://mirror.example.com/simple"))  # another index
    lock_for_build(profile, Config(pip_index_url="https://user:one@mirror.example.com/simple"))  # same, other login
    assert resolutions.calls == 3 and len(list(own_cache.glob("lock-*.json"))) == 3
    assert not [p for p in own_cache.iterdir() if b"one@" in p.read_bytes()]  # no credential in the cache


def test_the_resolution_reads_no_file_its_key_does_not_cover(matrix, monkeypatch, resolutions, tmp_path):
    """The cached computation (resolve_lock) runs under an audit hook: it opens nothing under the matrix, the lock
    directories or the configuration; everything it reads of them came in through its request."""
    release_policy(monkeypatch, dt.date(2024, 6, 5))
    profile = resolve_profile(UNLOCKED, matrix)
    watched = [shipped.shipped_dir("matrices").resolve(), tmp_path.resolve()]
    opened: list[str] = []
    real = imagectl.lock.make.resolve_lock

    def audited_resolution(request, target, prefer=None):
        recording.append(True)
        try:
            return real(request, target, prefer)
        finally:
            recording.pop()

    recording: list[bool] = []

    def hook(event: str, args: tuple) -> None:
        if recording and event == "open" and isinstance(args[0], (str, os.PathLike)):
            opened.append(os.path.realpath(os.fspath(args[0])))

    sys.addaudithook(hook)  # stays for the session; records only while ``recording`` is non-empty
    monkeypatch.setattr(imagectl.lock.make, "resolve_lock", audited_resolution)
    lock_for_build(profile, Config(lock_dirs=(tmp_path,)))
    assert resolutions.calls == 1
    assert [p for p in opened if any(Path(p).is_relative_to(w) for w in watched)] == []
