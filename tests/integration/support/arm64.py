"""A stand-in multi-platform CUDA base for builds of ``linux/amd64`` and ``linux/arm64`` (issue 20).

An ``nvidia/cuda`` tag is an OCI image index of an amd64 and an arm64 image.  The stand-in is one too, pushed into
the test registry under the mirror prefix a test's configuration names:

- its ``linux/amd64`` image is :func:`~.engine.standin_base_image` (the Debian minbase rootfs every build test
  uses, made by Docker), pushed under a side tag;
- its ``linux/arm64`` image is one uncompressed layer of Debian bookworm arm64 files unpacked by ``mmdebstrap
  --variant=extract`` (no maintainer script runs, so no emulation: about a minute on two cores, mostly the
  download, then cached): dash, coreutils, dpkg, Python 3.11 with venv and headers, gcc and g++ (the stand-in
  torch's ``torch.compile`` really compiles a C++ extension, as inductor does).  Extraction writes no dpkg status,
  so a small one says the three packages the Dockerfile asks ``dpkg-query`` about are installed (they are: their
  files are in the layer).  Big files no build or check reads are left out (LTO, sanitizers, static Python
  libraries, Python's own test suite, documentation).

The layer tarball and its digest are cached beside the other stand-in rootfs tarballs (``IMAGECTL_TEST_CACHE``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

from imagectl.registry import OCI_INDEX, Manifest, RegistryClient
from tests.integration.support.engine import (
    DEFAULT_PATH,
    _file_lock,
    _run_mmdebstrap,
    cache_dir,
    debian_mirror_lines,
    push_to_registry,
    standin_base_image,
)

ARM64_PACKAGES = ("dash", "coreutils", "dpkg", "ca-certificates", "python3.11", "python3.11-venv", "python3.11-dev",
                  "gcc", "g++")
DPKG_INSTALLED = ("gcc", "g++", "python3.11-dev")  # what the rendered Dockerfile asks dpkg-query about
_LEFT_OUT = ("usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/lib/python3.11/test/",
             "usr/lib/gcc/aarch64-linux-gnu/12/lto1", "usr/bin/aarch64-linux-gnu-lto-dump-12",
             "usr/lib/python3.11/config-3.11-aarch64-linux-gnu/libpython3.11")
_SANITIZERS = ("libasan", "libtsan", "libhwasan", "liblsan", "libubsan")
_RECIPE = 1  # bump when the recipe changes
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


def _left_out(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return name.startswith(_LEFT_OUT) or (name.startswith("usr/lib/") and base.startswith(_SANITIZERS))


def _status() -> bytes:
    stanzas = [f"Package: {name}\nStatus: install ok installed\nVersion: 0.standin\nArchitecture: arm64\n"
               for name in DPKG_INSTALLED]
    return "\n".join(stanzas).encode()


def _write_layer(rootfs: Path, target: Path) -> None:
    """The layer tar of ``rootfs`` (see the module docstring), written to ``target``."""
    with tarfile.open(rootfs) as source, tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as layer:
        for member in source:
            name = member.name.removeprefix("./")
            if not name or _left_out(name) or name == "var/lib/dpkg/status":
                continue
            member.name = name
            layer.addfile(member, source.extractfile(member) if member.isfile() else None)
        data = _status()
        info = tarfile.TarInfo("var/lib/dpkg/status")
        info.size, info.mode = len(data), 0o644
        layer.addfile(info, io.BytesIO(data))


def arm64_layer(timeout: float = 900) -> tuple[Path, str]:
    """``(layer tarball, its sha256 digest)`` of the arm64 stand-in, made once and cached.

    Raises RuntimeError when mmdebstrap is missing or fails."""
    mirrors = debian_mirror_lines("bookworm")
    key = hashlib.sha256(json.dumps([_RECIPE, ARM64_PACKAGES, _LEFT_OUT, DPKG_INSTALLED, mirrors]).encode()
                         ).hexdigest()[:16]
    folder = cache_dir()
    layer, digest_file = folder / f"arm64-layer-{key}.tar", folder / f"arm64-layer-{key}.sha256"
    with _file_lock(folder / f".arm64-{key}.lock"):
        if not (layer.is_file() and digest_file.is_file()):
            rootfs = folder / f"arm64-rootfs-{key}.partial-{os.getpid()}.tar"
            partial = folder / f"arm64-layer-{key}.partial-{os.getpid()}.tar"
            argv = ["mmdebstrap", "--variant=extract", "--arch=arm64", "--format=tar",
                    f"--include={','.join(ARM64_PACKAGES)}", "bookworm", str(rootfs), *mirrors]
            try:
                _run_mmdebstrap(argv, folder / f"arm64-rootfs-{key}.log", timeout)
                _write_layer(rootfs, partial)
                digest = "sha256:" + _sha256(partial)
                os.replace(partial, layer)
                digest_file.write_text(digest)
            finally:
                rootfs.unlink(missing_ok=True)
                partial.unlink(missing_ok=True)
    return layer, digest_file.read_text().strip()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _arm64_image(client: RegistryClient, repo: str, env: dict[str, str]) -> Manifest:
    """The arm64 image of the stand-in base, put into ``repo`` by digest."""
    layer, diff_id = arm64_layer()
    with layer.open("rb") as handle:
        client.upload_blob(repo, handle, diff_id)
    merged = {"PATH": DEFAULT_PATH, **env}
    config = json.dumps({"architecture": "arm64", "os": "linux", "created": "2024-05-01T12:00:00Z",
                         "config": {"Env": [f"{k}={v}" for k, v in sorted(merged.items())], "Cmd": ["/bin/sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                         # one entry per layer: buildah refuses a config whose history lists fewer layers than it has
                         "history": [{"created": "2024-05-01T12:00:00Z",
                                      "created_by": "mmdebstrap --variant=extract --arch=arm64 (stand-in)"}]},
                        sort_keys=True).encode()
    client.upload_blob(repo, config)
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "config": {"mediaType": OCI_CONFIG, "size": len(config),
                                  "digest": "sha256:" + hashlib.sha256(config).hexdigest()},
                       "layers": [{"mediaType": OCI_LAYER_TAR, "size": layer.stat().st_size, "digest": diff_id}]},
                      sort_keys=True).encode()
    manifest = Manifest.from_bytes(body, OCI_MANIFEST)
    client.put_manifest(repo, manifest.digest, manifest)
    return manifest


def push_multiplatform_base(docker_client, registry_host: str, prefix: str, public: str, env: dict[str, str]) -> str:
    """Put a two-platform stand-in of ``public`` (``nvidia/cuda:13.2.1-base-ubuntu22.04``) at
    ``<registry>/<prefix>/<public>``; returns the index's digest.  Raises RuntimeError when a stand-in cannot be
    made."""
    name, _, tag = public.rpartition(":")
    repo = f"{prefix}/{name}"
    # both children carry the JIT toolchain (the arm64 rootfs has it: DPKG_INSTALLED), so neither build runs apt
    local = standin_base_image(docker_client, f"imagectl-test/{public}", env=env, packages=DPKG_INSTALLED)
    push_to_registry(docker_client, local, registry_host, f"{repo}:{tag}-amd64")
    client = RegistryClient(registry_host, insecure=True)
    amd64 = client.get_manifest(repo, f"{tag}-amd64")
    arm64 = _arm64_image(client, repo, env)
    entries = [{"mediaType": m.media_type, "digest": m.digest, "size": len(m.raw),
                "platform": {"architecture": arch, "os": "linux"}} for m, arch in ((amd64, "amd64"), (arm64, "arm64"))]
    index = Manifest.from_bytes(json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries},
                                           sort_keys=True).encode(), OCI_INDEX)
    return client.put_manifest(repo, tag, index)
