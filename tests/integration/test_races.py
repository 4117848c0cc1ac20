"""OS processes racing on one profile repository of a real registry: nothing lost.

Each process runs 20 rounds of rollback, promote, build (a new image pushed, ``latest`` moved onto it, as
``build --force`` does), build-reuse (the one tag listing a reused build makes) and prune, through the library
with a fresh store per round, as one command each.  Both processes start each round at the same moment, each
with a different action, so the pairs meet (two moves, a move and a prune, a build and a prune).  Afterwards:

- 0 moves lost: every move either process reported as ``changed`` is in the registry's move log;
- 0 images lost: every immutable tag ever made still names the image it was made for, unless a prune reported
  deleting it, and every moving tag and channel points to a manifest whose blobs are all there.

Then ``promote --from OLDEST stable`` racing ``prune`` (issue 36, item 2): 20 rounds, each on a fresh repository
where prune deletes the image promote moves ``stable`` onto, ``stable`` existing in half of them.  A promote that
says it moved ``stable`` leaves it on that image, whole and still under its immutable tag; one that fails leaves
``stable`` where it was; no tag ever names a manifest that is gone.

And two identical builds racing (issue 36, item 2): 20 rounds of two processes publishing one image (the same
image id in both, as two buildah builds of the same inputs give) under the immutable tag a build of it in that
second gets, through the build's own steps (:func:`imagectl.images.immutable.existing_immutable`, the push by
digest and :func:`imagectl.images.publish.name_published`); in half the rounds the second starts when the first
has published.  Both succeed and report the same image; a full build is not needed for that (and takes a minute).

The repositories are seeded with small real images pushed through the registry client (no docker build), as in
``test_tags.py``.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import threading
import time
import traceback
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from imagectl.errors import ImagectlError, NotFoundError, OperationError
from imagectl.reference import parse_reference
from imagectl.registry import RegistryClient
from imagectl.tags.moves import MoveResult, guarded_move, promote, rollback
from imagectl.tags.naming import is_immutable, is_reserved
from imagectl.tags.prune import execute_prune, plan_for_store
from imagectl.tags.store import DELETE_MARK_STALE, RegistryTagStore
from tests.integration.support.proxy import TamperingProxy
from tests.integration.support.registry import make_sample_image, push_sample_image
from tests.integration.test_tags import LABELS, PROFILE, seed, tag_of

pytestmark = pytest.mark.integration

ROUNDS = 20
ACTIONS = ("rollback", "promote", "build", "reuse", "prune", "rollback", "promote")
TIME_LIMIT_S = 60
# a move may lose to the other process (its target pruned first, or nothing left to go back to): it must say so
LOST_RACE = ("no longer exists", "no earlier immutable image", "does not exist yet", "has no such tag",
             "since this", "was under way",  # another writer moved the tag under it (imagectl.tags.moves)
             "deleted by a concurrent prune")  # its target went while it moved the tag


def built_tag(worker: int, n: int) -> str:
    """The immutable tag of build ``n`` of ``worker``: dated February 2024, after every seeded image."""
    return f"2.3.1-cu121-py3.11-20240201T{worker:02d}{n // 60:02d}{n % 60:02d}-{worker:x}{n:09x}"


def _store(host: str, repo: str) -> RegistryTagStore:
    return RegistryTagStore(RegistryClient(host, insecure=True), parse_reference(f"{host}/{repo}"))


def _act(action: str, worker: int, n: int, host: str, repo: str, report: dict[str, list]) -> MoveResult | None:
    """One command's worth of work on a fresh store; the move it made (None for reuse without a move, prune)."""
    store = _store(host, repo)
    if action == "rollback":
        return rollback(store)
    if action == "promote":
        channel, source = (("stable", "latest"), ("canary", "stable"))[n % 2]
        return promote(store, channel, source)
    if action == "build":
        tag = built_tag(worker, n)
        image = make_sample_image({"layer.txt": f"worker {worker} build {n}\n".encode()}, labels=LABELS)
        digest = push_sample_image(store.client, repo, tag, image)
        report["built"].append((tag, digest))
        return guarded_move(store, "latest", digest, tag, store.digest("latest"), "build")
    if action == "reuse":  # what a reused build does: one listing; latest moves only when there is none
        tag = store.tag_with_key(f"{worker:x}{max(n - 1, 0):09x}")
        target = store.digest(tag) if tag else None
        if target and store.digest("latest") is None:
            return guarded_move(store, "latest", target, tag, None, "build")
        return None
    plan = plan_for_store(store, 3, timedelta(0), datetime.now(timezone.utc))
    done = execute_prune(store, plan)
    report["pruned"] += done.deleted
    report["failed"] += [f"prune {tag}: {error}" for tag, error in done.failed]
    return None


def worker(index: int, host: str, repo: str, barrier: Any, results: Any) -> None:
    """One process: ROUNDS actions, each reported (moves made, images built and pruned, races lost, errors)."""
    report: dict[str, list] = {"moves": [], "built": [], "pruned": [], "lost": [], "failed": [], "notes": []}
    for n in range(ROUNDS):
        action = ACTIONS[(n + index) % len(ACTIONS)]
        try:
            barrier.wait(30)  # each round starts in both processes at once
        except threading.BrokenBarrierError:
            report["failed"].append(f"round {n}: the other process stopped")
            break
        try:
            moved = _act(action, index, n, host, repo, report)
        except ImagectlError as exc:
            lost = any(reason in str(exc) for reason in LOST_RACE)
            report["lost" if lost else "failed"].append(f"{action}: {exc}")
            continue
        except Exception:  # everything else is a failure of the test's subject: carried back whole
            report["failed"].append(f"{action}: {traceback.format_exc()}")
            continue
        if moved is not None and moved.changed:
            report["moves"].append((moved.tag, moved.target, moved.previous))
            if moved.note:
                report["notes"].append(f"{action}: {moved.note}")
    results.put((index, report))


def run_workers(host: str, repo: str, count: int = 2) -> list[dict[str, list]]:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(count), context.Queue()
    processes = [context.Process(target=worker, args=(i, host, repo, barrier, results)) for i in range(count)]
    for process in processes:
        process.start()
    reports: dict[int, dict[str, list]] = {}
    deadline = time.monotonic() + TIME_LIMIT_S
    try:
        while len(reports) < count and time.monotonic() < deadline:
            try:
                index, report = results.get(timeout=1)
                reports[index] = report
            except Exception:  # queue.Empty: keep waiting while the processes live
                if not any(p.is_alive() for p in processes) and results.empty():
                    break
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
    assert len(reports) == count, f"only {len(reports)} of {count} processes reported within {TIME_LIMIT_S} s"
    return [reports[i] for i in range(count)]


def whole_image(client: RegistryClient, repo: str, reference: str) -> str | None:
    """The digest ``reference`` names when its manifest and every blob of it are there, else None."""
    digest = client.head_manifest(repo, reference)
    if digest is None:
        return None
    manifest = client.get_manifest(repo, digest)
    return digest if all(client.blob_exists(repo, blob.digest) for blob in manifest.blobs()) else None


def test_two_processes_racing_lose_no_move_and_no_image(registry):
    repo = f"races/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    seeded = seed(client, repo, days=range(1, 7))
    started = time.monotonic()
    reports = run_workers(registry.host, repo)
    seconds = time.monotonic() - started

    print(f"{seconds:.1f} s; per process: moves {[len(r['moves']) for r in reports]}, races lost"
          f" {[len(r['lost']) for r in reports]}, built {[len(r['built']) for r in reports]},"
          f" pruned {[len(r['pruned']) for r in reports]}")
    failed = [line for r in reports for line in r["failed"]]
    assert failed == [], "\n".join(failed)
    assert not [n for r in reports for n in r["notes"] if "log could not be written" in n], reports

    logged = Counter((m.tag, m.to, m.previous) for m in _store(registry.host, repo).moves())
    reported = Counter(move for r in reports for move in r["moves"])
    assert all(len(r["moves"]) >= 3 for r in reports), reports  # both processes really moved tags
    assert reported - logged == Counter(), f"moves reported but not logged: {reported - logged}"

    made = {tag_of(day): digest for day, digest in seeded.items()}
    made.update(pair for r in reports for pair in r["built"])
    pruned = {tag for r in reports for tag in r["pruned"]}
    lost = {tag: digest for tag, digest in made.items()
            if tag not in pruned and whole_image(client, repo, tag) != digest}
    assert lost == {}, f"immutable tags lost without a prune deleting them: {lost}"

    tags = client.list_tags(repo)
    pointers = [t for t in tags if not is_immutable(t) and not is_reserved(t)]
    assert "latest" in pointers and {"stable", "canary"} & set(pointers), tags
    assert [p for p in pointers if whole_image(client, repo, p) is None] == []
    assert pruned, "no prune deleted anything: the race did not happen"
    assert seconds < TIME_LIMIT_S


def test_a_rollback_whose_put_is_held_up_does_not_overwrite_one_that_finished_meanwhile(registry):
    """Issue 24, item 4: a proxy held a rollback's tag PUT for 4 s; it overwrote a concurrent rollback that had
    finished in between, both exited 0, and both records said FROM the same image."""
    repo = f"held/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    seeded = seed(client, repo)
    proxy = TamperingProxy(registry.url)
    held = proxy.hold("PUT", f"/v2/{repo}/manifests/latest")
    outcome: list[object] = []
    slow = threading.Thread(target=lambda: outcome.append(_attempt(lambda: rollback(_store(proxy.host, repo)))))
    try:
        slow.start()
        assert held.reached.wait(30), "the slow rollback's PUT never reached the proxy"
        fast = rollback(_store(registry.host, repo))
        assert fast.changed and (fast.previous, fast.target) == (seeded[4], seeded[3])
        held.release()
        slow.join(30)
    finally:
        held.release()
        proxy.stop()
    (error,) = outcome
    assert isinstance(error, OperationError) and error.exit_code == 1, error
    assert "while this rollback was under way" in str(error) and "(rollback at" in str(error)
    assert client.head_manifest(repo, "latest") == seeded[3]  # where the rollback that said so left it
    rollbacks = [m for m in _store(registry.host, repo).moves() if m.action == "rollback"]
    assert [(m.previous, m.to) for m in rollbacks] == [(seeded[4], seeded[3])]  # one record, not two


def _attempt(call: Any) -> object:
    try:
        return call()
    except ImagectlError as exc:
        return exc


# --------------------------------------------------------------------------------------------- promote vs prune

PROMOTE_ROUNDS = 20


def round_repo(n: int) -> str:
    return f"promote-prune/r{n}/{PROFILE}"


def promote_or_prune(role: str, host: str, barrier: Any, results: Any) -> None:
    """One process: each round, when the round's repository is seeded, ``promote --from OLDEST stable`` or
    ``prune --keep 1``; each outcome reported (a promote's result or error, a prune's deletions and failures)."""
    for n in range(PROMOTE_ROUNDS):
        try:
            barrier.wait(60)
        except threading.BrokenBarrierError:
            return
        store = _store(host, round_repo(n))
        try:
            if role == "promote":
                time.sleep((n % 10) * 0.03)  # spread the promote over the prune's run
                moved = promote(store, "stable", tag_of(1))
                outcome: dict[str, Any] = {"changed": moved.changed, "target": moved.target, "note": moved.note}
            else:
                done = execute_prune(store, plan_for_store(store, 1, timedelta(0), datetime.now(timezone.utc)))
                outcome = {"deleted": done.deleted, "failed": done.failed, "skipped": done.skipped}
        except ImagectlError as exc:
            outcome = {"error": str(exc), "exit": exc.exit_code}
        except Exception:
            outcome = {"crash": traceback.format_exc()}
        results.put((n, role, outcome))


def check_round(client: RegistryClient, repo: str, seeded: dict[int, str], stable_before: str | None,
                outcomes: dict[str, dict[str, Any]]) -> list[str]:
    """What went wrong in one round (nothing: [])."""
    problems = [f"{role}: {o['crash']}" for role, o in outcomes.items() if "crash" in o]
    promoted, pruned = outcomes["promote"], outcomes["prune"]
    if pruned.get("failed") or "error" in pruned:
        problems.append(f"prune failed: {pruned}")
    broken = [t for t in client.list_tags(repo) if not is_reserved(t) and whole_image(client, repo, t) is None]
    problems += [f"tag naming a manifest (or blobs) that is gone: {broken_why(client, repo, t)}" for t in broken]
    stable = client.head_manifest(repo, "stable")
    if "error" in promoted:
        if stable != stable_before:
            problems.append(f"promote failed ({promoted['error']}) but stable moved from {stable_before} to {stable}")
        if promoted["exit"] == 0:
            problems.append(f"promote failed with exit status 0: {promoted['error']}")
    elif "changed" in promoted:
        if stable != seeded[1]:
            problems.append(f"promote said changed={promoted['changed']} ({promoted['note']}) but stable is {stable},"
                            f" not {seeded[1]}")
        elif client.head_manifest(repo, tag_of(1)) != seeded[1]:
            problems.append(f"promote said changed but the image stable names lost its tag {tag_of(1)}")
    return problems


def broken_why(client: RegistryClient, repo: str, tag: str) -> str:
    """What is wrong with ``tag``, which :func:`whole_image` found broken."""
    digest = client.head_manifest(repo, tag)
    if digest is None:
        return f"{tag} is listed but names nothing (a delete's half-done tag)"
    blobs = client.get_manifest(repo, digest).blobs()
    return f"{tag} names {digest}, without blobs {[b.digest for b in blobs if not client.blob_exists(repo, b.digest)]}"


def quick_seed(client: RegistryClient, repo: str, *, with_stable: bool) -> dict[int, str]:
    """Days 1-4 under their immutable tags, ``latest`` (and ``stable`` when asked) on day 4, no move log: prune
    --keep 1 deletes days 3, 2 and 1."""
    seeded = {}
    for day in range(1, 5):
        image = make_sample_image({"layer.txt": f"{repo} built on day {day}\n".encode()}, labels=LABELS)
        seeded[day] = push_sample_image(client, repo, tag_of(day), image)
    latest = client.get_manifest(repo, seeded[4])
    for pointer in ("latest", "stable") if with_stable else ("latest",):
        client.put_manifest(repo, pointer, latest)
    return seeded


def test_a_half_done_manifest_delete_is_made_whole(registry):
    """What the promote-vs-prune race left in CI (round 2: an immutable tag "listed but names nothing", prune
    reporting it deleted): distribution deletes a manifest's revision first and then looks up and removes its
    tags; when that lookup fails (it reads a tag another writer is writing at that moment) it answers 500 with
    the tags left naming nothing, the client sends the DELETE again by itself, and the second try answers 404,
    which the store took for "done".  Here the proxy does the registry's first half (it removes the manifest's
    revision link in the registry's storage, which is what the registry's delete does first) and answers 500."""
    client = RegistryClient(registry.host, insecure=True)
    repo = f"half-done-delete/{PROFILE}"
    seeded = quick_seed(client, repo, with_stable=False)
    revisions = registry.root / "data/docker/registry/v2/repositories" / repo / "_manifests/revisions/sha256"
    assert (revisions / seeded[2].removeprefix("sha256:") / "link").is_file()
    halves: list[str] = []

    def first_half(path: str) -> int:
        digest = path.rsplit("/", 1)[1]
        (revisions / digest.removeprefix("sha256:") / "link").unlink()
        halves.append(digest)
        return 500

    proxy = TamperingProxy(registry.url)
    proxy.once("DELETE", f"/v2/{repo}/manifests/sha256:", first_half)
    try:
        _store(proxy.host, repo).delete(tag_of(2))
    finally:
        proxy.stop()
    assert halves == [seeded[2]]  # the fault was met: the first DELETE was half-done
    tags = client.list_tags(repo)
    assert tag_of(2) not in tags, broken_why(client, repo, tag_of(2))
    assert [t for t in tags if whole_image(client, repo, t) is None] == []
    assert client.head_manifest(repo, seeded[2]) is None
    assert {t: client.head_manifest(repo, t) for t in tags} == {
        tag_of(1): seeded[1], tag_of(3): seeded[3], tag_of(4): seeded[4], "latest": seeded[4]}


def test_prune_removes_the_deletion_marks_killed_prunes_left(registry):
    """Issue 36, item 6 (kill -9 leaves things behind): a prune killed between putting a deletion mark and removing
    it left the mark in the repository for good.  Moves ignore a mark older than DELETE_MARK_STALE; the next prune
    removes it, and leaves a fresh mark (a prune at work right now) and anything else alone."""
    client = RegistryClient(registry.host, insecure=True)
    repo = f"stale-marks/{PROFILE}"
    seeded = quick_seed(client, repo, with_stable=False)
    past = datetime.now(timezone.utc) - DELETE_MARK_STALE - timedelta(minutes=1)
    killed = RegistryTagStore(client, parse_reference(f"{registry.host}/{repo}"), clock=lambda: past)
    stale = killed.begin_delete(seeded[2])  # a prune killed right after marking day 2, 11 minutes ago
    running = _store(registry.host, repo).begin_delete(seeded[3])  # a prune marking day 3 right now
    store = _store(registry.host, repo)
    assert not store.deleting(seeded[2]) and store.deleting(seeded[3])
    lines: list[str] = []
    report = execute_prune(store, plan_for_store(store, 4, timedelta(0), datetime.now(timezone.utc)), lines.append)
    assert (report.marks_removed, report.deleted, report.failed) == ([stale], [], [])
    assert lines == [f"removed {stale}: the deletion mark of a prune that did not finish"]
    tags = client.list_tags(repo)
    assert stale not in tags and running in tags
    assert {t: client.head_manifest(repo, t) for t in tags if not is_reserved(t)} == {
        tag_of(1): seeded[1], tag_of(2): seeded[2], tag_of(3): seeded[3], tag_of(4): seeded[4], "latest": seeded[4]}


def test_promote_racing_prune_never_loses_or_breaks_the_channel(registry):
    """Issue 36, item 2: ``promote --from A stable`` racing ``prune`` lost or broke ``stable`` in 6 of 20 rounds,
    each time exiting 0 saying "changed"."""
    client = RegistryClient(registry.host, insecure=True)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    processes = [context.Process(target=promote_or_prune, args=(role, registry.host, barrier, results))
                 for role in ("promote", "prune")]
    for process in processes:
        process.start()
    problems: dict[int, list[str]] = {}
    tally: Counter[str] = Counter()
    try:
        for n in range(PROMOTE_ROUNDS):
            repo = round_repo(n)
            seeded = quick_seed(client, repo, with_stable=n % 2 == 0)
            stable_before = client.head_manifest(repo, "stable")
            barrier.wait(60)
            outcomes = {}
            for _ in range(2):
                index, role, outcome = results.get(timeout=60)
                assert index == n
                outcomes[role] = outcome
            promoted = outcomes["promote"]
            tally["promote failed" if "error" in promoted else "promote moved"] += 1
            if "error" in promoted:
                print(f"round {n}: promote: {promoted['error']}")
            tally["prune kept day 1" if tag_of(1) not in outcomes["prune"].get("deleted", ()) else "pruned day 1"] += 1
            found = check_round(client, repo, seeded, stable_before, outcomes)
            if found:
                problems[n] = found
    finally:
        barrier.abort()
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
    print(f"{PROMOTE_ROUNDS} rounds: {dict(tally)}")
    assert problems == {}, "\n".join(f"round {n}: {p}" for n, found in problems.items() for p in found)


# --------------------------------------------------------------------------------------------- identical builds

def small_buildah_image(folder: Path) -> str:
    """A small image in buildah's storage (one file, a build key label); its id."""
    (folder / "hello.txt").write_text("identical builds\n")
    container = _buildah("from", "scratch")
    try:
        _buildah("add", container, str(folder / "hello.txt"), "/hello.txt")
        _buildah("config", "--label", f"imagectl.build-key={'b' * 64}", container)
        return _buildah("commit", "-q", container, "localhost/imagectl-test/identical-builds")
    finally:
        _buildah("rm", container)


def _buildah(*argv: str) -> str:
    done = subprocess.run(["buildah", *argv], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def publish_as_a_build_does(index: int, host: str, image_id: str, barrier: Any, pushed: Any, results: Any) -> None:
    """One process: each round, what a build does with its checked image (imagectl.images.builder, its attestations
    aside): read the immutable tag it would write (a tag naming this very image is not pushed again), push by
    digest, put the tag (read again first), tag locally."""
    from imagectl.config import Config
    from imagectl.engine.select import make_engine
    from imagectl.images.immutable import existing_immutable, image_of
    from imagectl.images.publish import name_published, push_by_digest

    config = Config(registry_url=host, insecure=True)
    engine = make_engine("buildah", insecure_hosts=config.insecure_hosts)
    for n in range(ROUNDS):
        try:
            barrier.wait(60)
        except threading.BrokenBarrierError:
            return
        repo = parse_reference(f"{host}/identical/r{n}/{PROFILE}")
        tag = f"2.3.1-cu121-py3.11-20240301T120000-bbbbbbbbbb-{image_id.removeprefix('sha256:')[:12]}"
        try:
            if index == 1 and n % 2 == 0:
                pushed.wait(60)  # this round the second build reads the tag when the first has published
            store = RegistryTagStore(RegistryClient(host, insecure=True), repo)
            this_image = image_of(engine, repo, image_id, registry=True)
            existing = existing_immutable(store, tag, this_image)
            target = existing or push_by_digest(engine, image_id, repo, config, lambda line: None).digest
            if existing is None:
                name_published(store, tag, target, this_image)
            engine.tag(image_id, repo.familiar, tag)
            outcome: dict[str, Any] = {"digest": target, "pushed": existing is None}
        except ImagectlError as exc:
            outcome = {"error": str(exc)}
        except Exception:
            outcome = {"error": traceback.format_exc()}
        if index == 0:
            pushed.set()
        results.put((n, index, outcome))


def _link_of(registry, repo: str, digest: str) -> Path:
    """The file in the registry's storage that links blob ``digest`` into ``repo``."""
    return (registry.root / "data/docker/registry/v2/repositories" / repo / "_layers/sha256"
            / digest.removeprefix("sha256:") / "link")


def test_a_tag_put_while_another_push_links_its_blobs_is_put_again(registry):
    """What the identical-builds race left in CI: build 0's tag PUT answered 400 (``DIGEST_INVALID``,
    ``MANIFEST_BLOB_UNKNOWN``) though every blob was there.  Distribution 2.x rewrites a repository's link file in
    place (truncate, then write) each time a push of the blob ends, so a manifest PUT that reads the link while
    build 1 pushes the same blob finds it empty.  Here the proxy empties the config's link (what that rewrite does
    first) as the tag PUT goes by, and writes it back a moment later, as the rewrite does."""
    client = RegistryClient(registry.host, insecure=True)
    repo = f"relinked/{PROFILE}"
    image = make_sample_image({"layer.txt": b"linked again\n"}, labels=LABELS)
    digest = push_sample_image(client, repo, tag_of(1), image)
    config = client.get_manifest(repo, digest).config()
    assert config is not None
    link = _link_of(registry, repo, config.digest)
    held = link.read_bytes()
    rewrites: list[str] = []

    def rewrite_in_place(path: str) -> None:
        link.write_bytes(b"")
        threading.Timer(0.05, link.write_bytes, args=(held,)).start()
        rewrites.append(path)

    proxy = TamperingProxy(registry.url)
    proxy.once("PUT", f"/v2/{repo}/manifests/{tag_of(2)}", rewrite_in_place)
    try:
        _store(proxy.host, repo).point(tag_of(2), digest)
    finally:
        proxy.stop()
    assert rewrites == [f"/v2/{repo}/manifests/{tag_of(2)}"]  # the fault was met
    assert [p for m, p in proxy.seen if m == "PUT"].count(f"/v2/{repo}/manifests/{tag_of(2)}") >= 2
    assert client.head_manifest(repo, tag_of(2)) == digest


def test_a_manifest_put_refused_for_a_blob_really_gone_names_it(registry):
    """The other side of the rule above: a blob that stays missing is named in one line, after two looks."""
    client = RegistryClient(registry.host, insecure=True)
    repo = f"unlinked/{PROFILE}"
    digest = push_sample_image(client, repo, tag_of(1), make_sample_image({"layer.txt": b"gone\n"}, labels=LABELS))
    manifest = client.get_manifest(repo, digest)
    layer = manifest.layers()[0].digest
    _link_of(registry, repo, layer).unlink()
    with pytest.raises(NotFoundError) as raised:
        client.put_manifest(repo, tag_of(2), manifest)
    message = str(raised.value)
    assert f"blob {layer} is not in {repo}" in message and "MANIFEST_BLOB_UNKNOWN" in message, message
    assert "\n" not in message and client.head_manifest(repo, tag_of(2)) is None


def test_identical_builds_racing_both_succeed_and_report_one_image(registry, tmp_path):
    """Issue 36, item 2: two identical builds of one profile started together: one failed with "tag already names
    another image", though both built the same thing."""
    from tests.integration.support.skips import require_binary

    require_binary("buildah")
    image_id = small_buildah_image(tmp_path)
    client = RegistryClient(registry.host, insecure=True)
    context = multiprocessing.get_context("spawn")
    barrier, pushed, results = context.Barrier(3), context.Event(), context.Queue()
    processes = [context.Process(target=publish_as_a_build_does,
                                 args=(i, registry.host, image_id, barrier, pushed, results)) for i in (0, 1)]
    for process in processes:
        process.start()
    problems: list[str] = []
    try:
        for n in range(ROUNDS):
            pushed.clear()
            barrier.wait(120)
            outcomes = {}
            for _ in range(2):
                index, worker_index, outcome = results.get(timeout=120)
                assert index == n
                outcomes[worker_index] = outcome
            failed = [f"round {n}, build {i}: {o['error']}" for i, o in outcomes.items() if "error" in o]
            problems += failed
            if not failed:
                tag = f"identical/r{n}/{PROFILE}"
                named = {client.head_manifest(tag, t) for t in client.list_tags(tag)}
                reported = {o["digest"] for o in outcomes.values()}
                if len(reported) != 1 or named != reported:
                    problems.append(f"round {n}: reported {reported}, the registry names {named}")
    finally:
        barrier.abort()
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
        subprocess.run(["buildah", "rmi", "-f", image_id], capture_output=True, timeout=120, check=False)
    assert problems == [], "\n".join(problems)
