"""Locks end to end: ``imagectl lock`` against a real stand-in index (PEP 658/691/700), builds that install the
lock on the real engine and push to a real registry, the in-image check against an image that drifted from its
lock, extras resolved on the lock, and one lock of a shipped profile made against the real PyPI.

The stand-in index of this module holds torch 2.3.0 (uploaded 2024-04-24) and 2.3.1 (2024-06-05) with their
dependency trees, and releases uploaded "now": numpy 2.0.0, ``team-extra`` 1.0 and ``team-numpy2`` 1.0 (which
requires numpy>=2).  ``--as-of release`` (the default) locks torch 2.3.1 as of 2024-06-12, so numpy 1.26.4.
A test that publishes into an index after locking has an index of its own (:func:`own_index`).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from imagectl.errors import NotFoundError
from imagectl.images.assembled import COMPILE_STEP, COPY_STEP, INSTALL_STEP
from imagectl.registry import RegistryClient
from tests.conftest import REPO
from tests.integration.conftest import empty_storage, shipped_pins, skip_or_fail, write_config
from tests.integration.support.registry import CHANGE_MARK, FaultInjectingProxy, change_a_file_in_the_top_layer
from tests.integration.support.skips import require_binary
from tests.integration.support.wheels import (IndexServer, make_standin_framework_wheels, make_wheel,
                                              start_simple_index)

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11
OLDER = "torch-2.3.0-cu121-py3.11"  # the same CUDA pins as 2.3.1
LOCK_ID = "torch-2.3.1-cu121-py3.11"
TORCH_230_UPLOADED = datetime(2024, 4, 24, 17, 0, tzinfo=timezone.utc)
TORCH_231_UPLOADED = datetime(2024, 6, 5, 17, 0, tzinfo=timezone.utc)
# the as-of line of a lock of torch 2.3.1 on this index (the note may go on: the CUDA layer's own date)
RELEASE_AS_OF = re.compile(r"# as-of: 2024-06-12 \(release: torch 2\.3\.1 uploaded 2024-06-05, plus 7 days(; .*)?\)")
# The closure of torch-2.3's stand-ins besides its 15 pins (tests/integration/support/wheels.py)
DEPENDENCIES = {"filelock": "3.15.1", "fsspec": "2024.6.0", "jinja2": "3.1.4", "markupsafe": "2.1.5",
                "mpmath": "1.3.0", "networkx": "3.3", "numpy": "1.26.4", "pillow": "10.3.0", "sympy": "1.12.1",
                "typing-extensions": "4.12.2"}
_PACKAGE = re.compile(r"(?P<name>[a-z0-9-]+)==(?P<version>\S+) \\")
_HASH = re.compile(r" {4}--hash=sha256:[0-9a-f]{64}( \\)?")


def publish_release(wheels: Path, profile: str, uploaded: datetime) -> dict[str, str]:
    """Write the stand-ins of ``profile``'s pins (and their dependencies) into ``wheels``; returns the pins."""
    pins = shipped_pins(profile)
    facts = {"torch_version": pins["torch"], "cuda": "12.1", "cudnn": pins["nvidia-cudnn-cu12"],
             "nccl": pins["nvidia-nccl-cu12"]}
    # torch's stand-in carries two files of 8 MiB and 4 KiB, over the matrix's own_layer_mib: one kept byte for byte
    # from release to release, one of each release's own (as libtorch_cuda_linalg.so and libtorch_cuda.so)
    big = {"torch": 8 * 2**20 + 4096}
    make_standin_framework_wheels(wheels, pins, facts, upload_time=uploaded, payload_bytes=big, kept_payload_bytes=big)
    return pins


def publish_now(wheels: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """Publish one pure-python stand-in ``name`` ``version`` into ``wheels``, uploaded now."""
    module = name.replace("-", "_")
    return make_wheel(wheels, name, version, {f"{module}/__init__.py": f"__version__ = {version!r}\n"}, requires,
                      upload_time=datetime.now(timezone.utc))


@pytest.fixture(scope="module")
def release_index(tmp_path_factory) -> Iterator[IndexServer]:
    """The module's index (see the module docstring); nothing is published into it once it runs."""
    wheels = tmp_path_factory.mktemp("lock-index")
    # 2.3.1 first: the files both releases share (nvidia-*, the dependencies) keep the earlier upload time
    publish_release(wheels, PROFILE, TORCH_231_UPLOADED)
    publish_release(wheels, OLDER, TORCH_230_UPLOADED)
    publish_now(wheels, "numpy", "2.0.0")
    publish_now(wheels, "team-extra", "1.0")
    publish_now(wheels, "team-numpy2", "1.0", ("numpy>=2",))
    with start_simple_index(wheels) as server:
        yield server


@pytest.fixture
def own_index(tmp_path) -> Iterator[tuple[IndexServer, Path]]:
    """A fresh index of torch 2.3.1's stand-ins for one test that publishes into it: ``(server, its folder)``.
    One stand-in (networkx) carries a nonce, so this index's lock is new to the engine's layer cache: every
    layer that installs from the lock runs pip for real."""
    wheels = tmp_path / "own-index"
    publish_release(wheels, PROFILE, TORCH_231_UPLOADED)
    make_wheel(wheels, "networkx", "3.3", {"networkx/__init__.py": "__version__ = '3.3'\n",
                                           "networkx/_nonce.py": f"NONCE = {uuid.uuid4().hex!r}\n"},
               upload_time=TORCH_231_UPLOADED)
    with start_simple_index(wheels) as server:
        yield server, wheels


def lock_config(tmp_path: Path, index_url: str) -> None:
    """An imagectl.toml that only names the index (``imagectl lock`` needs no engine, mirror or registry)."""
    (tmp_path / "imagectl.toml").write_text(f'[pip]\nindex_url = "{index_url}"\n')


def packages_of(lock_text: str) -> dict[str, str]:
    """name -> version of every package line of a lock file."""
    return {m["name"]: m["version"] for m in map(_PACKAGE.fullmatch, lock_text.splitlines()) if m}


def run_in(docker_client, image: str, command: list[str]) -> str:
    """stdout of ``command`` in a throw-away container of ``image`` (no network)."""
    return docker_client.containers.run(image, command, remove=True, network_mode="none").decode()


def run_kept(docker_client, image: str, script: str):
    """Run ``sh -c script`` in a container of ``image`` with host networking: ``(container, status, output)``;
    the container is kept (to commit it) and is the caller's to remove."""
    container = docker_client.containers.run(image, ["sh", "-c", script], network_mode="host", detach=True)
    status = container.wait(timeout=300)["StatusCode"]
    return container, status, container.logs(stdout=True, stderr=True).decode(errors="replace")


def image_config(registry, repo: str, tag: str = "latest") -> dict:
    """The config blob (JSON) of ``repo:tag`` as the registry serves it."""
    client = RegistryClient(registry.host, insecure=True)
    config = client.get_manifest(repo, tag).config()
    assert config is not None
    return json.loads(client.read_blob(repo, config.digest))


def layers_through(config: dict, marker: str) -> int:
    """How many layers of the image ``config`` describes lie up to and including the ``RUN pip install`` of the
    lock layer file ``marker``, or the layer imagectl wrote of it (``imagectl: install /opt/imagectl/MARKER``, an
    assembled image), from the config's history (entries with ``empty_layer`` make no layer)."""
    count = 0
    for entry in config["history"]:
        if not entry.get("empty_layer"):
            count += 1
        created_by = entry.get("created_by", "")
        installs = "pip install" in created_by or created_by.startswith(INSTALL_STEP)
        if installs and f"/opt/imagectl/{marker}" in created_by:
            assert not entry.get("empty_layer"), entry
            return count
    raise AssertionError(f"no RUN installs {marker}: {[e.get('created_by') for e in config['history']]}")


def test_locking_is_deterministic_and_reads_only_metadata(run_cli, tmp_path, release_index):
    lock_config(tmp_path, release_index.url)
    downloads, asked = release_index.full_downloads(), len(release_index.requests())
    first = run_cli("lock", PROFILE, "--output", "a.txt")
    assert first.code == 0, first.err
    assert f"{LOCK_ID}: 25 packages as of 2024-06-12 written to a.txt" in first.err
    second = run_cli("lock", PROFILE, "--output", "b.txt")  # resolved afresh: a new file
    assert second.code == 0, second.err
    text = (tmp_path / "a.txt").read_bytes()
    assert (tmp_path / "b.txt").read_bytes() == text
    upgraded = run_cli("lock", PROFILE, "--upgrade", "--output", "a.txt")  # resolved afresh, ignoring a.txt
    assert upgraded.code == 0, upgraded.err
    assert f"{LOCK_ID}: 25 packages as of 2024-06-12 unchanged in a.txt" in upgraded.err
    assert (tmp_path / "a.txt").read_bytes() == text

    lines = text.decode().splitlines()
    assert lines[:3] == ["# imagectl lock: torch 2.3.1 (cu121), Python 3.11", f"# index: {release_index.url}",
                         "# platform: x86_64-manylinux_2_28"]
    assert RELEASE_AS_OF.fullmatch(lines[3]), lines[3]
    assert lines[4].startswith("# inputs: ") and lines[5].startswith("# source: ")
    body = lines[6:]
    for number, line in enumerate(body):
        assert _PACKAGE.fullmatch(line) or _HASH.fullmatch(line), line
        if _PACKAGE.fullmatch(line):
            assert _HASH.fullmatch(body[number + 1]), body[number:number + 2]  # every package has its hash
    assert body[-1].startswith("    --hash=sha256:") and not body[-1].endswith("\\")
    # numpy 2.0.0 is on the index, uploaded after the as-of date
    assert packages_of(text.decode()) == {**shipped_pins(PROFILE), **DEPENDENCIES}
    assert release_index.full_downloads() == downloads  # no whole wheel was downloaded to lock
    assert any(r.path.endswith(".whl.metadata") for r in release_index.requests()[asked:])  # PEP 658 files


def test_a_newer_transitive_release_does_not_enter_a_rebuild(run_cli, tmp_path, own_index, mirror, registry,
                                                            docker_config, docker_client):
    index, wheels = own_index
    locks = tmp_path / "locks"
    locks.mkdir()
    write_config(tmp_path, mirror=mirror, index_url=index.url, registry=registry, namespace="newer", locks=locks)
    made = run_cli("lock", PROFILE, "--as-of", "latest")
    assert made.code == 0, made.err
    lock_file = locks / f"{LOCK_ID}.txt"
    locked = lock_file.read_text()
    assert "# as-of: latest\n" in locked and packages_of(locked)["numpy"] == "1.26.4"

    publish_now(wheels, "numpy", "2.0.0")
    built = run_cli("build", PROFILE, "--force")
    assert built.code == 0, built.err[-3000:]
    assert f"lock {LOCK_ID} (team: {lock_file}" in built.err
    # pip ran (this index's lock is new to the layer cache) against an index that offers numpy 2.0.0
    installed = [line for line in built.err.splitlines() if "Successfully installed" in line]
    assert any(" numpy-1.26.4" in line for line in installed), installed
    assert "numpy-2.0.0" not in built.err

    image = f"{registry.host}/newer/{PROFILE}:latest"
    assert run_in(docker_client, image, ["cat", "/opt/imagectl/lock.txt"]) == locked
    version = run_in(docker_client, image, ["python", "-c", "import numpy; print(numpy.__version__)"])
    assert version.strip() == "1.26.4"
    assert docker_client.images.get(image).labels["imagectl.lock.sha256"] == hashlib.sha256(locked.encode()).hexdigest()

    upgraded = run_cli("lock", PROFILE, "--as-of", "latest", "--upgrade", "--output", "b.txt")
    assert upgraded.code == 0, upgraded.err
    assert packages_of((tmp_path / "b.txt").read_text())["numpy"] == "2.0.0"  # the index really offers it
    assert lock_file.read_text() == locked


def test_the_check_fails_when_an_image_differs_from_its_lock(run_cli, tmp_path, release_index, mirror, registry,
                                                            docker_config, docker_client):
    write_config(tmp_path, mirror=mirror, index_url=release_index.url, registry=registry, namespace="drift")
    built = run_cli("build", PROFILE)
    assert built.code == 0, built.err[-3000:]
    ref = f"{registry.host}/drift/{PROFILE}:latest"
    image = docker_client.images.get(ref)
    good = run_cli("test", ref, "--json")
    assert good.code == 0, good.err[-2000:]
    assert {f["what"]: f["ok"] for f in json.loads(good.out)["findings"]}["installed packages = lock"]

    refused, status, output = run_kept(docker_client, image.id, f"pip install -i {release_index.url} numpy==2.0.0")
    refused.remove()
    assert status != 0, output  # PIP_CONSTRAINT: a derived image cannot silently replace a locked package
    assert "numpy==1.26.4" in output and "constraint" in output, output

    override = f"PIP_CONSTRAINT= pip install --no-deps -i {release_index.url} numpy==2.0.0"
    changed, status, output = run_kept(docker_client, image.id, override)
    try:
        assert status == 0, output
        assert "Successfully installed numpy-2.0.0" in output
        drifted = changed.commit(repository="imagectl-test/drifted", tag=uuid.uuid4().hex[:12])
    finally:
        changed.remove()
    try:
        assert drifted.labels == image.labels  # the commit keeps the labels: it claims the lock still
        tested = run_cli("test", drifted.tags[0], "--json")
        assert tested.code == 1, tested.err[-2000:]
        report = json.loads(tested.out)
        assert not report["ok"]
        finding = next(f for f in report["findings"] if f["what"] == "installed packages = lock")
        assert not finding["ok"] and "numpy 1.26.4 != 2.0.0" in finding["actual"], finding
        assert next(f for f in report["findings"] if f["what"] == "lock file sha256")["ok"]
    finally:
        docker_client.images.remove(drifted.id, force=True)


def test_profiles_with_the_same_cuda_pins_share_the_cuda_layer(run_cli, tmp_path, release_index, mirror, registry,
                                                               docker_config, docker_client):
    """torch 2.3.0 and 2.3.1 pin the same CUDA wheels (and their locks the same numpy, pillow, networkx, mpmath):
    on one engine their images have one CUDA layer and one layer of those libraries (the Dockerfile up to that RUN
    is the same, so the second build takes it from the layer cache)."""
    older, newer = shipped_pins(OLDER), shipped_pins(PROFILE)
    cuda = {n: v for n, v in newer.items() if n.startswith("nvidia-")}
    assert {n: v for n, v in older.items() if n.startswith("nvidia-")} == cuda and older["torch"] != newer["torch"]
    write_config(tmp_path, mirror=mirror, index_url=release_index.url, registry=registry, namespace="layers")
    built = run_cli("build", OLDER, PROFILE)
    assert built.code == 0, built.err[-3000:]

    layers, cuda_at, libs_at, framework_at = {}, {}, {}, {}
    for name in (OLDER, PROFILE):
        config = image_config(registry, f"layers/{name}")
        layers[name] = docker_client.images.get(f"{registry.host}/layers/{name}:latest").attrs["RootFS"]["Layers"]
        assert layers[name] == config["rootfs"]["diff_ids"]
        cuda_at[name] = layers_through(config, "lock-1-cuda.txt")
        libs_at[name] = layers_through(config, "lock-2-libs.txt")
        framework_at[name] = layers_through(config, "lock-3-framework.txt")
        locked = dict(p.split("==") for p in config["config"]["Labels"]["imagectl.lock.packages"].split(","))
        assert locked["torch"] == shipped_pins(name)["torch"]
        assert {n: v for n, v in locked.items() if n.startswith("nvidia-")} == cuda
    assert cuda_at[OLDER] == cuda_at[PROFILE]
    shared = cuda_at[PROFILE]
    assert layers[OLDER][:shared] == layers[PROFILE][:shared]  # base, setup and the CUDA layer: one copy
    assert libs_at[OLDER] == libs_at[PROFILE] > shared
    assert layers[OLDER][:libs_at[PROFILE]] == layers[PROFILE][:libs_at[PROFILE]]  # and the libraries' layer
    assert framework_at[OLDER] == framework_at[PROFILE] > libs_at[PROFILE]
    frame = framework_at[PROFILE] - 1
    assert layers[OLDER][frame] != layers[PROFILE][frame]  # torch 2.3.0 vs 2.3.1


def test_fresh_runners_share_the_cuda_layer_upload_none_of_it_and_reproduce_an_image(
        run_cli, tmp_path, monkeypatch, release_index, mirror, registry, docker_config):
    """Two CI runners, each with empty buildah storage, build torch 2.3.0 and 2.3.1 (the same CUDA pins) into two
    repositories of one registry: every layer up to the CUDA layer and the libraries' is the same blob in both
    images, and so is the layer of torch's big file that both releases hold byte for byte (``own_layer_mib``); the
    second runner's push, measured at the registry through a counting proxy, mounts them from the first repository
    and sends none of their bytes.  A third runner, empty storage again, rebuilds the first image from its labels
    (``rebuild --compare``): ``reproduced`` with its digest; once a file of the registry's image is changed, the
    rebuild names the layer and the file (exit 1).  One test: each runner's build is a full build."""
    require_binary("buildah")
    config = write_config(tmp_path, mirror=mirror, index_url=release_index.url, registry=registry,
                          namespace="runners", engine="buildah")
    empty_storage(monkeypatch, tmp_path / "runner-a")
    first = run_cli("build", OLDER, "--quiet")
    assert first.code == 0, first.err[-3000:]

    proxy = FaultInjectingProxy(registry.url)  # runner B pushes through it (a loopback host: plain HTTP)
    try:
        config.write_text(config.read_text().replace(f'url = "{registry.host}"', f'url = "{proxy.host}"', 1))
        empty_storage(monkeypatch, tmp_path / "runner-b")
        second = run_cli("build", PROFILE, "--json")
    finally:
        proxy.stop()
    assert second.code == 0, second.err[-3000:]
    assert re.search(r"\d+ layers staged into the engine's store as they were written", second.err), second.err[-3000:]
    [result] = json.loads(second.out)["results"]

    client, repo_a, repo_b = RegistryClient(registry.host, insecure=True), f"runners/{OLDER}", f"runners/{PROFILE}"
    manifests = {repo: client.get_manifest(repo, "latest") for repo in (repo_a, repo_b)}
    configs = {repo: image_config(registry, repo) for repo in (repo_a, repo_b)}
    blobs = {repo: [layer.digest for layer in manifest.layers()] for repo, manifest in manifests.items()}
    diff_ids = {repo: config["rootfs"]["diff_ids"] for repo, config in configs.items()}
    shared = layers_through(configs[repo_b], "lock-1-cuda.txt")
    assert layers_through(configs[repo_a], "lock-1-cuda.txt") == shared
    libs = layers_through(configs[repo_b], "lock-2-libs.txt")
    assert layers_through(configs[repo_a], "lock-2-libs.txt") == libs == shared + 1
    # base, Python, JIT packages, the CUDA layer and the libraries' (numpy, ...): one blob each, made on two runners
    assert diff_ids[repo_a][:libs] == diff_ids[repo_b][:libs]
    assert blobs[repo_a][:libs] == blobs[repo_b][:libs]
    # then torch's two big files, each a layer of its own (own_layer_mib): the one both releases hold byte for byte is
    # one blob in both images, the other is not
    steps = {repo: [e.get("created_by", "") for e in configs[repo]["history"] if not e.get("empty_layer")]
             for repo in (repo_a, repo_b)}
    assert len(steps[repo_a]) == len(steps[repo_b]) == len(diff_ids[repo_b])
    site = "/opt/venv/lib/python3.11/site-packages"
    kept, own = libs, libs + 1
    for repo in (repo_a, repo_b):
        assert steps[repo][kept].startswith(f"{INSTALL_STEP} {site}/torch/_kept.bin (a file of torch=="), steps[repo]
        assert steps[repo][own].startswith(f"{INSTALL_STEP} {site}/torch/_payload.bin (a file of torch=="), steps[repo]
    assert blobs[repo_a][kept] == blobs[repo_b][kept] and diff_ids[repo_a][kept] == diff_ids[repo_b][kept]
    assert blobs[repo_a][own] != blobs[repo_b][own]
    # a change to the lock moves only the layers that hold it: each lock layer whose pins changed (its history names
    # them), and the two layers imagectl writes from all of them, the .pyc files and /opt/imagectl's files
    holds_change = {k for k, (step_a, step_b) in enumerate(zip(steps[repo_a], steps[repo_b]))
                    if k not in (kept, own) and (step_a != step_b or step_b.startswith((COMPILE_STEP, COPY_STEP)))}
    differs = {k for k, (a, b) in enumerate(zip(diff_ids[repo_a], diff_ids[repo_b])) if a != b} - {own}
    assert differs == holds_change, (sorted(differs), sorted(holds_change), steps[repo_b])
    assert [step.split(" (")[0] for step in steps[repo_b][-8:]] == [
        f"{INSTALL_STEP} /opt/imagectl/lock-1-cuda.txt", f"{INSTALL_STEP} /opt/imagectl/lock-2-libs.txt",
        f"{INSTALL_STEP} {site}/torch/_kept.bin", f"{INSTALL_STEP} {site}/torch/_payload.bin",
        f"{INSTALL_STEP} /opt/imagectl/lock-3-framework.txt", f"{INSTALL_STEP} /opt/imagectl/lock-4-rest.txt",
        steps[repo_b][-2].split(" (")[0], f"{COPY_STEP} /opt/imagectl"]
    cuda = blobs[repo_b][shared - 1]

    exchanges, sent = proxy.exchanges(), proxy.uploaded_by_blob()
    mounted = {e.query["mount"]: e.query["from"] for e in exchanges
               if e.method == "POST" and "mount" in e.query and e.status == 201}
    asked = [(e.method, e.path, e.status) for e in exchanges]
    looked = asked.index(("HEAD", f"/v2/{repo_b}/blobs/{cuda}", 404))
    found = asked.index(("HEAD", f"/v2/{repo_a}/blobs/{cuda}", 200))
    mount = next(n for n, e in enumerate(exchanges) if e.method == "POST" and e.query.get("mount") == cuda)
    assert looked < found < mount and mounted[cuda] == repo_a
    assert all(mounted.get(digest) == repo_a and digest not in sent for digest in [*blobs[repo_b][:libs],
                                                                                  blobs[repo_b][kept]])
    assert not [e for e in exchanges if e.method in ("PATCH", "PUT") and e.query.get("digest") == cuda]

    image = [manifests[repo_b].config().digest, *blobs[repo_b]]
    uploaded = {digest: sent[digest] for digest in image if digest in sent}
    assert "" not in sent and set(uploaded) | set(mounted) >= set(image) and not set(uploaded) & set(mounted)
    sizes = {blob.digest: blob.size for blob in manifests[repo_b].blobs()}
    assert all(sizes[digest] == count for digest, count in uploaded.items())  # each sent once, whole
    assert result["pushed_bytes"] == sum(uploaded.values()) > 0
    mounted_in_image = [digest for digest in image if digest in mounted]
    assert re.search(rf"mounted from other repositories \({len(mounted_in_image)} blobs?\)", second.err), second.err
    measured = (f"runner B: {sum(sent.values())} bytes uploaded ({sum(uploaded.values())} of the image's blobs, "
                f"{sent.get(cuda, 0)} of the CUDA layer), {sum(sizes[d] for d in mounted_in_image)} bytes mounted "
                f"({len(mounted_in_image)} blobs, CUDA layer {sizes[cuda]})")

    # runner C, empty storage: the same profile, lock and base built a second time, as `rebuild --compare` does it;
    # without the containers-storage program, so its load makes every layer itself, where runner A's staged them
    config.write_text(config.read_text().replace(f'url = "{proxy.host}"', f'url = "{registry.host}"', 1))
    empty_storage(monkeypatch, tmp_path / "runner-c")
    with monkeypatch.context() as unstaged:
        unstaged.setattr("imagectl.engine.layer_store.TOOL", "containers-storage-not-installed")
        same = run_cli("rebuild", OLDER, "--compare")
    assert same.code == 0, same.out + same.err[-1500:]
    assert "layers not staged (the engine cannot: apt-get install containers-storage): the load made them" in same.err
    assert same.out.strip() == f"reproduced {manifests[repo_a].digest}"
    assert list((tmp_path / "runner-c" / "root").iterdir()), "the rebuild did not use the empty storage"

    # the registry's image changed after the push: the rebuild (runner C, now warm) names the layer and the file
    changed = change_a_file_in_the_top_layer(client, repo_a, "latest")
    differs = run_cli("rebuild", f"{registry.host}/{repo_a}:latest", "--compare", "--json")
    assert differs.code == 1, differs.err[-3000:]
    document = json.loads(differs.out)
    assert document["reproduced"] is False and document["layer"]["index"] == len(blobs[repo_a]) - 1
    assert document["rebuilt_digest"] == manifests[repo_a].digest != document["registry_digest"]
    # re-tarring the layer in the test may change other members' headers too: the changed file must be among them
    [diff] = [f for f in document["layer"]["files"] if f["path"] == changed]
    assert diff["registry"]["size"] == diff["rebuilt"]["size"] + len(CHANGE_MARK)
    assert diff["registry"]["sha256"] != diff["rebuilt"]["sha256"]
    print(measured)  # last: the CLI runs above read what the test prints


def test_an_extra_that_conflicts_with_the_lock_is_refused_before_the_build(run_cli, tmp_path, release_index, mirror,
                                                                           registry, docker_config, docker_client):
    write_config(tmp_path, mirror=mirror, index_url=release_index.url, registry=registry, namespace="refused")
    downloads = release_index.full_downloads()
    refused = run_cli("build", PROFILE, "--extra", "torch==2.4.0", "--suffix", "refused")
    assert refused.code == 2, refused.err[-2000:]
    assert "torch==2.4.0" in refused.err and "torch==2.3.1" in refused.err
    assert "building" not in refused.err and refused.out == ""

    deeper = run_cli("build", PROFILE, "--extra", "team-numpy2==1.0", "--suffix", "refused")
    assert deeper.code == 2, deeper.err[-2000:]
    line = next(x for x in deeper.err.splitlines() if x.startswith(f"imagectl: {PROFILE}: "))
    assert f"the extras cannot be installed with the lock of {LOCK_ID}" in line and "numpy" in line, line
    assert "building" not in deeper.err

    assert release_index.full_downloads() == downloads  # no pip in a Docker build fetched a wheel
    assert docker_client.images.list(name=f"{registry.host}/refused/{PROFILE}-refused") == []
    with pytest.raises(NotFoundError):
        RegistryClient(registry.host, insecure=True).list_tags(f"refused/{PROFILE}-refused")


def test_an_extra_with_a_marker_builds_and_is_labelled(run_cli, tmp_path, release_index, mirror, registry,
                                                       docker_config):
    write_config(tmp_path, mirror=mirror, index_url=release_index.url, registry=registry, namespace="marker")
    built = run_cli("build", PROFILE, "--extra", 'team-extra==1.0; python_version >= "3.8"', "--suffix", "team")
    assert built.code == 0, built.err[-3000:]
    assert "extras locked on top of the lock: team-extra==1.0" in built.err
    labels = image_config(registry, f"marker/{PROFILE}-team")["config"]["Labels"]
    assert "team-extra==1.0" in labels["imagectl.extras"].split(",")
    assert labels["org.opencontainers.image.title"] == f"{PROFILE}-team"
    assert labels["imagectl.profile"] == f"{PROFILE}+extras"


def test_locking_a_shipped_profile_against_pypi_gives_the_shipped_lock(run_cli, tmp_path):
    """The real PyPI (no imagectl.toml: the default index): the shipped lock is what ``imagectl lock`` makes."""
    import requests

    try:
        requests.get("https://pypi.org/simple/", timeout=10, stream=True).close()
    except requests.RequestException as exc:
        skip_or_fail(f"PyPI is unreachable: {exc}")
    assert not (tmp_path / "imagectl.toml").exists()
    made = run_cli("lock", "torch-2.3-cu121", "--output", "real.txt")
    assert made.code == 0, made.err
    shipped = REPO / "matrices" / "locks" / "torch-2.3.1-cu121-py3.10.txt"
    assert (tmp_path / "real.txt").read_bytes() == shipped.read_bytes()
