"""The buildah implementation of :class:`imagectl.engine.LayoutEngine` (an :class:`~imagectl.engine.Engine` that
also loads, pushes and stages assembled images), over the ``buildah`` CLI (no daemon).

Builds are reproducible: ``buildah bud --timestamp EPOCH`` writes ``EPOCH`` as every file's mtime in every layer,
as each history entry's and the config's ``created``, and the build args carry ``SOURCE_DATE_EPOCH`` into the RUN
steps (pip then writes hash-checked ``.pyc`` files, PEP 552).  RUN steps use chroot isolation unless
``BUILDAH_ISOLATION`` says otherwise: it works as root in an unprivileged pod or a nested container, and adds no
hostname, ``/etc/hosts`` or ``/etc/resolv.conf`` to a layer.

Images live in containers-storage (``/var/lib/containers`` for root, or where ``CONTAINERS_STORAGE_CONF`` says).
A name without a registry host is ``localhost/NAME`` there, as podman and buildah spell it; this module adds and
strips that prefix, so callers use the same familiar names as with Docker.

Push writes the image as an OCI layout (``buildah push oci:``, with the configured layer compression) and uploads
it with :func:`imagectl.registry.layout_push.push_layout`: each blob is asked for first (HEAD) and mounted from
another repository of the registry where one has it, so shared layers are never sent twice; the bytes really sent
are reported.  ``run`` runs the image's entrypoint and the command in a throw-away working container
(``buildah from`` + ``buildah run``), as ``docker run`` would; GPUs need podman (CDI ``nvidia.com/gpu=all``).

What a build leaves if it dies: its long-running buildah calls end with it (:mod:`.process`: a build's stop, an
interrupt, or the parent-death signal after ``kill -9``), and ``buildah bud --force-rm`` removes its working
containers when it fails or is told to end (without it, every failed build kept one).  The working containers imagectl
makes itself are named after the process that made them (:func:`run_container_name`: ``imagectl-run-PID.START-HEX``,
:mod:`imagectl.owner`), so the next build, or ``imagectl sweep``, removes those of a process that is gone
(:meth:`BuildahEngine.leftover_containers`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import BuildError, EngineError, NotFoundError
from ..owner import Owner, this_process
from ..redact import redact
from ..reference import PINNED_FROM
from ..registry.layout import link_or_copy
from ..stop import Stop
from . import TAIL_LINES, EngineBuild, EngineName, ImageInfo, KnownLayers, LayoutEngine, LineSink, Pushed, Staged
from .layer_store import LayerStore, storage_layer_id
from .process import child, run_child

LOCAL_HOST = "localhost"
COMPRESSIONS = ("gzip", "zstd")
_RUN_TIMEOUT_S = 600
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

# How the engine uploads an OCI layout to a registry: (layout dir, "host/path", tag, progress) -> Pushed.
LayoutPusher = Callable[[Path, str, str, LineSink], Pushed]


def qualified(name: str) -> str:
    """``name`` as containers-storage spells it: ``localhost/NAME`` when its first component names no registry."""
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == LOCAL_HOST):
        return name
    return f"{LOCAL_HOST}/{name}"


def familiar(name: str) -> str:
    """The inverse of :func:`qualified`."""
    return name.removeprefix(f"{LOCAL_HOST}/")


class BuildahEngine(LayoutEngine):
    """:class:`LayoutEngine` over the ``buildah`` program.  ``pusher`` uploads an OCI layout (see the module doc);
    ``compression`` is the layer compression of pushes (``gzip`` or ``zstd``)."""

    name: EngineName = "buildah"
    reproducible = True

    def __init__(self, pusher: LayoutPusher | None = None, compression: str = "gzip", *,
                 insecure: Callable[[str], bool] = lambda host: False, binary: str | None = None) -> None:
        found = binary or shutil.which("buildah")
        if found is None:
            raise EngineError("buildah is not installed (apt-get install buildah)")
        if compression not in COMPRESSIONS:
            raise EngineError(f"buildah: unknown layer compression {compression!r} (gzip or zstd)")
        self._binary, self._pusher, self._compression, self._insecure = found, pusher, compression, insecure
        self._pushed: dict[str, set[str]] = {}  # image id -> "host/path@digest" this engine pushed it as
        self._layouts: dict[str, Path] = {}  # image id -> the OCI layout load_layout loaded it from
        self._store: LayerStore | None | bool = False  # False: not looked up yet (stage_layer)
        self._staged: list[str] = []  # layer ids stage_layer imported that no loaded image uses yet
        self._version = self._run(["version", "--json"], "version", parse=json.loads).get("version", "unknown")

    def version(self) -> str:
        """buildah's version, e.g. ``1.28.2``."""
        return str(self._version)

    # ------------------------------------------------------------------------------------------ images

    def list_tags(self, repository: str) -> list[str]:
        """The local tags of ``repository`` (familiar name), without the repository part."""
        prefix = f"{qualified(repository)}:"
        images = self._images(["images", "--json"])
        return sorted({n[len(prefix):] for i in images for n in (i.get("names") or ()) if n.startswith(prefix)})

    def inspect(self, ref: str) -> ImageInfo | None:
        """The local image ``ref`` (name or id), or None."""
        done = self._call(["inspect", "--type", "image", _local_ref(ref)])
        if done.returncode != 0:
            if "image not known" in done.stderr or "not found" in done.stderr or "no such" in done.stderr.lower():
                return None
            raise EngineError(f"buildah: inspect {ref}: {_last(done.stderr)}")
        data = json.loads(done.stdout)
        image_id = str(data.get("FromImageID", ""))
        return _info(data, self._names_of(image_id), tuple(sorted(self._pushed.get(image_id, ()))))

    def _names_of(self, image_id: str) -> tuple[str, ...]:
        images = self._images(["images", "--json", "--no-trunc"])
        for image in images:
            if str(image.get("id", "")).removeprefix("sha256:") == image_id.removeprefix("sha256:"):
                return tuple(familiar(n) for n in image.get("names") or ())
        return ()

    def build(self, context: Path, spec: EngineBuild, on_line: LineSink, *, stop: Stop | None = None) -> str:
        """Build ``context`` as ``spec`` says (``--layers``: each step is cached in containers-storage); streams
        each output line to ``on_line``; returns the image id.  Raises BuildError carrying the last lines, Stopped
        when ``stop`` was set meanwhile (the build ended)."""
        with tempfile.TemporaryDirectory(prefix=temporary_prefix("buildah")) as tmp:
            iidfile = Path(tmp) / "iid"
            dockerfile = context / "Dockerfile"
            hosts = [*_from_hosts(dockerfile), *([spec.cache_repo.split("/", 1)[0]] if spec.cache_repo else [])]
            dockerfile = self._with_canonical_bases(dockerfile, Path(tmp), spec.platform, on_line)
            argv = [*self._bud_options(spec), *self._registry_options(hosts),
                    "--iidfile", str(iidfile), "-f", str(dockerfile), str(context)]
            tail = self._stream(argv, on_line, stop)
            image_id = iidfile.read_text().strip() if iidfile.exists() else ""
        if not image_id:
            raise BuildError("build finished without an image id", "build", "\n".join(tail))
        return image_id.removeprefix("sha256:")

    def _with_canonical_bases(self, dockerfile: Path, tmp: Path, platform: str | None, on_line: LineSink) -> Path:
        """``dockerfile``, or a copy in ``tmp`` whose ``FROM``s pinned by digest name the base as
        :func:`canonical_base` spells it.  buildah writes the ``FROM`` reference into the image's history (its
        ``comment``), so a base pulled through a mirror, a team copy or a registry on another port would give the
        same layers another config and image digest; the canonical name depends on the digest alone."""
        text = dockerfile.read_text(encoding="utf-8")
        named: dict[str, str] = {}

        def canonical(match: re.Match[str]) -> str:
            ref = match[2] + match[3]
            if ref not in named:
                named[ref] = self._canonical_base(ref, platform, on_line)
            return match[1] + named[ref]

        text = PINNED_FROM.sub(canonical, text)
        if not named:
            return dockerfile
        copy = tmp / "Dockerfile"
        copy.write_text(text, encoding="utf-8")
        return copy

    def _canonical_base(self, ref: str, platform: str | None, on_line: LineSink) -> str:
        """The local name of base ``ref`` (``HOST/PATH@sha256:...``) by its digest, pulled and named first where
        containers-storage has no image under that name (a second build, or a concurrent one, finds it)."""
        name = canonical_base(ref, platform)
        if self._call(["inspect", "--type", "image", name]).returncode == 0:
            return name
        argv = ["pull", "--quiet", *(["--platform", platform] if platform else []),
                *self._registry_options([ref.split("/", 1)[0]]), ref]
        on_line(f"pulling the base {ref}")
        image_id = self._run(argv, f"pull {ref}", failure=BuildError, step="build").strip().splitlines()[-1]
        self._run(["tag", image_id, name], f"name the base {ref}", failure=BuildError, step="build")
        return name

    @staticmethod
    def _bud_options(spec: EngineBuild) -> list[str]:
        argv = ["bud", "--layers", "--force-rm", "--format", "oci"]
        if not os.environ.get("BUILDAH_ISOLATION"):
            argv += ["--isolation", "chroot"]
        if spec.network and spec.network != "default":
            argv += ["--network", "private" if spec.network == "bridge" else spec.network]
        if spec.no_cache:
            argv.append("--no-cache")
        if spec.platform:
            argv += ["--platform", spec.platform]
        if spec.cache_repo:  # unchanged layers come from (and new ones go to) the registry: a fresh runner reuses them
            argv += ["--cache-from", spec.cache_repo, "--cache-to", spec.cache_repo]
        build_args = dict(spec.build_args)
        if spec.source_date_epoch is not None:
            argv += ["--timestamp", str(spec.source_date_epoch)]
            build_args.setdefault("SOURCE_DATE_EPOCH", str(spec.source_date_epoch))
        for key, value in sorted(build_args.items()):
            argv += ["--build-arg", f"{key}={value}"]
        for key, value in sorted(spec.labels.items()):
            argv += ["--label", f"{key}={value}"]
        return argv

    def tag(self, image: str, repository: str, tag: str) -> None:
        """Point local ``repository:tag`` at ``image``."""
        if not _TAG.match(tag):
            raise EngineError(f"buildah: bad tag {tag!r}")
        self._run(["tag", _local_ref(image), f"{qualified(repository)}:{tag}"], f"tag {repository}:{tag}")
        loaded = image.removeprefix("sha256:")
        if loaded in self._layouts:  # an assembled image has its own name now: the load's name goes
            self.untag(f"{ASSEMBLED_REPO}:sha256-{loaded}")

    def untag(self, ref: str) -> None:
        """Remove local tag ``ref``; the image stays while another name or container uses it (``rmi`` of one of
        several names removes only that name)."""
        done = self._call(["rmi", _local_ref(ref)])
        if done.returncode != 0 and "image not known" not in done.stderr and "not found" not in done.stderr:
            raise EngineError(f"buildah: untag {ref}: {_last(done.stderr)}")

    def push(self, repository: str, tag: str, on_line: LineSink) -> Pushed:
        """Push ``repository:tag`` (``host/path``) blob by blob through the layout pusher; the bytes it sent."""
        if self._pusher is None:
            raise BuildError(f"push of {repository}:{tag}: this engine was made without a registry", "push")
        with tempfile.TemporaryDirectory(prefix=temporary_prefix("push")) as tmp:
            layout = Path(tmp) / "layout"
            on_line(f"push: writing {repository}:{tag} as an OCI layout ({self._compression} layers)")
            self._run(["push", "--quiet", "--format", "oci", "--compression-format", self._compression,
                       f"{qualified(repository)}:{tag}", f"oci:{layout}:{tag}"], f"push {repository}:{tag}",
                      failure=BuildError, step="push")
            pushed = self._pusher(layout, repository, tag, on_line)
        info = self.inspect(f"{repository}:{tag}")
        if info is not None:
            self._pushed.setdefault(info.id, set()).add(f"{repository}@{pushed.digest}")
        return pushed

    def pull(self, ref: str, on_line: LineSink) -> ImageInfo:
        """Pull ``ref``; raises NotFoundError if the registry has no such image, EngineError otherwise."""
        done = self._call(["pull", "--quiet", *self._registry_options([ref.split("/", 1)[0]]), ref])
        if done.returncode != 0:
            text = done.stderr.lower()
            if "manifest unknown" in text or "not found" in text or "name unknown" in text:
                raise NotFoundError(f"pull {ref}: no such image")
            raise EngineError(f"pull {ref}: {_last(done.stderr)}")
        on_line(f"pulled {ref}")
        info = self.inspect(ref)
        if info is None:
            raise EngineError(f"pull {ref}: the engine has no image after pulling")
        return info

    def run(self, image: str, command: list[str], network: str | None = None, *,
            gpus: bool = False) -> tuple[int, str]:
        """Run the image's entrypoint with ``command`` in a throw-away working container; (exit status, output)."""
        if gpus:
            return self._run_with_podman(image, command, network)
        info = self._run(["inspect", "--type", "image", _local_ref(image)], f"inspect {image}", parse=json.loads)
        config = (info.get("OCIv1") or {}).get("config") or {}
        entrypoint = list(config.get("Entrypoint") or ())
        name = run_container_name()
        self._run(["from", "--pull-never", "--name", name, _local_ref(image)], f"run {image}")
        try:
            argv = ["run", "--isolation", os.environ.get("BUILDAH_ISOLATION") or "chroot"]
            if network and network != "default":
                argv += ["--network", "private" if network == "bridge" else network]
            done = self._long([*argv, name, "--", *entrypoint, *command], timeout=_RUN_TIMEOUT_S)
            return done.returncode, done.stdout + done.stderr
        finally:
            self._call(["rm", name])

    def _run_with_podman(self, image: str, command: list[str], network: str | None) -> tuple[int, str]:
        podman = shutil.which("podman")
        if podman is None:
            raise EngineError("buildah: a GPU check needs podman with the NVIDIA CDI spec (nvidia-ctk cdi generate)")
        argv = [podman, "run", "--rm", "--device", "nvidia.com/gpu=all"]
        if network and network != "default":
            argv += ["--network", network]
        done = subprocess.run([*argv, _local_ref(image), *command], capture_output=True, text=True, check=False,
                              timeout=_RUN_TIMEOUT_S)
        return done.returncode, done.stdout + done.stderr

    def run_mounted(self, image: str, argv: list[str], mounts: Mapping[Path, str], *,  # noqa: PLR0913
                    timeout: float | None = None, stop: Stop | None = None) -> tuple[int, str]:
        """Run ``argv`` (not the image's entrypoint) in a throw-away working container of ``image``, each host folder
        of ``mounts`` bind-mounted read-write at its path in the container, for at most ``timeout`` seconds (default
        600); (exit status, output).  Its stdin is a pipe held open until this returns (its end: imagectl is gone);
        ``stop`` ends it (raises Stopped).  (Chroot isolation has only the host's network: callers run fixed
        programs of their own that use none.)"""
        name = run_container_name()
        self._run(["from", "--pull-never", "--name", name, _local_ref(image)], f"run {image}")
        try:
            volumes = [arg for host, inside in sorted(mounts.items()) for arg in ("--volume", f"{host}:{inside}:rw")]
            done = self._long(["run", "--isolation", os.environ.get("BUILDAH_ISOLATION") or "chroot",
                               *volumes, name, "--", *argv], timeout=timeout or _RUN_TIMEOUT_S, stop=stop,
                              hold_stdin=True)
            return done.returncode, done.stdout + done.stderr
        finally:
            self._call(["rm", name])

    def load_layout(self, layout: Path, *, stop: Stop | None = None) -> str:
        """Load the OCI layout ``layout`` (one image) into containers-storage as
        ``localhost/imagectl-assembled:sha256-HEX`` (HEX: its id; the name goes when :meth:`tag` names it, so a
        pruned tag frees the image); returns the image id.  Its blobs are remembered, so
        :meth:`push_layout` and :meth:`export_layout` use them as they are.  buildah names an image it loads from a
        layout after the layout's path, which must then be an image name: it loads it through a symbolic link of
        such a name in the temporary folder, removed again.  Raises BuildError (step ``build``) when it cannot,
        Stopped when ``stop`` was set meanwhile."""
        link = _layout_link()
        try:
            link.symlink_to(layout.resolve(), target_is_directory=True)
            out = self._run(["pull", "--quiet", f"oci:{link}"], f"load {layout}", failure=BuildError, step="build",
                            stop=stop)
            image_id = out.strip().splitlines()[-1].removeprefix("sha256:")
            self._run(["tag", image_id, f"{ASSEMBLED_REPO}:sha256-{image_id}"], "name the assembled image",
                      failure=BuildError, step="build")
            self.untag(f"{LOCAL_HOST}{link}:latest")
        except OSError as exc:
            raise BuildError(f"cannot link {layout} as {link}: {exc.strerror or exc}", "build") from None
        finally:
            link.unlink(missing_ok=True)
        self._layouts[image_id] = layout
        self._staged.clear()  # the image uses them now
        return image_id

    def stage_layer(self, diff_ids: Sequence[str], blob: Callable[[], Path], *, stop: Stop | None = None) -> Staged:
        """Put the last layer of ``diff_ids`` (an image's layers from the bottom up; each lower one staged or already
        there) into containers-storage from its blob file (``blob()`` says where: asked only when the layer must be
        imported), under the id a pull of that image gives it, so that :meth:`load_layout` finds it made
        (:mod:`.layer_store`).  ``imported``, ``present`` (another build or pull made it), or ``unsupported`` where
        the ``containers-storage`` program is missing or the store is rootless.
        Raises EngineError when the store refuses the layer, BuildError when the store's layer of that id does not
        hold ``diff_ids[-1]`` (a pull would trust it), Stopped when ``stop`` was set meanwhile (the import ended; the
        store removes a layer it did not finish)."""
        store = self._layer_store()
        if store is None:
            return "unsupported"
        layer_id, expected = storage_layer_id(diff_ids), diff_ids[-1]
        how: Staged = "present"
        found = store.layer(layer_id)
        if found is None:
            try:
                store.put(layer_id, storage_layer_id(diff_ids[:-1]) if len(diff_ids) > 1 else "", blob(), stop=stop)
                self._staged.append(layer_id)
                how = "imported"
            except EngineError:
                if store.layer(layer_id) is None:  # not a concurrent build's import of the same layer
                    raise
            found = store.layer(layer_id)
        if found is None or found.diff_digest != expected:
            if layer_id in self._staged and store.delete(layer_id):
                self._staged.remove(layer_id)
            held = found.diff_digest if found else "nothing"
            raise BuildError(f"containers-storage: layer {layer_id[:12]} holds {held or 'no digest'}, not the layer "
                             f"{expected} it stands for: the image is not loaded", "build")
        return how

    def discard_staged(self) -> None:
        """Remove the layers :meth:`stage_layer` imported that no loaded image uses (a build that failed on the
        way), the top ones first; one another build uses now stays."""
        store = self._layer_store()
        while store is not None and self._staged:
            store.delete(self._staged.pop())

    def _layer_store(self) -> LayerStore | None:
        if self._store is False:
            info = self._call(["info"])
            try:
                store = json.loads(info.stdout).get("store") if info.returncode == 0 else None
            except ValueError:
                store = None
            self._store = LayerStore.of(store) if isinstance(store, dict) else None
        return self._store if isinstance(self._store, LayerStore) else None

    def push_layout(self, layout: Path, repository: str, tag: str, on_line: LineSink) -> Pushed:
        """Push the OCI layout ``layout`` (the image :meth:`load_layout` loaded) as ``repository:tag``, blob by blob
        through the layout pusher, its blobs as they are; the bytes it sent."""
        if self._pusher is None:
            raise BuildError(f"push of {repository}:{tag}: this engine was made without a registry", "push")
        pushed = self._pusher(layout, repository, tag, on_line)
        info = self.inspect(f"{repository}:{tag}")
        if info is not None:
            self._pushed.setdefault(info.id, set()).add(f"{repository}@{pushed.digest}")
        return pushed

    def export_layout(self, image: str, dest: Path, *, known: KnownLayers | None = None,
                      stop: Stop | None = None) -> None:
        """Write ``image`` as an OCI image layout in ``dest``, layers compressed as pushes compress them; an image
        :meth:`load_layout` loaded from a layout that is still there is that layout (its files linked).  ``known`` is
        not asked: buildah compresses every layer itself, and the push skips the blobs the registry has.  Raises
        Stopped when ``stop`` was set meanwhile."""
        loaded = self._layouts.get(image.removeprefix("sha256:"))
        if loaded is not None and (loaded / "index.json").is_file():
            shutil.copytree(loaded, dest, copy_function=link_or_copy, dirs_exist_ok=True)
            return
        self._run(["push", "--quiet", "--format", "oci", "--compression-format", self._compression,
                   _local_ref(image), f"oci:{dest}"], f"export {image}", stop=stop)

    def share_with_docker(self, image: str, repository: str, tags: tuple[str, ...]) -> bool:
        """Copy ``image`` into the local Docker daemon as ``repository:TAG`` for each of ``tags`` (``buildah push
        docker-daemon:``; the layers are sent once), so ``docker run`` finds an image built without a registry;
        False where no daemon answers on a unix socket."""
        from .docker import daemon_answers, tag_over_socket  # the socket only: they load no Docker SDK

        if not tags or not daemon_answers():
            return False
        first = f"{repository}:{tags[0]}"
        self._run(["push", "--quiet", _local_ref(image), f"docker-daemon:{first}"], f"copy {first} to Docker")
        for tag in tags[1:]:
            tag_over_socket(first, repository, tag)
        return True

    # ------------------------------------------------------------------------------------------ plumbing

    def _registry_options(self, hosts: Sequence[str]) -> list[str]:
        """Credentials from the Docker config imagectl reads (``$DOCKER_CONFIG``), and plain HTTP where a host is
        loopback or marked insecure (containers/image, unlike dockerd, trusts no registry without TLS)."""
        argv = []
        config = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
        if paths.is_file(config, what="the Docker config"):
            argv += ["--authfile", str(config)]
        if any(self._insecure(host) for host in hosts):
            argv.append("--tls-verify=false")
        return argv

    def _call(self, args: Sequence[str], timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([self._binary, *args], capture_output=True, text=True, check=False,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise EngineError(f"buildah {args[0]}: no answer within {timeout:g}s") from None
        except OSError as exc:
            raise EngineError(f"buildah {args[0]}: {exc.strerror or exc}") from None

    def _long(self, args: Sequence[str], *, timeout: float | None = None, stop: Stop | None = None,
              hold_stdin: bool = False) -> subprocess.CompletedProcess[str]:
        """A call that may take long (:mod:`.process`: it ends with the build's ``stop`` and with imagectl)."""
        try:
            return run_child([self._binary, *args], stop=stop, timeout=timeout, hold_stdin=hold_stdin)
        except subprocess.TimeoutExpired:
            raise EngineError(f"buildah {args[0]}: no answer within {timeout:g}s") from None
        except OSError as exc:
            raise EngineError(f"buildah {args[0]}: {exc.strerror or exc}") from None

    def _run(self, args: Sequence[str], what: str, *, parse: Callable[[str], Any] | None = None,  # noqa: PLR0913
             failure: type[Exception] = EngineError, step: str = "", stop: Stop | None = None) -> Any:
        done = self._long(args, stop=stop) if stop is not None else self._call(args)
        if done.returncode != 0:
            message = f"buildah: {what}: {redact(_last(done.stderr))}"
            raise BuildError(message, step, done.stderr[-4000:]) if failure is BuildError else failure(message)
        return parse(done.stdout) if parse else done.stdout

    def _stream(self, args: Sequence[str], on_line: LineSink, stop: Stop | None = None) -> deque[str]:
        """Run a build, each line of its output to ``on_line``; the last lines.  Ends it with ``stop`` (raises
        Stopped) or an interrupt (:mod:`.process`); raises BuildError when it fails."""
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        try:
            with child([self._binary, *args], stop=stop) as process:
                assert process.stdout is not None
                for line in process.stdout:
                    line = line.rstrip("\n")
                    if line.strip():
                        tail.append(line)
                        on_line(line)
        except OSError as exc:
            raise BuildError(f"build failed: buildah: {exc.strerror or exc}", "build") from None
        if stop is not None:
            stop.check()
        if process.returncode != 0:
            last = next((line for line in reversed(tail) if line.strip()), "buildah bud failed")
            raise BuildError(f"build failed: {last}", "build", "\n".join(tail))
        return tail

    # ------------------------------------------------------------------------------------------ leftovers

    def leftover_containers(self) -> list[tuple[str, Owner]]:
        """The working containers imagectl made (:func:`run_container_name`) whose process is gone: (name, its
        owner)."""
        listed = self._containers()
        found = [(str(c.get("containername") or ""), container_owner(str(c.get("containername") or "")))
                 for c in listed]
        return [(name, owner) for name, owner in found if owner is not None and not owner.alive()]

    def _images(self, args: list[str], attempts: int = 5) -> list[dict[str, Any]]:
        """``buildah images --json ...``, asked again when another process was writing or removing an image while it
        listed them (containers/storage then fails with 'locating item named "manifest" ... file does not exist' or
        'image not known'): the store is shared by every build of the host."""
        for _ in range(attempts - 1):
            done = self._call(args)
            if done.returncode == 0:
                return _json_list(done.stdout)
            if "file does not exist" not in done.stderr and "not known" not in done.stderr:
                break
            time.sleep(0.2)
        return self._run(args, "images", parse=_json_list)

    def _containers(self, attempts: int = 5) -> list[dict[str, Any]]:
        """``buildah containers --json``, asked again when a container went while it listed them (buildah then
        fails with "container not known")."""
        for _ in range(attempts - 1):
            done = self._call(["containers", "--json"])
            if done.returncode == 0:
                return _json_list(done.stdout)
            if "not known" not in done.stderr:
                break
        return self._run(["containers", "--json"], "containers", parse=_json_list)

    def remove_container(self, name: str) -> str:
        """Remove the working container ``name`` (unmounted first by buildah); "" when it went, else why not."""
        done = self._call(["rm", name])
        return "" if done.returncode == 0 else _last(done.stderr)

    def discard_layers(self, layer_ids: Sequence[str], *, dry_run: bool = False) -> list[str]:
        """Remove those of the store's layers ``layer_ids`` (ids :meth:`stage_layer` gave them) that no image,
        container or other layer uses, the last first; the ids removed (``dry_run``: those in the store, none
        removed).  Where the ``containers-storage`` program is missing, none."""
        store = self._layer_store()
        if store is None:
            return []
        there = [layer_id for layer_id in layer_ids if store.layer(layer_id) is not None]
        return there if dry_run else [layer_id for layer_id in reversed(there) if store.delete(layer_id)]


CANONICAL_BASE_REPO = f"{LOCAL_HOST}/imagectl-base"
ASSEMBLED_REPO = f"{LOCAL_HOST}/imagectl-assembled"
_LAYOUT_PATH = re.compile(r"(/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+")


_TEMPORARY = re.compile(r"imagectl-(?:push|buildah)-(?P<owner>[0-9]+\.[0-9]+)-.+")


def temporary_prefix(kind: str) -> str:
    """How a temporary folder of this process begins: ``imagectl-KIND-PID.START-`` (a push writes a whole image
    there)."""
    return f"imagectl-{kind}-{this_process().token}-"


def temporary_owner(name: str) -> Owner | None:
    """The process a temporary folder named by :func:`temporary_prefix` belongs to (None: another name)."""
    match = _TEMPORARY.fullmatch(name)
    return Owner.parse(match["owner"]) if match else None


_RUN_CONTAINER = re.compile(r"imagectl-run-(?P<owner>[0-9]+\.[0-9]+)-[0-9a-f]{12}")


def run_container_name() -> str:
    """A fresh name for a working container of this process: ``imagectl-run-PID.START-HEX``."""
    return f"imagectl-run-{this_process().token}-{uuid.uuid4().hex[:12]}"


def container_owner(name: str) -> Owner | None:
    """The process a working container named by :func:`run_container_name` belongs to (None: another name)."""
    match = _RUN_CONTAINER.fullmatch(name)
    return Owner.parse(match["owner"]) if match else None


def canonical_base(ref: str, platform: str | None = None) -> str:
    """The name a base pinned by digest gets in containers-storage: ``localhost/imagectl-base:sha256-HEX`` (with
    ``-linux-arm64`` for a platform), the same whichever registry, mirror or team copy it came from."""
    algorithm, _, hexdigest = ref.rpartition("@")[2].partition(":")
    suffix = f"-{platform.replace('/', '-')}" if platform else ""
    return f"{CANONICAL_BASE_REPO}:{algorithm}-{hexdigest}{suffix}"


def _from_hosts(dockerfile: Path) -> list[str]:
    """The registry hosts the ``FROM`` lines of ``dockerfile`` pull from (stage names and ``scratch`` are none)."""
    hosts, stages = [], set()
    for line in dockerfile.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "FROM":
            image = next((w for w in words[1:] if not w.startswith("--")), "")
            if len(words) >= 4 and words[-2].upper() == "AS":
                stages.add(words[-1].lower())
            first, _, rest = image.partition("/")
            if rest and ("." in first or ":" in first) and image.lower() not in stages:
                hosts.append(first)
    return hosts


def _layout_link() -> Path:
    """A path for a symbolic link to a layout that is also an image name (:meth:`BuildahEngine.load_layout`): in the
    first temporary folder whose path is one (``$TMPDIR``, ``/tmp``, ``/var/tmp``), named by random hex digits."""
    for folder in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if _LAYOUT_PATH.fullmatch(folder) and os.access(folder, os.W_OK):
            return Path(folder) / f"imagectl-layout-{uuid.uuid4().hex[:16]}"
    raise BuildError("no temporary folder whose path is an image name (lowercase letters, digits, ._-/) to load "
                     "an assembled image through: set TMPDIR to one", "build")


def _local_ref(ref: str) -> str:
    """A reference for containers-storage: ids and digests as they are, names qualified."""
    bare = ref.removeprefix("sha256:")
    if re.fullmatch(r"[0-9a-f]{12,64}", bare):
        return bare
    return qualified(ref)


def _info(data: Mapping[str, Any], names: tuple[str, ...], repo_digests: tuple[str, ...]) -> ImageInfo:
    oci = data.get("OCIv1") or {}
    config = oci.get("config") or {}
    try:
        manifest = json.loads(data.get("Manifest") or "{}")
    except ValueError:
        manifest = {}
    size = sum(int(layer.get("size") or 0) for layer in manifest.get("layers") or () if isinstance(layer, dict))
    diff_ids = tuple(map(str, (oci.get("rootfs") or {}).get("diff_ids") or ()))
    return ImageInfo(id=str(data.get("FromImageID", "")), tags=names, repo_digests=repo_digests,
                     labels=dict(config.get("Labels") or {}), size=size, created=str(oci.get("created") or ""),
                     diff_ids=diff_ids)


def _json_list(text: str) -> list[dict[str, Any]]:
    found = json.loads(text or "[]")
    return [item for item in found or () if isinstance(item, dict)]


def _last(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "failed"
