"""The tag manager on image indexes (multi-platform images, issue 20 item 4), against a real registry (CNCF
distribution) and checked with an independent client (skopeo): rollback and promote move every platform in one
manifest PUT, history lists the platforms, prune keeps every child of a kept index and deletes the children of
a deleted one that nothing else names, import copies every child, and ``test`` runs the arm64 child under QEMU.

The indexes are stand-ins pushed through the registry client: two small images (one ``linux/amd64`` config,
one ``linux/arm64``) and an OCI image index naming both, as a ``build --platform linux/amd64,linux/arm64``
pushes them.  The runnable ones for ``test`` hold a few real binaries of each architecture (dash, uname, libc)
unpacked by ``mmdebstrap --variant=extract`` (about 10 s, cached).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from imagectl.cli.workspace import Workspace
from imagectl.config import Config
from imagectl.engine.docker import DockerEngine
from imagectl.images.tester import check_image
from imagectl.reference import parse_reference
from imagectl.registry import OCI_INDEX, Manifest, RegistryClient
from imagectl.tags.moves import guarded_move
from imagectl.tags.prune import execute_prune, plan_for_store
from imagectl.tags.store import RegistryTagStore
from tests.integration.support.engine import _file_lock, _run_mmdebstrap, cache_dir, debian_mirror_lines
from tests.integration.support.registry import make_sample_image, push_sample_image
from tests.integration.test_tags import LABELS, PROFILE, RequestLog, config, tag_of

pytestmark = pytest.mark.integration

AMD, ARM = "linux/amd64", "linux/arm64"


def push_index(client: RegistryClient, repo: str, tag: str | None, children: dict[str, Manifest]) -> str:
    """Put an OCI image index naming ``children`` (platform -> an image manifest already in ``repo``) under
    ``tag`` (by its digest when None); returns its digest."""
    entries = []
    for platform, child in children.items():
        os_name, arch = platform.split("/")
        entries.append({"mediaType": child.media_type, "digest": child.digest, "size": len(child.raw),
                        "platform": {"os": os_name, "architecture": arch}})
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}, indent=2).encode()
    index = Manifest.from_bytes(body, OCI_INDEX)
    return client.put_manifest(repo, tag or index.digest, index)


def push_child(client: RegistryClient, repo: str, text: str, arch: str, labels: dict[str, str] = LABELS) -> Manifest:
    """A small image for ``linux/ARCH`` put into ``repo`` by its digest only (untagged, as an index's child)."""
    image = make_sample_image({"layer.txt": text.encode()}, labels=labels, architecture=arch)
    digest = push_sample_image(client, repo, Manifest.from_bytes(image.manifest, image.media_type).digest, image)
    return client.get_manifest(repo, digest)


def seed_indexes(client: RegistryClient, repo: str, days=(1, 2, 3)) -> dict[int, dict[str, str]]:
    """One two-platform index per day under its immutable tag, ``latest`` moved onto each as a build does;
    day -> {"index": digest, AMD: child digest, ARM: child digest}."""
    store = RegistryTagStore(client, parse_reference(f"{client.host}/{repo}"))
    found = {}
    for day in days:
        children = {p: push_child(client, repo, f"{repo} day {day} {p}\n", p.split("/")[1]) for p in (AMD, ARM)}
        index = push_index(client, repo, tag_of(day), children)
        found[day] = {"index": index, **{p: m.digest for p, m in children.items()}}
        guarded_move(store, "latest", index, tag_of(day), store.digest("latest"), "build")
    return found


def skopeo(host: str, repo: str, tag: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["skopeo", "inspect", "--tls-verify=false", *args, f"docker://{host}/{repo}:{tag}"],
                          capture_output=True, text=True, timeout=60, check=False)


def resolved(host: str, repo: str, tag: str, arch: str | None = None) -> str | list[str]:
    """What ``skopeo inspect`` resolves ``repo:tag`` to: the index digest (``--raw``: the digest of its bytes), or
    with ``arch`` the layers of that platform's image (its ``Digest`` stays the index's), checked to be ``arch``'s."""
    if arch is None:
        raw = skopeo(host, repo, tag, "--raw")
        assert raw.returncode == 0, raw.stderr
        return "sha256:" + hashlib.sha256(raw.stdout.encode()).hexdigest()
    proc = skopeo(host, repo, tag, "--override-os", "linux", "--override-arch", arch)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["Architecture"] == arch
    return list(data["Layers"])


def layers(client: RegistryClient, repo: str, digest: str) -> list[str]:
    """The layer digests of image manifest ``digest``: what :func:`resolved` compares a platform's image by."""
    return [layer.digest for layer in client.get_manifest(repo, digest).layers()]


def exists(client: RegistryClient, repo: str, digest: str) -> bool:
    return client.head_manifest(repo, digest) is not None


def test_rollback_and_promote_move_every_platform_in_one_put(run_cli, tmp_path, registry):
    repo = f"idxmove/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    days = seed_indexes(client, repo)
    config(tmp_path, registry.host, "idxmove")
    assert resolved(registry.host, repo, "latest") == days[3]["index"]

    with RequestLog() as log:
        back = run_cli("rollback", PROFILE)
    assert back.code == 0, back.err
    assert f"-> {tag_of(2)}" in back.out
    assert resolved(registry.host, repo, "latest") == days[2]["index"]
    assert resolved(registry.host, repo, "latest", "arm64") == layers(client, repo, days[2][ARM])
    assert resolved(registry.host, repo, "latest", "amd64") == layers(client, repo, days[2][AMD])
    # one GET of the index and one PUT of it under latest: no child manifest, no blob read or written
    assert log.count("GET", f"/v2/{repo}/manifests/{days[2]['index']}") == 1
    assert log.count("PUT", f"/v2/{repo}/manifests/latest") == 1
    assert not [p for _, p in log.seen if any(days[2][k] in p for k in (AMD, ARM))]
    assert log.blob_requests() == []

    promoted = run_cli("promote", PROFILE, "--channel", "stable", "--from", tag_of(1))
    assert promoted.code == 0, promoted.err
    assert resolved(registry.host, repo, "stable") == days[1]["index"]
    assert resolved(registry.host, repo, "stable", "arm64") == layers(client, repo, days[1][ARM])
    again = run_cli("rollback", PROFILE)  # undoes the first, like cd -
    assert again.code == 0 and resolved(registry.host, repo, "latest", "arm64") == layers(client, repo, days[3][ARM])


def test_history_lists_each_entry_with_its_platforms(run_cli, tmp_path, registry):
    repo = f"idxhist/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    days = seed_indexes(client, repo, days=(1, 2))
    # day 3: its arm64 child records another cuDNN than its amd64 one
    amd = push_child(client, repo, "day 3 amd64\n", "amd64")
    arm = push_child(client, repo, "day 3 arm64\n", "arm64", {**LABELS, "imagectl.cudnn": "9.1.0.70"})
    push_index(client, repo, tag_of(3), {ARM: arm, AMD: amd})
    config(tmp_path, registry.host, "idxhist")

    shown = run_cli("history", PROFILE, "--json")
    assert shown.code == 0, shown.err
    rows = {r["tag"]: r for r in json.loads(shown.out)}
    assert rows[tag_of(1)]["platforms"] == [AMD, ARM] and rows[tag_of(2)]["current"]
    assert rows[tag_of(2)]["digest"] == days[2]["index"] and rows[tag_of(2)]["versions"]["cudnn"] == "8.9.2.26"
    assert rows[tag_of(2)]["created"].startswith("2024-05-01") and rows[tag_of(2)]["platform_differences"] == []
    assert rows[tag_of(3)]["platforms"] == [ARM, AMD] and rows[tag_of(3)]["versions"]["cudnn"] == "8.9.2.26"
    assert rows[tag_of(3)]["platform_differences"] == [f"{ARM}: cudnn 9.1.0.70 ({AMD}: 8.9.2.26)"]
    text = run_cli("history", PROFILE).out
    assert "PLATFORMS" in text.splitlines()[1] and f"{AMD},{ARM}" in text
    assert f"note: {tag_of(3)}: {ARM}: cudnn 9.1.0.70 ({AMD}: 8.9.2.26)" in text


def test_prune_keeps_the_children_of_kept_indexes_and_deletes_the_orphans(run_cli, tmp_path, registry):
    repo = f"idxprune/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    days = seed_indexes(client, repo, days=(2, 3, 4))
    # day 1: an older index whose amd64 child is day 4's (a rebuild that gave the same amd64 image); and an older
    # immutable tag on day 3's arm64 child, as a build that also tags each platform's image would leave
    shared = client.get_manifest(repo, days[4][AMD])
    own = push_child(client, repo, "day 1 arm64\n", "arm64")
    day1 = push_index(client, repo, tag_of(1), {AMD: shared, ARM: own})
    child_tag = tag_of(1).replace("T120000", "T110000")  # an older tag on a child of a kept index
    client.put_manifest(repo, child_tag, client.get_manifest(repo, days[3][ARM]))
    config(tmp_path, registry.host, "idxprune")

    dry = run_cli("prune", PROFILE, "--keep", "2", "--min-age-days", "0", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    plan = json.loads(dry.out)
    by_tag = {r["tag"]: r for r in plan if r["tag"]}
    assert by_tag[tag_of(1)]["action"] == by_tag[tag_of(2)]["action"] == "delete (dry run)"
    assert by_tag[child_tag]["action"] == "keep" and tag_of(3) in by_tag[child_tag]["reason"]
    children = {r["digest"]: r for r in plan if r["tag"] is None}
    assert children[own.digest]["action"] == "delete (dry run)" and children[own.digest]["platform"] == ARM
    assert children[shared.digest]["action"] == "keep" and children[shared.digest]["index"] == tag_of(1)
    assert {days[2][AMD], days[2][ARM]} <= set(children)
    assert exists(client, repo, own.digest)  # a dry run deletes nothing

    pruned = run_cli("prune", PROFILE, "--keep", "2", "--min-age-days", "0", "--json")
    assert pruned.code == 0, pruned.err
    report = json.loads(pruned.out)
    assert sorted(report["deleted"]) == sorted([tag_of(1), tag_of(2)]) and report["failed"] == []
    assert sorted(report["deleted_children"]) == sorted([own.digest, days[2][AMD], days[2][ARM]])
    for digest in (own.digest, days[2][AMD], days[2][ARM], day1, days[2]["index"]):
        assert not exists(client, repo, digest), digest
    for day in (3, 4):  # the kept indexes are whole: skopeo resolves both platforms of each
        for arch, platform in (("amd64", AMD), ("arm64", ARM)):
            assert resolved(registry.host, repo, tag_of(day), arch) == layers(client, repo, days[day][platform])
    assert resolved(registry.host, repo, child_tag, "arm64") == layers(client, repo, days[3][ARM])


def test_import_of_an_index_copies_every_child(run_cli, tmp_path, registry):
    client = RegistryClient(registry.host, insecure=True)
    children = {p: push_child(client, "team/multi", f"team image {p}\n", p.split("/")[1]) for p in (AMD, ARM)}
    index = push_index(client, "team/multi", "1.0", children)
    config(tmp_path, registry.host, "idximport")
    repo = f"idximport/{PROFILE}"

    imported = run_cli("import", f"{registry.host}/team/multi:1.0", "--name", PROFILE, "--no-check", "--json")
    assert imported.code == 0, imported.err
    result = json.loads(imported.out)
    assert result["digest"] == result["source_digest"] == index and result["moved"]
    for platform, child in children.items():
        assert exists(client, repo, child.digest)
        arch = platform.split("/")[1]
        assert resolved(registry.host, repo, result["tag"], arch) == layers(client, repo, child.digest)
    assert resolved(registry.host, repo, "latest") == index
    rows = json.loads(run_cli("history", PROFILE, "--json").out)
    assert [(r["tag"], r["platforms"]) for r in rows] == [(result["tag"], [AMD, ARM])]


# --------------------------------------------------------------------------------------------- test, emulated


def tiny_rootfs(arch: str) -> Path:
    """A tar of dash, coreutils and libc for ``arch`` as Debian ships them (``mmdebstrap --variant=extract``:
    unpacked, nothing run, about 10 s), cached beside the stand-in rootfs tarballs."""
    mirrors = debian_mirror_lines("bookworm")
    key = hashlib.sha256(json.dumps([arch, mirrors, 1]).encode()).hexdigest()[:16]
    folder = cache_dir()
    tarball = folder / f"tiny-{arch}-{key}.tar"
    with _file_lock(folder / f".tiny-{key}.lock"):
        if not tarball.is_file():
            partial = folder / f"tiny-{arch}-{key}.partial-{os.getpid()}.tar"
            argv = ["mmdebstrap", "--variant=extract", f"--arch={arch}", "--format=tar",
                    "--include=dash,coreutils,libc6", "--dpkgopt=path-exclude=/usr/share/*", "bookworm",
                    str(partial), *mirrors]
            try:
                _run_mmdebstrap(argv, folder / f"tiny-{arch}-{key}.log", 600)
                os.replace(partial, tarball)
            finally:
                partial.unlink(missing_ok=True)
    return tarball


# The image's "python": a shell script run by the image's own dash.  It answers the labels' Python only when the
# kernel ran it as aarch64 (on an arm64 image) or x86_64 (amd64), so the python finding is ok only when the child
# of the requested platform really ran, natively or under QEMU.
_PYTHON = """#!/bin/sh
machine=$(uname -m)
if [ "$machine" = "{machine}" ]; then python=3.11.9; else python="0.0+ran-on-$machine"; fi
framework='{{"name": "torch", "version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2.26", "nccl": "2.20.5"}}'
echo '{{"python": "'"$python"'", "framework": '"$framework"'}}'
"""


def runnable_child(client: RegistryClient, repo: str, arch: str) -> Manifest:
    """An image of ``arch`` whose ``python /opt/imagectl/check.py`` really runs (dash, uname, libc of that
    architecture) and prints a check report; put into ``repo`` by digest."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}[arch]
    wanted = ("bin/dash", "bin/uname", f"lib/{machine}-linux-gnu/", "lib/ld-linux", "lib64/")
    raw = io.BytesIO()
    with tarfile.open(tiny_rootfs(arch)) as source, tarfile.open(fileobj=raw, mode="w") as layer:
        for member in source.getmembers():
            name = member.name.removeprefix("./")
            if any(name.startswith(w) for w in wanted) and (member.isfile() or member.issym() or member.isdir()):
                member.name = name
                layer.addfile(member, source.extractfile(member) if member.isfile() else None)
        for path, data, mode in (("usr/bin/python", _PYTHON.format(machine=machine).encode(), 0o755),
                                 ("opt/imagectl/check.py", b"# the stand-in python ignores it\n", 0o644)):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            layer.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("bin/sh")
        link.type, link.linkname = tarfile.SYMTYPE, "dash"
        layer.addfile(link)
    diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
    blob = gzip.compress(raw.getvalue(), mtime=0)
    cfg = json.dumps({"architecture": arch, "os": "linux", "created": "2024-05-01T12:00:00Z",
                      "config": {"Labels": LABELS, "Env": ["PATH=/usr/bin:/bin"]},
                      "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode()
    for data in (blob, cfg):
        client.upload_blob(repo, data)
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "size": len(cfg),
                                  "digest": "sha256:" + hashlib.sha256(cfg).hexdigest()},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "size": len(blob),
                                   "digest": "sha256:" + hashlib.sha256(blob).hexdigest()}]}).encode()
    manifest = Manifest.from_bytes(body)
    client.put_manifest(repo, manifest.digest, manifest)
    return manifest


def test_test_runs_the_host_child_natively_and_the_arm64_child_under_qemu(run_cli, tmp_path, registry, docker_client):
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").is_file():
        pytest.skip("binfmt_misc has no qemu-aarch64 handler here: the arm64 child cannot run (the test says so)")
    repo = f"idxtest/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    try:
        children = {f"linux/{a}": runnable_child(client, repo, a) for a in ("amd64", "arm64")}
    except RuntimeError as exc:
        pytest.fail(f"no stand-in rootfs: {exc}")
    index = push_index(client, repo, tag_of(1), children)
    RegistryTagStore(client, parse_reference(f"{registry.host}/{repo}")).point("latest", index)
    config(tmp_path, registry.host, "idxtest")
    pulled = [f"{registry.host}/{repo}@{c.digest}" for c in children.values()]
    try:
        native = run_cli("test", PROFILE, "--json")
        assert native.code == 0, native.err
        report = json.loads(native.out)
        assert report["image"] == pulled[0] and report["ok"]
        assert report["findings"][0]["actual"].startswith(f"{AMD} (native, ")
        assert next(f for f in report["findings"] if f["what"] == "python")["ok"]

        ws = Workspace(Config(registry_url=registry.host, namespace="idxtest"))
        lines: list[str] = []
        image, findings = check_image(PROFILE, ws.matrix, ws.config, DockerEngine(), lines.append, platform=ARM)
        assert image == pulled[1]
        assert findings[0].what == "platform" and findings[0].actual.startswith(f"{ARM} (emulated by qemu-aarch64, ")
        python = next(f for f in findings if f.what == "python")
        assert python.ok, python  # the arm64 child's dash ran and its uname said aarch64
        assert any("emulated by qemu-aarch64" in line and index[7:19] in line for line in lines)
    finally:  # the engines' copies: the CLI's (buildah where installed, else Docker) and Docker's
        for ref in pulled:
            try:
                docker_client.images.remove(ref, force=True)
            except Exception:  # noqa: BLE001 - cleanup: an image the test never pulled
                pass
            if shutil.which("buildah"):
                subprocess.run(["buildah", "rmi", "-f", ref], capture_output=True, timeout=60, check=False)


def test_import_of_an_index_checks_the_child_of_this_hosts_platform(run_cli, tmp_path, registry, docker_client):
    client = RegistryClient(registry.host, insecure=True)
    try:
        children = {f"linux/{a}": runnable_child(client, "team/runnable", a) for a in ("amd64", "arm64")}
    except RuntimeError as exc:
        pytest.fail(f"no stand-in rootfs: {exc}")
    index = push_index(client, "team/runnable", "1.0", children)
    config(tmp_path, registry.host, "idxcheck")
    host_child = f"{registry.host}/team/runnable@{children[AMD].digest}"
    try:
        imported = run_cli("import", f"{registry.host}/team/runnable:1.0", "--name", PROFILE, "--json")
        assert imported.code == 0, imported.err
        result = json.loads(imported.out)
        assert result["checked"] and result["digest"] == index and result["platforms"] == [AMD, ARM]
        assert any(f"the check ran on this host's platform's image ({children[AMD].digest[:19]})" in note
                   for note in result["notes"])
        assert next(f for f in result["findings"] if f["what"] == "python")["ok"]  # the amd64 dash ran it
        for child in children.values():
            assert exists(client, f"idxcheck/{PROFILE}", child.digest)
    finally:
        try:
            docker_client.images.remove(host_child, force=True)
        except Exception:  # noqa: BLE001 - cleanup: the engine of the check may be buildah
            pass
        if shutil.which("buildah"):
            subprocess.run(["buildah", "rmi", "-f", host_child], capture_output=True, timeout=60, check=False)


# --------------------------------------------------------------------------------------------- races


class RacedStore(RegistryTagStore):
    """The real registry store; right before its first tag delete, ``other`` (another writer, its own client)
    does what the test stages."""

    def __init__(self, client: RegistryClient, repo: str, other) -> None:
        super().__init__(client, parse_reference(f"{client.host}/{repo}"))
        self.other = other

    def delete(self, tag: str) -> None:
        other, self.other = self.other, None
        if other is not None:
            other()
        super().delete(tag)


def test_prune_keeps_a_child_a_concurrent_build_put_into_a_new_index(registry):
    repo = f"idxrace/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    days = seed_indexes(client, repo)
    writer = RegistryClient(registry.host, insecure=True)
    new_tag = tag_of(9)

    def build_reusing_day_1s_arm64_image() -> None:  # same inputs, same arm64 image: a new index names it
        fresh = push_child(writer, repo, "day 9 amd64\n", "amd64")
        push_index(writer, repo, new_tag, {AMD: fresh, ARM: writer.get_manifest(repo, days[1][ARM])})

    store = RacedStore(client, repo, build_reusing_day_1s_arm64_image)
    plan = plan_for_store(store, keep=1, min_age=timedelta(0), now=datetime.now(timezone.utc))
    assert {d.digest for d in plan if d.delete and not d.tag} == {days[d][p] for d in (1, 2) for p in (AMD, ARM)}
    report = execute_prune(store, plan)
    assert sorted(report.deleted) == sorted([tag_of(1), tag_of(2)])
    assert dict(report.skipped_children) == {days[1][ARM]: f"{new_tag} now reaches it"}
    assert sorted(report.deleted_children) == sorted([days[1][AMD], days[2][AMD], days[2][ARM]])
    assert resolved(registry.host, repo, new_tag, "arm64") == layers(client, repo, days[1][ARM])  # whole
    assert not exists(client, repo, days[1][AMD])


def test_prune_keeps_the_children_of_an_index_a_concurrent_rollback_moved_latest_onto(registry):
    repo = f"idxrace2/{PROFILE}"
    client = RegistryClient(registry.host, insecure=True)
    days = seed_indexes(client, repo)
    other = RegistryTagStore(RegistryClient(registry.host, insecure=True), parse_reference(f"{registry.host}/{repo}"))
    store = RacedStore(client, repo, lambda: other.point("latest", days[1]["index"]))  # a rollback --to day 1
    plan = plan_for_store(store, keep=1, min_age=timedelta(0), now=datetime.now(timezone.utc))
    report = execute_prune(store, plan)
    assert report.deleted == [tag_of(2)] and [t for t, _ in report.skipped] == [tag_of(1)]
    assert sorted(report.deleted_children) == sorted([days[2][AMD], days[2][ARM]])
    assert {d for d, _ in report.skipped_children} == {days[1][AMD], days[1][ARM]}
    for arch, platform in (("amd64", AMD), ("arm64", ARM)):
        assert resolved(registry.host, repo, "latest", arch) == layers(client, repo, days[1][platform])
