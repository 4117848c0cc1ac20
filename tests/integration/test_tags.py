"""history, rollback, promote and prune against real registries (open, htpasswd, bearer token) and the local
engine, checked with an independent client (skopeo), plus concurrent clients racing.

The repositories are seeded with small real images (imagectl labels, immutable tags dated in January 2024)
pushed through the registry client, each build moving ``latest`` and logging the move as ``build`` does.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from imagectl.errors import InputError, OperationError
from imagectl.reference import parse_reference
from imagectl.registry import Credentials, DigestMismatchError, RegistryClient
from imagectl.tags.history import read_listing
from imagectl.tags.moves import promote, rollback
from imagectl.tags.prune import execute_prune, plan_prune
from imagectl.tags.moves import guarded_move
from imagectl.registry.manifest import OCI_MANIFEST, Manifest
from imagectl.tags.store import (
    HISTORY_ANNOTATION,
    HISTORY_TAG,
    MOVE_PREFIX,
    Move,
    RegistryTagStore,
    record_body,
    record_tag,
)
from tests.integration.conftest import login
from tests.integration.support.proxy import TamperingProxy
from tests.integration.support.registry import make_sample_image, push_sample_image

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"
LABELS = {"imagectl.profile": PROFILE, "imagectl.framework": "torch", "imagectl.framework.version": "2.3.1",
          "imagectl.cuda": "12.1", "imagectl.cudnn": "8.9.2.26", "imagectl.nccl": "2.20.5", "imagectl.python": "3.11"}


def tag_of(day: int) -> str:
    return f"2.3.1-cu121-py3.11-202401{day:02d}T120000-{day:010d}"


def seed(client: RegistryClient, repo: str, days=(1, 2, 3, 4)) -> dict[int, str]:
    """Push one small image per day under its immutable tag and move ``latest`` onto each in turn."""
    store = RegistryTagStore(client, parse_reference(f"{client.host}/{repo}"))
    digests = {}
    for day in days:
        image = make_sample_image({"layer.txt": f"{repo} built on day {day}\n".encode()}, labels=LABELS)
        digests[day] = push_sample_image(client, repo, tag_of(day), image)
        guarded_move(store, "latest", digests[day], tag_of(day), store.digest("latest"), "build")
    return digests


def config(tmp_path: Path, host: str, namespace: str) -> None:
    # the local engine these tests look into is Docker (the default, auto, takes buildah where it is installed)
    (tmp_path / "imagectl.toml").write_text(f'[registry]\nurl = "{host}"\nnamespace = "{namespace}"\n'
                                            '[build]\nengine = "docker"\n')


def skopeo_digest(host: str, repo: str, tag: str, server=None) -> str | None:
    """The digest ``skopeo inspect`` sees for ``repo:tag`` (None when it has no such tag)."""
    argv = ["skopeo", "inspect", "--tls-verify=false", f"docker://{host}/{repo}:{tag}"]
    if server is not None and server.auth:
        argv.insert(2, f"--creds={server.username}:{server.password}")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    if proc.returncode != 0:
        if "manifest unknown" in proc.stderr.lower() or "not found" in proc.stderr.lower():
            return None
        raise AssertionError(f"skopeo inspect failed: {proc.stderr[-500:]}")
    return json.loads(proc.stdout)["Digest"]


class RequestLog:
    """Every HTTP request imagectl's registry client sends in this process while in the ``with``: (method, path)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._patch = pytest.MonkeyPatch()

    def __enter__(self) -> RequestLog:
        original = requests.Session.request

        def request(session, method, url, *args, **kwargs):
            self.seen.append((method, urlsplit(url).path))
            return original(session, method, url, *args, **kwargs)

        self._patch.setattr(requests.Session, "request", request)
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.undo()

    def count(self, method: str, path: str) -> int:
        return sum(1 for m, p in self.seen if m == method and p == path)

    def blob_requests(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.seen if "/blobs/" in p]


def test_history_rollback_promote_prune_against_the_registry(run_cli, tmp_path, registry):
    repo = f"hist/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    digests = seed(client, repo)
    config(tmp_path, registry.host, "hist")

    history = run_cli("history", PROFILE, "--json")
    assert history.code == 0, history.err
    rows = json.loads(history.out)
    assert [r["tag"] for r in rows] == [tag_of(d) for d in (4, 3, 2, 1)]
    assert [r["current"] for r in rows] == [True, False, False, False]
    assert rows[0]["digest"] == digests[4] and rows[0]["created"] and rows[0]["versions"]["nccl"] == "2.20.5"

    with RequestLog() as log:
        back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert f"-> {tag_of(3)}" in back.out
    assert skopeo_digest(registry.host, repo, "latest") == digests[3]
    # the move itself: one GET of the target's manifest and one PUT under latest; no blob touched at all
    assert log.count("GET", f"/v2/{repo}/manifests/{digests[3]}") == 1
    assert log.count("PUT", f"/v2/{repo}/manifests/latest") == 1
    assert log.blob_requests() == []

    promoted = run_cli("promote", PROFILE, "--channel", "stable", "--from", tag_of(1))
    assert promoted.code == 0, promoted.err
    assert skopeo_digest(registry.host, repo, "stable") == digests[1]
    assert run_cli("rollback", PROFILE, "--to", digests[3][:19]).out.endswith("nothing to do\n")
    refused = run_cli("rollback", PROFILE, "--to", "stable")
    assert refused.code == 2 and tag_of(4) in refused.err

    dry = run_cli("prune", PROFILE, "--keep", "1", "--dry-run")
    assert dry.code == 0 and "delete (dry run)" in dry.out and tag_of(2) in dry.out
    assert tag_of(2) in client.list_tags(repo)
    pruned = run_cli("prune", PROFILE, "--keep", "1")
    assert pruned.code == 0, pruned.err
    remaining = [tag_of(4), tag_of(3), tag_of(1), "latest", "stable"]
    listed = client.list_tags(repo)
    assert sorted(t for t in listed if not t.startswith("imagectl-")) == sorted(remaining)
    records = [t for t in listed if t.startswith(MOVE_PREFIX)]
    assert len(records) == 6 and HISTORY_TAG not in listed  # 4 builds, a rollback, a promotion; each its own
    assert skopeo_digest(registry.host, repo, tag_of(2)) is None
    assert skopeo_digest(registry.host, repo, "latest") == digests[3]

    moves = json.loads(run_cli("history", PROFILE, "--moves", "--json").out)
    assert [(m["tag"], m["action"], m["to_tag"]) for m in moves[:2]] == [
        ("stable", "promote", tag_of(1)), ("latest", "rollback", tag_of(3))
    ]
    assert moves[1]["from_tag"] == tag_of(4) and "@" in moves[1]["by"]


def test_a_second_machine_sees_the_same_history_and_can_roll_back(run_cli, tmp_path, registry, monkeypatch):
    repo = f"machines/{PROFILE}"
    digests = seed(RegistryClient(registry.host, insecure=True), repo)
    config(tmp_path, registry.host, "machines")
    assert run_cli("rollback", PROFILE, "--to", tag_of(2)).code == 0
    first = json.loads(run_cli("history", PROFILE, "--json").out)

    other = tmp_path / "other-machine"
    other.mkdir()
    config(other, registry.host, "machines")
    monkeypatch.chdir(other)
    monkeypatch.setenv("HOME", str(other))
    monkeypatch.setenv("XDG_STATE_HOME", str(other / "state"))
    assert json.loads(run_cli("history", PROFILE, "--json").out) == first
    again = run_cli("rollback", PROFILE)  # the log says latest was on day 4 before the rollback
    assert again.code == 0 and skopeo_digest(registry.host, repo, "latest") == digests[4]


def test_registry_mode_does_not_load_the_docker_sdk(tmp_path, registry):
    seed(RegistryClient(registry.host, insecure=True), f"nodocker/{PROFILE}", days=(1, 2))
    config(tmp_path, registry.host, "nodocker")
    code = ("import sys; from imagectl.cli import main; "
            f"codes = [main(['history', '{PROFILE}']), main(['rollback', '{PROFILE}']),"
            f" main(['promote', '{PROFILE}', '--channel', 'stable']), main(['prune', '{PROFILE}', '--keep', '5'])]; "
            "print(codes, 'docker' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert proc.stdout.strip().splitlines()[-1] == "[0, 0, 0, 0] False", proc.stderr


@pytest.mark.parametrize("kind", ["htpasswd", "token"])
def test_tags_with_authentication(kind, run_cli, tmp_path, auth_registry, token_registry, docker_config):
    server = auth_registry if kind == "htpasswd" else token_registry
    repo = f"auth/{PROFILE}"
    client = RegistryClient(server.host, insecure=True, credentials=Credentials(server.username, server.password))
    digests = seed(client, repo, days=(1, 2, 3))
    config(tmp_path, server.host, "auth")

    denied = run_cli("rollback", PROFILE)
    assert denied.code == 1 and "docker login" in denied.err and server.password not in denied.err + denied.out
    login(docker_config, server)
    back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert skopeo_digest(server.host, repo, "latest", server) == digests[2]
    assert run_cli("promote", PROFILE, "--channel", "canary").code == 0
    assert skopeo_digest(server.host, repo, "canary", server) == digests[2]
    pruned = run_cli("prune", PROFILE, "--keep", "1", "--min-age-days", "0")
    assert pruned.code == 0, pruned.err
    assert skopeo_digest(server.host, repo, tag_of(1), server) is None
    rows = json.loads(run_cli("history", PROFILE, "--json").out)
    assert [(r["tag"], r["current"]) for r in rows] == [(tag_of(3), False), (tag_of(2), True)]
    assert server.password not in json.dumps(rows)


# --------------------------------------------------------------------------------------------- the move log


def seed_unlogged(client: RegistryClient, repo: str, days=(1, 2, 3)) -> dict[int, str]:
    """Images under their immutable tags and ``latest`` on the newest, with no move log at all."""
    digests = {}
    for day in days:
        image = make_sample_image({"layer.txt": f"{repo} built on day {day}\n".encode()}, labels=LABELS)
        digests[day] = push_sample_image(client, repo, tag_of(day), image)
    store = RegistryTagStore(client, parse_reference(f"{client.host}/{repo}"))
    store.point("latest", digests[max(days)])
    return digests


def put_artifact(client: RegistryClient, repo: str, tag: str, annotations: dict[str, str]) -> str:
    """A small OCI artifact (empty config, no layers) with ``annotations`` under ``tag``, as another tool might."""
    client.upload_blob(repo, b"{}")
    body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.example+json",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
                       "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
            "layers": [], "annotations": annotations}
    return client.put_manifest(repo, tag, Manifest.from_bytes(json.dumps(body).encode(), OCI_MANIFEST))


def one_line_exit_2(result) -> bool:
    return result.code == 2 and len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err


def test_reserved_names_are_refused_as_channels_and_sources(run_cli, tmp_path, registry):
    """Before: ``promote --channel imagectl-history`` replaced the move log with a pointer to an image."""
    repo = f"reserved/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    seed(client, repo, days=(1, 2))
    legacy = put_artifact(client, repo, HISTORY_TAG, {HISTORY_ANNOTATION: "[]"})
    config(tmp_path, registry.host, "reserved")
    before = {t: client.head_manifest(repo, t) for t in client.list_tags(repo)}
    record = next((t for t in before if t.startswith(MOVE_PREFIX)), f"{MOVE_PREFIX}20240101T000000000000Z-0-latest")
    for args in (("--channel", HISTORY_TAG), ("--channel", record), ("--channel", "imagectl-stable"),
                 ("--channel", tag_of(1)), ("--channel", "stable", "--from", HISTORY_TAG),
                 ("--channel", "stable", "--from", record)):
        refused = run_cli("promote", PROFILE, *args)
        assert one_line_exit_2(refused), (args, refused.code, refused.err)
    refused = run_cli("rollback", PROFILE, "--to", record)
    assert one_line_exit_2(refused) and "imagectl's own records" in refused.err
    assert {t: client.head_manifest(repo, t) for t in client.list_tags(repo)} == before  # nothing written
    assert before[HISTORY_TAG] == legacy
    assert run_cli("promote", PROFILE, "--channel", "stable", "--from", "latest").code == 0


def test_a_rollback_killed_between_its_tag_put_and_its_log_record_is_undone_by_the_next(run_cli, tmp_path,
                                                                                        registry):
    """Before: the next rollback said "no earlier immutable image is left" (latest was on the oldest image)."""
    repo = f"killed/{PROFILE}"
    digests = seed(RegistryClient(registry.host, insecure=True), repo, days=(1, 2, 3))
    config(tmp_path, registry.host, "killed")
    code = ("import os, sys; from imagectl.tags.store import RegistryTagStore; "
            "RegistryTagStore.record = lambda self, move: os._exit(137); "  # kill -9 right after the tag PUT
            f"from imagectl.cli import main; sys.exit(main(['rollback', '{PROFILE}', '--to', '{tag_of(1)}']))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert proc.returncode == 137, proc.stderr
    assert skopeo_digest(registry.host, repo, "latest") == digests[1]  # moved, never logged
    back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert f"-> {tag_of(3)}" in back.out and skopeo_digest(registry.host, repo, "latest") == digests[3]
    moves = json.loads(run_cli("history", PROFILE, "--moves", "--json").out)
    assert (moves[0]["action"], moves[0]["from"], moves[0]["to_tag"]) == ("rollback", digests[1], tag_of(3))


def test_a_corrupt_log_is_reported_and_rollback_works_from_the_immutable_tags(run_cli, tmp_path, registry):
    """Before: an ``imagectl-history`` annotation another tool wrote made history, rollback and promote fail."""
    repo = f"corrupt/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    digests = seed_unlogged(client, repo)
    put_artifact(client, repo, HISTORY_TAG, {HISTORY_ANNOTATION: "{not json"})
    put_artifact(client, repo, f"{MOVE_PREFIX}20990101T000000000000Z-0123456789ab-latest",
                 {"org.imagectl.move": '{"tag": "latest", "to": 7}'})
    config(tmp_path, registry.host, "corrupt")

    history = run_cli("history", PROFILE)
    assert history.code == 0, history.err
    warnings = history.err.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("warning: ") and "ignored" in w for w in warnings)
    assert tag_of(3) in history.out and "no moves logged" in history.out
    assert run_cli("history", PROFILE, "--json").code == 0
    back = run_cli("rollback", PROFILE)  # no readable log: the immutable tags alone decide
    assert back.code == 0, back.err
    assert f"-> {tag_of(2)}" in back.out and "unreadable" in back.out
    assert skopeo_digest(registry.host, repo, "latest") == digests[2]
    assert run_cli("promote", PROFILE, "--channel", "stable").code == 0
    assert skopeo_digest(registry.host, repo, "stable") == digests[2]
    again = run_cli("rollback", PROFILE)  # the readable record the rollback wrote undoes it
    assert again.code == 0 and skopeo_digest(registry.host, repo, "latest") == digests[3]


def test_an_old_single_manifest_log_is_still_read(run_cli, tmp_path, registry):
    repo = f"legacy/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    digests = seed_unlogged(client, repo)
    store = RegistryTagStore(client, parse_reference(f"{registry.host}/{repo}"))
    store.point("latest", digests[1])
    old = [{"tag": "latest", "to": digests[d], "previous": digests.get(d - 1), "action": "build", "by": "old@host",
            "when": f"2024-01-0{d}T12:00:00+00:00", "to_tag": tag_of(d)} for d in (1, 2, 3)]
    old.append({"tag": "latest", "to": digests[1], "previous": digests[3], "action": "rollback", "by": "old@host",
                "when": "2024-01-04T12:00:00+00:00", "to_tag": tag_of(1)})
    legacy = put_artifact(client, repo, HISTORY_TAG, {HISTORY_ANNOTATION: json.dumps(old)})
    config(tmp_path, registry.host, "legacy")

    back = run_cli("rollback", PROFILE)  # the old log's last move went 3 -> 1: undo it
    assert back.code == 0, back.err
    assert f"-> {tag_of(3)}" in back.out and skopeo_digest(registry.host, repo, "latest") == digests[3]
    moves = json.loads(run_cli("history", PROFILE, "--moves", "--json").out)
    assert [(m["action"], m["by"] == "old@host") for m in moves] == [
        ("rollback", False), ("rollback", True), ("build", True), ("build", True), ("build", True)
    ]
    assert moves[0]["from_tag"] == tag_of(1) and client.head_manifest(repo, HISTORY_TAG) == legacy  # never rewritten


# --------------------------------------------------------------------------------------------- issue 24, item 4


def put_skewed_move(client: RegistryClient, repo: str, move: Move, ahead: timedelta) -> str:
    """The record a machine whose clock runs ``ahead`` writes for ``move`` (named by its clock, as every imagectl
    names records), after moving the tag."""
    store = RegistryTagStore(client, parse_reference(f"{client.host}/{repo}"))
    store.point(move.tag, move.to)
    name = record_tag(move.tag, datetime.now(timezone.utc) + ahead, "0123456789ab")
    client.put_manifest(repo, name, Manifest.from_bytes(record_body(move, name), OCI_MANIFEST))
    return name


def test_a_record_from_a_clock_a_year_ahead_does_not_stay_last(run_cli, tmp_path, registry):
    """Before: after rollbacks I1 -> I2 -> I3 following such a record, a plain rollback went to I1, not I2."""
    repo = f"skew/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    digests = seed(client, repo, days=(1, 2, 3))
    skewed = Move("latest", digests[1], digests[3], "rollback", "2025-01-01T00:00:00+00:00", "ahead@host",
                  tag_of(1), tag_of(3))
    put_skewed_move(client, repo, skewed, timedelta(days=365))
    config(tmp_path, registry.host, "skew")
    for day in (2, 3):
        assert run_cli("rollback", PROFILE, "--to", tag_of(day)).code == 0
    back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert f"-> {tag_of(2)}" in back.out and skopeo_digest(registry.host, repo, "latest") == digests[2]
    moves = json.loads(run_cli("history", PROFILE, "--moves", "--json").out)
    assert [m["to_tag"] for m in moves[:4]] == [tag_of(2), tag_of(3), tag_of(2), tag_of(1)]  # the order they happened


def test_promote_refuses_a_channel_that_points_at_no_image(run_cli, tmp_path, registry):
    """Before: a channel pointing at a move record made ``canary`` a non-image too."""
    repo = f"nonimage/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    seed(client, repo, days=(1, 2))
    record = next(t for t in client.list_tags(repo) if t.startswith(MOVE_PREFIX))
    RegistryTagStore(client, parse_reference(f"{registry.host}/{repo}")).point("canary", tag_of(1))
    client.put_manifest(repo, "odd", client.get_manifest(repo, record))  # a channel on a move record
    config(tmp_path, registry.host, "nonimage")
    refused = run_cli("promote", PROFILE, "--channel", "canary", "--from", "odd")
    assert refused.code == 1 and len(refused.err.strip().splitlines()) == 1, refused.err
    assert "is not an image (application/vnd.imagectl.move.v1+json); refusing to point canary at it" in refused.err
    assert skopeo_digest(registry.host, repo, "canary") == client.head_manifest(repo, tag_of(1))


def test_digests_a_proxy_misreports_are_refused(run_cli, tmp_path, registry):
    """Before: through a proxy answering one Docker-Content-Digest for every manifest, history showed every tag as
    one image and promote moved stable to the oldest image."""
    repo = f"lying/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    digests = seed(client, repo, days=(1, 2, 3))
    RegistryTagStore(client, parse_reference(f"{registry.host}/{repo}")).point("stable", digests[2])
    proxy = TamperingProxy(registry.url)
    proxy.rewrite(f"/v2/{repo}/manifests/", "Docker-Content-Digest", lambda value: digests[1])
    try:
        config(tmp_path, proxy.host, "lying")
        for argv in (("history", PROFILE), ("promote", PROFILE, "--channel", "stable", "--from", "latest")):
            refused = run_cli(*argv)
            assert refused.code == 1 and len(refused.err.strip().splitlines()) == 1, (argv, refused.err)
            assert f"Docker-Content-Digest {digests[1]}, but its bytes have digest sha256:" in refused.err
        with pytest.raises(DigestMismatchError):
            RegistryClient(proxy.host, insecure=True).get_manifest(repo, tag_of(3))
    finally:
        proxy.stop()
    assert skopeo_digest(registry.host, repo, "stable") == digests[2]


# --------------------------------------------------------------------------------------------- issue 24, item 6


def test_history_of_many_tags_reads_only_the_tags_it_shows(run_cli, tmp_path, registry):
    """Before: one digest read per tag (100,000 tags: 100,002 requests, 3 min 34 s)."""
    repo = f"many/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    digests = seed(client, repo, days=(1, 2))
    manifest = client.get_manifest(repo, digests[1])
    stamps = [datetime(2023, 1, 1, tzinfo=timezone.utc) + timedelta(hours=n) for n in range(300)]
    for n, stamp in enumerate(stamps):
        client.put_manifest(repo, f"2.3.1-cu121-py3.11-{stamp:%Y%m%dT%H%M%S}-{n:010d}", manifest)
    config(tmp_path, registry.host, "many")
    with RequestLog() as log:
        shown = run_cli("history", PROFILE, "--json")
    assert shown.code == 0, shown.err
    rows = json.loads(shown.out)
    assert len(rows) == 20 and rows[0]["tag"] == tag_of(2) and rows[0]["current"]
    assert "282 more tag(s) not shown (--limit N, or --limit 0 for all)" in shown.err  # 302 and latest, 21 shown
    assert len(log.seen) <= 40, Counter(log.seen)  # 2 listings, 21 digests, 2 images, 2 records
    everything = run_cli("history", PROFILE, "--limit", "0", "--json")
    assert everything.code == 0 and len(json.loads(everything.out)) == 302 and "note" not in everything.err
    assert run_cli("history", PROFILE, "--limit", "-1").code == 2


def test_rollback_keeps_this_machines_local_latest_in_step(run_cli, tmp_path, registry, docker_client):
    """Before: after a rollback the local ``REPO:latest`` (what ``docker run`` starts) stayed on the old image."""
    import docker.errors

    repo = f"localsync/{PROFILE}"
    ref = f"{registry.host}/{repo}"
    digests = seed(RegistryClient(registry.host, insecure=True), repo, days=(1, 2, 3))
    config(tmp_path, registry.host, "localsync")
    pulled: list[str] = []
    try:
        day3 = docker_client.images.pull(ref, tag="latest").id
        day2 = docker_client.images.pull(ref, tag=tag_of(2)).id
        pulled += [day3, day2]
        back = run_cli("rollback", PROFILE)
        assert back.code == 0 and "re-tagged" in back.out, back.out + back.err
        assert docker_client.images.get(f"{ref}:latest").id == day2
        again = run_cli("rollback", PROFILE)  # undo: the engine still has day 3's image, untagged
        assert again.code == 0 and docker_client.images.get(f"{ref}:latest").id == day3
        gone = run_cli("rollback", PROFILE, "--to", tag_of(1))  # day 1 was never pulled here
        assert gone.code == 0 and "removed" in gone.out, gone.out + gone.err
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(f"{ref}:latest")
        assert skopeo_digest(registry.host, repo, "latest") == digests[1]
    finally:
        for image in docker_client.images.list(name=ref):
            for tag in image.tags:
                docker_client.images.remove(tag, noprune=True)
        for image_id in pulled:
            try:
                docker_client.images.remove(image_id, force=True)
            except docker.errors.APIError:
                pass


# --------------------------------------------------------------------------------------------- races


def run_together(jobs: list[Callable[[], object]]) -> list[object]:
    """Start ``jobs`` in threads at the same moment; their results or the exceptions they raised."""
    barrier = threading.Barrier(len(jobs))
    results: list[object] = [None] * len(jobs)

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = jobs[i]()
        except Exception as exc:  # collected and judged by the test
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def assert_every_tag_on_a_whole_image(client: RegistryClient, repo: str) -> None:
    """Every tag resolves to a manifest whose blobs are all there; latest exists."""
    tags = client.list_tags(repo)
    assert "latest" in tags
    for tag in tags:
        digest = client.head_manifest(repo, tag)
        assert digest is not None, f"{tag} resolves to nothing"
        manifest = client.get_manifest(repo, digest)
        for blob in manifest.blobs():
            assert client.blob_exists(repo, blob.digest), f"{tag}: blob {blob.digest} is gone"


def test_racing_rollbacks_promotions_and_prunes_keep_every_pointer_valid(registry):
    repo = f"race/{PROFILE}"
    seeded = seed(RegistryClient(registry.host, insecure=True), repo, days=range(1, 11))
    checker = RegistryClient(registry.host, insecure=True)

    def store() -> RegistryTagStore:
        return RegistryTagStore(RegistryClient(registry.host, insecure=True),
                                parse_reference(f"{registry.host}/{repo}"))

    def prune(keep: int) -> object:
        s = store()
        listing = read_listing(s)
        plan = plan_prune(list(listing.immutable), set(listing.pointers.values()), keep, timedelta(0),
                          datetime.now(timezone.utc))
        return execute_prune(s, plan)

    results = run_together([lambda: rollback(store(), to=tag_of(3)), lambda: rollback(store(), to=tag_of(5))])
    assert not [r for r in results if isinstance(r, Exception)], results
    assert checker.head_manifest(repo, "latest") in {seeded[3], seeded[5]}
    assert_every_tag_on_a_whole_image(checker, repo)

    for day in (8, 6, 4, 2):
        results = run_together([lambda: prune(1), lambda d=day: rollback(store(), to=tag_of(d)),
                                lambda d=day: promote(store(), "stable", tag_of(d))])
        for r in results:  # a move may lose to the prune (its target deleted first): then it must say so
            lost = ((isinstance(r, OperationError) and "no longer exists" in str(r))
                    or (isinstance(r, InputError) and "neither" in str(r)))
            assert not isinstance(r, Exception) or lost, r
        assert_every_tag_on_a_whole_image(checker, repo)
    assert len(checker.list_tags(repo)) >= 3  # newest, latest, history at least


# --------------------------------------------------------------------------------------------- local engine


def test_tags_in_the_local_engine(run_cli, tmp_path, docker_client, monkeypatch):
    namespace = f"localtags{os.getpid()}"
    repo = f"localhost/{namespace}/{PROFILE}"  # without a registry, images are named localhost/NAMESPACE/PROFILE
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "imagectl.toml").write_text(f'[registry]\nnamespace = "{namespace}"\n[build]\nengine = "docker"\n')
    ids = {}
    try:
        for day in (1, 2, 3):
            dockerfile = f"FROM scratch\nLABEL imagectl.framework=torch imagectl.framework.version=2.3.1 day={day}\n"
            image, _ = docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), rm=True)
            image.tag(repo, tag_of(day))
            ids[day] = image.id
        docker_client.images.get(ids[3]).tag(repo, "latest")

        rows = json.loads(run_cli("history", PROFILE, "--json").out)
        assert [(r["tag"], r["digest"], r["current"]) for r in rows] == [
            (tag_of(3), ids[3], True), (tag_of(2), ids[2], False), (tag_of(1), ids[1], False)
        ]
        back = run_cli("rollback", PROFILE)
        assert back.code == 0, back.err
        assert docker_client.images.get(f"{repo}:latest").id == ids[2]
        assert run_cli("promote", PROFILE, "--channel", "stable", "--from", tag_of(1)).code == 0
        assert docker_client.images.get(f"{repo}:stable").id == ids[1]
        pruned = run_cli("prune", PROFILE, "--keep", "1", "--min-age-days", "0")
        assert pruned.code == 0, pruned.err
        assert "deleted 0" in pruned.out  # day 3 newest, day 2 latest, day 1 stable
        assert run_cli("promote", PROFILE, "--channel", "stable", "--from", "latest").code == 0
        assert run_cli("prune", PROFILE, "--keep", "1", "--min-age-days", "0").code == 0
        local_tags = docker_client.images.get(ids[2]).tags + docker_client.images.get(ids[3]).tags
        tags = sorted(t.split(":", 1)[1] for t in local_tags)
        assert tags == sorted([tag_of(2), tag_of(3), "latest", "stable"])
        moves = json.loads(run_cli("history", PROFILE, "--moves", "--json").out)
        assert [m["action"] for m in moves] == ["promote", "promote", "rollback"]
    finally:
        for image in docker_client.images.list(name=repo):
            for tag in image.tags:
                docker_client.images.remove(tag, noprune=True)
