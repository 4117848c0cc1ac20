"""A real Docker engine for integration tests: start it, give it stand-in base images, push to a local registry.

- :func:`docker_available` / :func:`ensure_dockerd`: find the daemon, or start ``dockerd`` when we are root
  (a fresh CI machine). The caller (a conftest) decides whether a missing engine means skip or fail.
- :func:`standin_base_image`: no Docker Hub here, so a public CUDA base such as
  ``nvidia/cuda:12.1.1-runtime-ubuntu22.04`` is replaced by a Debian rootfs made with ``mmdebstrap`` (with
  ``python3``, ``python3-venv``, ``python3-pip``, ``ca-certificates``), ``docker import``-ed once as
  ``imagectl-test/standin-rootfs:<suite>-<key>``; each stand-in reference is a metadata-only image on top
  of it carrying the base image's ENV. The rootfs tarball is cached under ``~/.cache/imagectl-tests/``.
- :func:`push_to_registry`: a throwaway ``docker-registry`` on
  ``127.0.0.1`` (which dockerd treats as insecure, so plain HTTP works) and a push that returns the digest.

Environment knobs: ``IMAGECTL_TEST_CACHE`` (cache folder), ``IMAGECTL_TEST_DEBIAN_MIRROR`` (archive URL;
default: the host's apt sources, else ``http://deb.debian.org/debian``).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from tests.integration.support.logs import log_tail

STANDIN_LABEL = "org.imagectl.test.standin-key"
STANDIN_PACKAGES = ("ca-certificates", "python3", "python3-pip", "python3-venv")
SUITE_FOR_PYTHON = {"3.11": "bookworm"}
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_PATH = ("/usr/local/nvidia/bin:/usr/local/cuda/bin:"
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
# Keep the rootfs small (faster import, smaller layers); bump _ROOTFS_FORMAT when the recipe changes.
_DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
_ROOTFS_FORMAT = 1
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------------------------- daemon


def _ping(timeout: float = 5.0) -> docker.DockerClient | None:
    """Return a client for the engine named by DOCKER_HOST (or the default socket), or None if none answers."""
    try:
        client = docker.from_env(timeout=int(max(timeout, 1)))
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        return None


def docker_available() -> bool:
    """Return True when a Docker engine answers a ping (never starts one, never raises)."""
    client = _ping()
    if client is None:
        return False
    client.close()
    return True


def _can_start_local_dockerd() -> str | None:
    """Return why this process cannot start a local dockerd, or None when it can."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and host not in ("unix:///var/run/docker.sock", "unix:///run/docker.sock"):
        return f"DOCKER_HOST={host} points to a remote or custom engine, which this helper will not start"
    if os.geteuid() != 0:
        return "not running as root, so dockerd cannot be started here"
    if shutil.which("dockerd") is None:
        return "dockerd is not installed (apt-get install docker.io)"
    return None


def _start_dockerd() -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``dockerd`` in its own session, logging to a temp file; return the process and the log path."""
    fd, log_name = tempfile.mkstemp(prefix="imagectl-dockerd-", suffix=".log")
    with os.fdopen(fd, "wb") as log:
        process = subprocess.Popen(
            ["dockerd"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    return process, Path(log_name)


def ensure_dockerd(timeout: float = 60) -> docker.DockerClient:
    """Return a client for a running Docker engine, starting ``dockerd`` first if needed and allowed.

    A daemon already answering on DOCKER_HOST or the default socket is used as is. Otherwise, when we are
    root and ``dockerd`` is installed, it is started in the background (outliving this process, logging to
    a temp file) and awaited for up to ``timeout`` seconds.

    Raises:
        RuntimeError: no engine answers and none can be started, dockerd exited, or it did not answer in
            time; the message says why and carries the tail of dockerd's log.
    """
    client = _ping()
    if client is not None:
        return client
    reason = _can_start_local_dockerd()
    if reason is not None:
        raise RuntimeError(f"no Docker engine answers and none can be started: {reason}")
    process, log_path = _start_dockerd()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = _ping(timeout=2)
        if client is not None:
            return client
        if process.poll() is not None:
            raise RuntimeError(f"dockerd exited with status {process.returncode}; log {log_path}:\n"
                               f"{log_tail(log_path)}")
        time.sleep(0.5)
    raise RuntimeError(f"dockerd did not answer within {timeout:g}s; log {log_path}:\n{log_tail(log_path)}")


# --------------------------------------------------------------------------------------------- mirrors


def _one_line_sources(text: str) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(uri, suites)`` for each ``deb`` line of a one-line-style sources.list."""
    for line in text.splitlines():
        words = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()  # drop comments and [options]
        if len(words) >= 3 and words[0] == "deb":
            yield words[1], [words[2]]


def _deb822_sources(text: str) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(uri, suites)`` for each enabled ``deb`` stanza of a deb822 ``.sources`` file."""
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if ":" in line and not line.startswith(("#", " ", "\t")):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
            for uri in fields.get("uris", "").split():
                yield uri, fields.get("suites", "").split()


def host_apt_sources(root: Path = Path("/etc/apt")) -> list[tuple[str, list[str]]]:
    """Return ``(uri, suites)`` for every ``deb`` source configured on this host (empty if none)."""
    found: list[tuple[str, list[str]]] = []
    files = [root / "sources.list", *sorted((root / "sources.list.d").glob("*.list"))]
    for path in files:
        if path.is_file():
            found += _one_line_sources(path.read_text(errors="replace"))
    for path in sorted((root / "sources.list.d").glob("*.sources")):
        found += _deb822_sources(path.read_text(errors="replace"))
    return found


def debian_mirror_lines(suite: str, sources: Sequence[tuple[str, list[str]]] | None = None) -> list[str]:
    """Return the ``deb ...`` lines mmdebstrap should use for ``suite``, taken from the host's apt sources.

    The archive is ``$IMAGECTL_TEST_DEBIAN_MIRROR`` if set, else the host's source for ``suite``, else
    :data:`DEFAULT_MIRROR`. ``<suite>-updates`` uses the archive; ``<suite>-security`` is added only when the
    host has a source for it (the resulting lines also become the image's ``/etc/apt/sources.list``).
    """
    sources = host_apt_sources() if sources is None else sources
    archive = os.environ.get("IMAGECTL_TEST_DEBIAN_MIRROR") or next(
        (uri for uri, suites in sources if suite in suites), DEFAULT_MIRROR)
    lines = [f"deb {archive} {suite} main", f"deb {archive} {suite}-updates main"]
    security = next((uri for uri, suites in sources if f"{suite}-security" in suites), None)
    if security is not None:
        lines.append(f"deb {security} {suite}-security main")
    return lines


# --------------------------------------------------------------------------------------------- rootfs


def cache_dir() -> Path:
    """Return (and create) the test cache folder: ``$IMAGECTL_TEST_CACHE`` or ``~/.cache/imagectl-tests``."""
    explicit = os.environ.get("IMAGECTL_TEST_CACHE")
    base = Path(explicit) if explicit else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    path = base if explicit else base / "imagectl-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(data: Any) -> str:
    """Return a short, stable sha256 of a JSON-serialisable value."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def mmdebstrap_argv(suite: str, packages: Sequence[str], mirrors: Sequence[str], target: Path) -> list[str]:
    """Return the mmdebstrap command that writes a minbase rootfs tarball of ``suite`` to ``target``."""
    argv = ["mmdebstrap", "--variant=minbase", "--format=tar", f"--include={','.join(sorted(packages))}"]
    argv += [f"--dpkgopt=path-exclude={pattern}" for pattern in _DPKG_EXCLUDES]
    return argv + [suite, str(target), *mirrors]


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (so parallel test workers build a rootfs only once)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_mmdebstrap(argv: list[str], log_path: Path, timeout: float) -> None:
    """Run mmdebstrap, logging to ``log_path``.

    Raises:
        RuntimeError: mmdebstrap is missing, fails or runs past ``timeout``; carries the log tail.
    """
    if shutil.which(argv[0]) is None:
        raise RuntimeError("mmdebstrap is not installed (apt-get install mmdebstrap)")
    with log_path.open("wb") as log:
        try:
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"mmdebstrap ran past {timeout:g}s; log {log_path}:\n{log_tail(log_path)}") from exc
    if result.returncode != 0:
        raise RuntimeError(f"mmdebstrap failed with status {result.returncode}: {' '.join(argv)}\n"
                           f"log {log_path}:\n{log_tail(log_path)}")


def rootfs_key(suite: str, packages: Sequence[str], mirrors: Sequence[str]) -> str:
    """Return the cache key of a rootfs: a hash of suite, packages, mirrors and the recipe version."""
    return _digest({"format": _ROOTFS_FORMAT, "suite": suite, "packages": sorted(packages),
                    "mirrors": list(mirrors), "excludes": _DPKG_EXCLUDES})


def standin_rootfs(
    suite: str, packages: Sequence[str] = STANDIN_PACKAGES, timeout: float = 1800
) -> tuple[Path, str]:
    """Return ``(tarball, key)`` of a cached minbase rootfs of ``suite`` with ``packages``, building it once.

    The key hashes the suite, package list, mirrors and recipe, so a changed package list builds a new
    tarball next to the old one. Building takes a minute or two and needs root (mmdebstrap's root mode) or
    a user with subuids (its unshare mode).

    Raises:
        RuntimeError: mmdebstrap is missing or fails.
    """
    mirrors = debian_mirror_lines(suite)
    key = rootfs_key(suite, packages, mirrors)
    folder = cache_dir()
    tarball = folder / f"rootfs-{suite}-{key}.tar"
    with _file_lock(folder / f".rootfs-{key}.lock"):
        if not tarball.is_file():
            partial = folder / f"rootfs-{suite}-{key}.partial-{os.getpid()}.tar"
            try:
                _run_mmdebstrap(mmdebstrap_argv(suite, packages, mirrors, partial),
                                folder / f"rootfs-{suite}-{key}.log", timeout)
                os.replace(partial, tarball)
            finally:
                partial.unlink(missing_ok=True)
    return tarball, key


# --------------------------------------------------------------------------------------------- images


def cuda_base_env(cuda: str, nccl: str | None = None, cudnn: str | None = None) -> dict[str, str]:
    """Return the ENV an NVIDIA CUDA base image sets, for :func:`standin_base_image`.

    ``cuda_base_env("12.1.1", nccl="2.17.1-1")`` gives ``CUDA_VERSION``, ``NCCL_VERSION``, the
    ``NVIDIA_*`` variables, ``LD_LIBRARY_PATH`` and ``PATH`` as ``nvidia/cuda:12.1.1-runtime-*`` has them;
    ``cuda_base_env("12.1.1")`` (no ``nccl``) is ``nvidia/cuda:12.1.1-base-*``, which has no system NCCL;
    ``cudnn`` adds ``NV_CUDNN_VERSION`` as the ``*-cudnn8-*`` images do.
    """
    env = {
        "CUDA_VERSION": cuda,
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
        "PATH": DEFAULT_PATH,
    }
    if nccl is not None:
        env["NCCL_VERSION"] = nccl
    if cudnn is not None:
        env["NV_CUDNN_VERSION"] = cudnn
    return env


ROOTFS_REPOSITORY = "imagectl-test/standin-rootfs"


def _env_line(name: str, value: str) -> str:
    """Return a Dockerfile ``ENV name="value"`` line with the value taken literally (no ``$`` expansion).

    Raises:
        ValueError: ``name`` is not a valid variable name or ``value`` holds a newline.
    """
    if not _ENV_NAME.match(name) or "\n" in value:
        raise ValueError(f"cannot put ENV {name}={value!r} into a Dockerfile")
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'ENV {name}="{quoted}"'


_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


def standin_dockerfile(rootfs_ref: str, env: Mapping[str, str], key: str, packages: Sequence[str] = ()) -> str:
    """Return the Dockerfile that turns the rootfs image into a stand-in base image.

    It installs ``packages`` from the Debian archive (one layer; none: metadata only), sets a default ``PATH``,
    then ``env`` (sorted), ``CMD ["/bin/bash"]`` and the cache label.

    Raises:
        ValueError: an ENV name or value cannot be written (see :func:`_env_line`), or a package name is not one.
    """
    merged = {"PATH": DEFAULT_PATH, **env}
    lines = [f"FROM {rootfs_ref}"]
    if packages:
        bad = [p for p in packages if not _PACKAGE.match(p)]
        if bad:
            raise ValueError(f"not Debian package names: {bad}")
        lines.append("RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                     f"--no-install-recommends {' '.join(sorted(packages))} >/dev/null && apt-get clean && "
                     "rm -rf /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log")
    lines += [_env_line(n, v) for n, v in sorted(merged.items())]
    return "\n".join([*lines, 'CMD ["/bin/bash"]', f'LABEL {STANDIN_LABEL}="{key}"']) + "\n"


def _standin_is_current(client: docker.DockerClient, ref: str, key: str, replace_foreign: bool) -> bool:
    """Return True when the engine already has ``ref`` made by this module with cache key ``key``.

    Raises:
        RuntimeError: ``ref`` is an image that this module did not make (say, a real ``nvidia/cuda`` pulled
            on a workstation) and ``replace_foreign`` is False.
    """
    try:
        image = client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    found = (image.labels or {}).get(STANDIN_LABEL)
    if found is None and not replace_foreign:
        raise RuntimeError(f"the engine already has {ref} and it is not a stand-in; refusing to replace it "
                           "(remove it, or pass replace_foreign=True)")
    return found == key


def _import_rootfs(client: docker.DockerClient, tarball: Path, ref: str, key: str) -> None:
    """``docker import`` ``tarball`` as ``ref``, labelled with ``key`` (streamed from disk).

    Raises:
        RuntimeError: the engine refused the import.
    """
    repository, tag = split_tag(ref)
    changes = [f'LABEL {STANDIN_LABEL}="{key}"']
    try:
        answer = client.api.import_image_from_file(str(tarball), repository=repository, tag=tag, changes=changes)
    except docker.errors.APIError as exc:
        raise RuntimeError(f"docker import of {tarball} as {ref} failed: {exc}") from exc
    if '"error' in str(answer):
        raise RuntimeError(f"docker import of {tarball} as {ref} failed: {answer}")


def rootfs_image(client: docker.DockerClient, suite: str) -> str:
    """Return ``imagectl-test/standin-rootfs:<key>``, importing the cached rootfs of ``suite`` if missing.

    Raises:
        RuntimeError: building or importing the rootfs failed.
    """
    key = rootfs_key(suite, STANDIN_PACKAGES, debian_mirror_lines(suite))
    ref = f"{ROOTFS_REPOSITORY}:{suite}-{key}"
    if not _standin_is_current(client, ref, key, replace_foreign=False):
        tarball, _ = standin_rootfs(suite, STANDIN_PACKAGES)
        _import_rootfs(client, tarball, ref, key)
    return ref


def _build_metadata_image(client: docker.DockerClient, dockerfile: str, ref: str) -> None:
    """Build ``dockerfile`` (no build context; an apt RUN at most, on the host's network) and tag the result
    ``ref``.

    Raises:
        RuntimeError: the engine refused the build.
    """
    try:
        client.images.build(fileobj=io.BytesIO(dockerfile.encode("utf-8")), tag=ref, rm=True, forcerm=True,
                            pull=False, network_mode="host")
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise RuntimeError(f"could not make stand-in {ref}: {exc}") from exc


def standin_base_image(
    client: docker.DockerClient,
    ref: str,
    python: str = "3.11",
    env: Mapping[str, str] | None = None,
    replace_foreign: bool = False,
    packages: Sequence[str] = (),
) -> str:
    """Make ``ref`` (e.g. ``nvidia/cuda:12.1.1-runtime-ubuntu22.04``) a stand-in Debian image; return ``ref``.

    The image is a minbase Debian rootfs whose system ``python3`` is ``python`` (only ``3.11``, Debian
    bookworm's, is supported) with ``python3-venv``, ``python3-pip`` and ``ca-certificates``; it carries
    ``env`` (see :func:`cuda_base_env`) plus a default ``PATH`` as ENV and ``CMD ["/bin/bash"]``, and, in a
    layer of their own, ``packages`` from the Debian archive (the JIT toolchain for the ``-base`` stand-in).
    The rootfs tarball is built once (a minute or so) and cached on disk, imported once per engine
    (seconds), and each ``ref`` is a metadata-only image on top of it (about a second); nothing is redone
    when the engine already has ``ref`` with the same cache key (label :data:`STANDIN_LABEL`). An image
    under ``ref`` that this module did not make is replaced only with ``replace_foreign=True``.
    Note: bookworm's system python is PEP 668 "externally managed"; install into a venv.

    Raises:
        ValueError: ``python`` is not a supported version, or an ENV name or value cannot be written.
        RuntimeError: building, importing or tagging the image failed, or ``ref`` is a foreign image.
    """
    if python not in SUITE_FOR_PYTHON:
        raise ValueError(f"stand-in base images support python {sorted(SUITE_FOR_PYTHON)}, not {python!r}")
    suite = SUITE_FOR_PYTHON[python]
    fs_key = rootfs_key(suite, STANDIN_PACKAGES, debian_mirror_lines(suite))
    key = _digest({"rootfs": fs_key, "env": dict(env or {}), **({"packages": sorted(packages)} if packages else {})})
    dockerfile = standin_dockerfile(f"{ROOTFS_REPOSITORY}:{suite}-{fs_key}", env or {}, key, packages)
    if not _standin_is_current(client, ref, key, replace_foreign):
        rootfs_image(client, suite)
        _build_metadata_image(client, dockerfile, ref)
    return ref


# --------------------------------------------------------------------------------------------- registry


def split_tag(ref: str) -> tuple[str, str]:
    """Split ``host:port/repo:tag`` into ``(host:port/repo, tag)``; the tag defaults to ``latest``.

    Raises:
        ValueError: ``ref`` carries a digest (``@sha256:...``).
    """
    if "@" in ref:
        raise ValueError(f"expected a tagged reference, got a digest reference: {ref!r}")
    repository, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        return ref, "latest"
    return repository, tag


def _push_digest(events: Iterator[dict[str, Any]], target: str) -> str:
    """Consume a decoded push stream and return the pushed manifest digest.

    Raises:
        RuntimeError: the stream reports an error or ends without a digest.
    """
    digest = None
    for event in events:
        if "error" in event or "errorDetail" in event:
            detail = event.get("errorDetail", {}).get("message") or event.get("error")
            raise RuntimeError(f"push of {target} failed: {detail}")
        digest = (event.get("aux") or {}).get("Digest", digest)
    if digest is None:
        raise RuntimeError(f"push of {target} finished without reporting a digest")
    return str(digest)


def push_to_registry(
    client: docker.DockerClient,
    local_ref: str,
    registry_hostport: str,
    repo_tag: str,
    auth: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """Tag ``local_ref`` as ``<registry_hostport>/<repo_tag>`` and push it; return ``(pushed_ref, digest)``.

    ``repo_tag`` is ``repo[:tag]`` (tag defaults to ``latest``); ``auth`` is ``{"username", "password"}``
    for a registry started with users. The registry should be plain HTTP on loopback (see
    ``tests/integration/support/registry.py``).

    Raises:
        docker.errors.ImageNotFound: ``local_ref`` is not in the engine.
        RuntimeError: the push failed (refused credentials, unreachable registry, ...).
    """
    repository, tag = split_tag(f"{registry_hostport}/{repo_tag}")
    client.images.get(local_ref).tag(repository, tag)
    target = f"{repository}:{tag}"
    try:
        events = client.api.push(repository, tag=tag, stream=True, decode=True,
                                 auth_config=dict(auth) if auth else None)
        return target, _push_digest(events, target)
    except docker.errors.APIError as exc:
        raise RuntimeError(f"push of {target} failed: {exc}") from exc
