"""A Docker image pushed by its digest (``build``'s step 1, issue 36) with imagectl's own export of the daemon's
``docker save`` stream (imagectl/engine/docker_save.py): the registry holds that very image (config = image id,
every layer's uncompressed digest = its diff_id) and a clean ``docker pull`` by digest gets it back; a later push
compresses only the layers the registry lacks (imagectl/images/known_layers.py); the same image from two empty
caches is the same manifest; a wrong or planted cache entry changes nothing pushed; members of the save stream it
does not know are written nowhere.  Real dockerd, real registry (CNCF distribution)."""

from __future__ import annotations

import gzip
import hashlib
import hmac
import io
import json
import os
import tarfile
from pathlib import Path

import docker.errors
import pytest

from imagectl.cache import cache_secret, canonical
from imagectl.config import Config
from imagectl.engine.docker import DockerEngine
from imagectl.engine.docker_save import SAVE_WRITER, layout_from_save
from imagectl.images.known_layers import layer_digests_path
from imagectl.images.publish import push_by_digest
from imagectl.reference import parse_reference
from imagectl.registry import RegistryClient
from imagectl.registry.manifest import DOCKER_MANIFEST

pytestmark = pytest.mark.integration
RUN = os.urandom(4).hex()  # this session's images: their layers are new to the daemon and the registry


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    """An empty imagectl cache (and cache secret) of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("IMAGECTL_NO_CACHE", raising=False)
    return tmp_path / "cache"


def build(client, tmp: Path, name: str, base: str, files: dict[str, bytes]) -> str:
    """``FROM base`` and one ``COPY`` layer per file; the image id (tagged ``imagectl-test/dockerpush:NAME``)."""
    context = tmp / f"context-{name}"
    context.mkdir()
    lines = [f"FROM {base}"]
    for n, (path, data) in enumerate(files.items()):
        (context / f"f{n}").write_bytes(data)
        lines.append(f"COPY f{n} {path}")
    (context / "Dockerfile").write_text("\n".join(lines) + "\n")
    image, _ = client.images.build(path=str(context), tag=f"imagectl-test/dockerpush:{name}-{RUN}", rm=True,
                                   forcerm=True)
    return str(image.id)


def push(image_id: str, host: str, repository: str) -> tuple[str, int, list[str]]:
    """``build``'s push by digest: the digest, the bytes uploaded and the lines said."""
    lines: list[str] = []
    pushed = push_by_digest(DockerEngine(), image_id, parse_reference(f"{host}/{repository}"),
                            Config(registry_url=host, insecure=True), lines.append)
    return pushed.digest, pushed.uploaded, lines


def compressed(lines: list[str]) -> str:
    return next(line for line in lines if line.startswith("push: compressed "))


def check_in_registry(host: str, repository: str, digest: str, image_id: str) -> list[str]:
    """The registry's manifest ``digest`` is the Docker image ``image_id``: a v2s2 manifest whose config is the
    image id and whose layers, each decompressed, have the config's diff_ids; the layer digests."""
    client = RegistryClient(host, insecure=True)
    manifest = client.get_manifest(repository, digest)
    assert manifest.media_type == DOCKER_MANIFEST
    config = manifest.config()
    assert config is not None and config.digest == image_id
    diff_ids = json.loads(client.read_blob(repository, config.digest))["rootfs"]["diff_ids"]
    layers = manifest.layers()
    assert len(layers) == len(diff_ids)
    for layer, diff_id in zip(layers, diff_ids, strict=True):
        raw = gzip.decompress(client.read_blob(repository, layer.digest, 64 * 1024 * 1024))
        assert "sha256:" + hashlib.sha256(raw).hexdigest() == diff_id
    return [layer.digest for layer in layers]


@pytest.fixture
def fresh_images(docker_client, tmp_path) -> dict[str, str]:
    """A base of three layers (random bytes: new to the daemon and the registry) and two images on it, ``a`` and
    ``b``, one layer each."""
    base = build(docker_client, tmp_path, f"base-{tmp_path.name}", "scratch",
                 {f"/base/{n}.bin": os.urandom(500_000 + n) for n in range(3)})
    made = {"base": base}
    for name in ("a", "b"):
        made[name] = build(docker_client, tmp_path, f"{name}-{tmp_path.name}", base,
                           {f"/app/{name}.bin": os.urandom(200_000)})
    yield made
    for name in ("a", "b", "base"):
        try:
            docker_client.images.remove(made[name], force=True)
        except docker.errors.ImageNotFound:  # the test removed it
            pass


def test_a_pushed_docker_image_is_that_image_and_a_clean_docker_pull_gets_it(docker_client, registry, fresh_images,
                                                                             own_cache):
    digest, _, lines = push(fresh_images["a"], registry.host, "dockerpush/pull")
    check_in_registry(registry.host, "dockerpush/pull", digest, fresh_images["a"])
    assert compressed(lines).startswith("push: compressed 4 of 4 layers")
    # a clean state: the image and its base gone from the daemon, so every layer comes from the registry
    for name in ("a", "b", "base"):
        docker_client.images.remove(fresh_images[name], force=True)
    reference = f"{registry.host}/dockerpush/pull@{digest}"
    docker_client.api.pull(reference)
    try:
        assert docker_client.images.get(reference).id == fresh_images["a"]
    finally:
        docker_client.images.remove(reference, force=True)


def test_a_second_push_compresses_only_the_layers_the_registry_lacks(registry, fresh_images, own_cache):
    host = registry.host
    _, first_upload, lines = push(fresh_images["a"], host, "dockerpush/shared")
    assert compressed(lines).startswith("push: compressed 4 of 4 layers")
    digest, uploaded, lines = push(fresh_images["b"], host, "dockerpush/shared")  # the base's 3 layers are there
    assert compressed(lines).startswith("push: compressed 1 of 4 layers")
    assert compressed(lines).endswith("the registry holds the other 3")
    layers = check_in_registry(host, "dockerpush/shared", digest, fresh_images["b"])
    client = RegistryClient(host, insecure=True)
    top, config = client.blob_size("dockerpush/shared", layers[-1]), len(client.read_blob(
        "dockerpush/shared", fresh_images["b"]))
    assert uploaded == top + config < first_upload  # only its own layer and its config went up
    # another repository of the registry: every layer is mounted, none compressed
    digest_elsewhere, uploaded, lines = push(fresh_images["b"], host, "dockerpush/elsewhere")
    assert compressed(lines).startswith("push: compressed 0 of 4 layers")
    assert (digest_elsewhere, uploaded) == (digest, 0)


def test_the_same_image_from_two_empty_caches_is_one_manifest(registry, fresh_images, own_cache, tmp_path,
                                                              monkeypatch):
    digests = []
    for n in range(2):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"cache-{n}"))
        digest, _, lines = push(fresh_images["a"], registry.host, f"dockerpush/twice-{n}")
        assert compressed(lines).startswith("push: compressed 4 of 4 layers")
        digests.append(digest)
    assert digests[0] == digests[1]


def write_cache(path: Path, writers: object, *, sign: bool = True) -> None:
    """A layer-digests file holding ``writers``, authenticated with this user's cache secret where ``sign``."""
    body = {"format": 1, "writers": writers}
    secret = cache_secret()
    assert secret is not None
    mac = hmac.new(secret, canonical(body).encode(), hashlib.sha256).hexdigest() if sign else "0" * 64
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**body, "mac": mac}))


def test_a_wrong_or_planted_cache_entry_changes_nothing_pushed(registry, fresh_images, own_cache):
    host = registry.host
    clean, _, _ = push(fresh_images["a"], host, "dockerpush/clean")  # the cache now maps a's 4 layers
    layers = check_in_registry(host, "dockerpush/clean", clean, fresh_images["a"])
    path = layer_digests_path()
    mapped = json.loads(path.read_text())["writers"][SAVE_WRITER]
    client = RegistryClient(host, insecure=True)
    diff_ids = json.loads(client.read_blob("dockerpush/clean", fresh_images["a"]))["rootfs"]["diff_ids"]
    assert set(mapped) == set(diff_ids)
    sizes = {digest: client.blob_size("dockerpush/clean", digest) for digest in layers}
    hostile = {
        diff_ids[0]: [layers[1], sizes[layers[1]] + 7],  # a blob the registry holds, at another size
        diff_ids[1]: [layers[3], sizes[layers[3]]],  # a blob the registry holds, its true size: its bytes differ
        diff_ids[2]: ["sha256:" + "0" * 64, 1234],  # a blob the registry lacks
        diff_ids[3]: "not a pair",
        "sha256:short": [layers[0], 5],
    }
    # signed wrong entries, a signed file of the wrong shape, the right entries unsigned (planted): none is used
    for writers, sign in (({SAVE_WRITER: hostile}, True), ({SAVE_WRITER: "nonsense"}, True),
                          ({SAVE_WRITER: mapped}, False)):
        write_cache(path, writers, sign=sign)
        digest, _, lines = push(fresh_images["a"], host, "dockerpush/hostile")
        assert digest == clean
        assert compressed(lines).startswith("push: compressed 4 of 4 layers")
    check_in_registry(host, "dockerpush/hostile", clean, fresh_images["a"])
    assert json.loads(path.read_text())["writers"][SAVE_WRITER] == mapped  # the wrong entries were replaced
    path.write_bytes(b"\x00not json")
    digest, _, lines = push(fresh_images["a"], host, "dockerpush/hostile")
    assert digest == clean and compressed(lines).startswith("push: compressed 4 of 4 layers")


def test_members_of_the_save_stream_it_does_not_read_are_written_nowhere(docker_client, fresh_images, tmp_path):
    """The real save stream of an image with hostile members added (paths climbing out, absolute, into the layout,
    a symlink and a device): the layout is the image's, and nothing else was written under ``tmp_path``."""
    image_id = fresh_images["a"]
    saved = b"".join(docker_client.api.get_image(image_id))
    hostile = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(saved), mode="r:") as source, \
            tarfile.open(fileobj=hostile, mode="w:", format=tarfile.PAX_FORMAT) as out:
        for member in source:
            out.addfile(member, source.extractfile(member) if member.isfile() else None)
        for name in ("../escaped", "/tmp/absolute-" + RUN, "layout/blobs/sha256/planted", "x/../../up",
                     "0" * 64 + "/../../climb.json"):
            data = b"hostile"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            out.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("1" * 64 + "/layer.tar")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        out.addfile(link)
        device = tarfile.TarInfo("dev")
        device.type = tarfile.CHRTYPE
        out.addfile(device)
    work = tmp_path / "work"
    work.mkdir()
    digest = layout_from_save([hostile.getvalue()[i:i + 65536] for i in range(0, len(hostile.getvalue()), 65536)],
                              image_id, work / "layout")
    layout = work / "layout"
    written = {str(p.relative_to(work)) for p in work.rglob("*")}
    blobs = {f"layout/blobs/sha256/{p.name}" for p in (layout / "blobs" / "sha256").iterdir()}
    assert written == {"layout", "layout/blobs", "layout/blobs/sha256", "layout/oci-layout", "layout/index.json",
                       *blobs}
    assert len(blobs) == 6  # the manifest, the config and four layers
    assert not Path(f"/tmp/absolute-{RUN}").exists()
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "climb.json").exists()
    manifest = json.loads((layout / "blobs" / "sha256" / digest.removeprefix("sha256:")).read_text())
    assert manifest["config"]["digest"] == image_id
