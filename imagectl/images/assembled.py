"""A build whose lock layers imagectl writes itself (``[build] install = "assembled"``, buildah; the default there).

The engine builds the system image from the Dockerfile, which then ends before the lock (base, Python, venv, JIT
packages, CA, ENTRYPOINT, ENV, LABEL: :func:`imagectl.render.context.assembled`).  Meanwhile the locked wheels are
downloaded on the host into a cache keyed by their sha256 (:mod:`imagectl.assemble.fetch`: a rebuild on this
machine downloads nothing; no index credential ever reaches a build).  Then, on top of the system image's layers:

1. one layer per install layer of the lock (``[framework] layers``; the extras' closure one more), holding its
   wheels installed as pip installs them and its ``lock-N-NAME.txt`` (:mod:`imagectl.assemble.install`), written by
   :class:`~imagectl.assemble.layer.LayerWriter` from the wheels' own deflated bytes, two at a time (with
   ``[registry] compression = "zstd"``, every layer this module writes is zstd instead, compressed as it is written);
2. one layer of the ``.pyc`` files the image's Python compiles from the installed ``.py`` files
   (:mod:`imagectl.assemble.compile`, in a container of the system image);
3. one layer of ``/opt/imagectl``'s files (the lock, constraints, check and entry scripts, the extras' files).

A locked package the venv already holds at another version is replaced as pip would: a layer of whiteouts of its
files comes right after the system image.  The image (its config: the system image's, with these layers'
``diff_ids`` and history entries at time 0) is written as an OCI layout (:func:`imagectl.registry.layout.write_layout`)
and loaded into the engine, where the check runs on it; the push sends the layout's own blobs (nothing is compressed
again).  Each layer is staged into the engine's store as soon as it and those below it are written
(:class:`~imagectl.engine.layer_store.LayerStager`), so the load finds them made.  Layers that change least come
first, so an upgrade of the framework moves only the layers above the CUDA one.

This module orchestrates: what runs when, on which thread, and what a failure undoes.  One stop signal
(:class:`imagectl.stop.Stop`) runs through all of it: the first failure on any thread, or an interrupt (Ctrl-C,
SIGTERM) in the main one, sets it; the engine's build and export, the downloads, the layer writers, the probe, the
staging and the early upload each end within a piece of work, and the main thread waits for them at most
:data:`GRACE_S` seconds before it removes the staged layers and raises the first failure (the work folder then goes
with the block of :func:`assembled_build`'s caller).  The engine it takes is a
:class:`~imagectl.engine.LayoutEngine` (buildah): only such an engine loads, stages and pushes layouts.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from packaging.utils import canonicalize_name

from ..assemble.compile import (PROBE_FILE, SOURCES_FILE, VENV_FILE, WAIT_S, Probe, probe_argv, probe_folder,
                                read_probe, write_sources)
from ..assemble.conflicts import LockPaths
from ..assemble.fetch import fetch_wheels
from ..assemble.install import Scheme, install_wheel, source_files, venv_scheme
from ..assemble.layer import FILE_MODE, Compression, LayerBlob, LayerWriter, blob_name, layer_compression
from ..assemble.wheel import Member, read_wheel
from ..cache import cache_dir
from ..config import Config
from ..engine import Engine, EngineBuild, LayoutEngine, LineSink, Pushed
from ..engine.layer_store import LayerStager
from ..errors import BuildError
from ..labels import BUILD_KEY, ENGINE
from ..lock.layers import split_layers
from ..lock.lockfile import LockedPackage
from ..progress.heartbeat import Heartbeat
from ..registry.layout import LayoutLayer, system_layers, write_layout
from ..registry.manifest import Descriptor
from ..render.context import CONSTRAINTS_PATH, ENTRY_PATH, EXTRAS_LOCK_FILE, LOCK_PATH, lock_layers
from ..stop import Stop, Stopped, first_error
from .context_write import write_context
from .early_upload import EarlyUpload
from .plan import Plan
from .trace import Trace

VENV = "/opt/venv"
FILES_DIR = "/opt/imagectl"
INSTALL_STEP = "imagectl: install"  # the history entry of a lock layer: "imagectl: install /opt/imagectl/FILE (pins)"
COMPILE_STEP = "imagectl: compile"
COPY_STEP = "imagectl: copy"
GRACE_S = 8.0  # how long a stopped build waits for its threads to end before it cleans up and raises
STAGED_LEDGER = "staged-layers"  # in the assemble folder: the store ids of the layers staged (imagectl.images.sweep)
_T = TypeVar("_T")


@dataclass(frozen=True)
class LayerGroup:
    """One install layer: its name, the lock file it installs (in the context and in ``/opt/imagectl``) and its
    packages."""

    name: str
    file: str
    packages: tuple[LockedPackage, ...]


@dataclass(frozen=True)
class Written:
    """A layer written and the history line that says what it holds."""

    blob: LayerBlob
    created_by: str

    def layout_layer(self) -> LayoutLayer:
        """The layer as :func:`~imagectl.registry.layout.write_layout` puts it on the system image."""
        media_type = str(self.blob.descriptor()["mediaType"])
        return LayoutLayer(self.blob.path, Descriptor(media_type, self.blob.digest, self.blob.size), self.blob.diff_id,
                           self.created_by)


@dataclass(frozen=True)
class AssembledImage:
    """The loaded image: its id in the engine, the OCI layout it came from (pushed as it is) and the engine that
    loaded it."""

    image_id: str
    layout: Path
    engine: LayoutEngine

    def push(self, repository: str, tag: str, on_line: LineSink) -> Pushed:
        """Push the layout as ``repository:tag`` (:meth:`~imagectl.engine.LayoutEngine.push_layout`)."""
        return self.engine.push_layout(self.layout, repository, tag, on_line)


def layer_groups(plan: Plan) -> list[LayerGroup]:
    """The install layers of ``plan``: the lock's (``[framework] layers``), then the extras' closure (pure)."""
    profile, spec = plan.request.profile, plan.spec
    files = [name for name, _ in lock_layers(profile, spec.install_lock)]
    groups = [LayerGroup(name, file, packages) for file, (name, packages)
              in zip(files, split_layers(spec.install_lock.packages, profile.framework.layers), strict=True)]
    added = {canonicalize_name(name) for name in spec.added}
    extras = tuple(p for p in spec.extras_lock if canonicalize_name(p.name) in added)
    if extras:
        groups.append(LayerGroup("extras", EXTRAS_LOCK_FILE, extras))
    return groups


@contextmanager
def assembled_build(plan: Plan, config: Config, engine: LayoutEngine, trace: Trace, work: Path,  # noqa: PLR0913
                    upload: EarlyUpload | None = None) -> Iterator[AssembledImage]:
    """Build ``plan``'s image as the module docstring says, with ``engine`` (a layout engine: buildah; narrow an
    Engine with :func:`imagectl.engine.select.layout_engine`), in folder ``work`` (removed when the block ends, with
    the layout); yields the loaded image.  ``upload``: each layer blob is handed to it as soon as it is written.  Raises
    BuildError (step ``build``) for a failure on the way, PackageIndexError for the index."""
    log = trace.log
    with trace.timed("build"):
        context, assemble = work / "context", work / "assemble"
        write_context(plan.context(), plan.added, context, link=True)
        groups = layer_groups(plan)
        scheme = venv_scheme(VENV, plan.request.profile.python)
        log(f"building {plan.request.profile.name} (build key {plan.key[:10]}): the system image, the lock's "
            f"{len(groups)} layers from its wheels")
        stop = trace.stop  # the build's: its first failure, or an interrupt of the thread that runs the builds
        with stop.hook(upload.abort) if upload is not None else contextlib.nullcontext():
            image = _assemble(plan, config, engine, trace, context, groups, scheme, assemble, upload, stop)
    yield image


class _Crew:
    """A thread pool of a stopped build: a task that fails sets the build's ``stop`` (the others end on it), and
    :meth:`end` after a failure cancels what has not started and waits at most :data:`GRACE_S` for the rest."""

    def __init__(self, stop: Stop, workers: int, name: str) -> None:
        self._stop, self._futures = stop, list[Future[Any]]()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"imagectl-{name}")

    def submit(self, task: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        """Run ``task(*args, **kwargs)`` on the pool; its failure (but Stopped) sets the stop."""
        future = self._pool.submit(_stopping, self._stop, task, *args, **kwargs)
        self._futures.append(future)
        return future

    def end(self, *, failed: bool) -> None:
        """Wait for every task (``failed``: cancel those not started, wait for the rest at most GRACE_S)."""
        self._pool.shutdown(wait=not failed, cancel_futures=failed)
        if failed:
            wait(self._futures, timeout=GRACE_S)


def _stopping(stop: Stop, task: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
    try:
        return task(*args, **kwargs)
    except BaseException as exc:
        if not isinstance(exc, Stopped):
            stop.set(exc)
        raise


def _assemble(plan: Plan, config: Config, engine: LayoutEngine, trace: Trace, context: Path,  # noqa: PLR0913
              groups: Sequence[LayerGroup], scheme: Scheme, work: Path, upload: EarlyUpload | None,
              stop: Stop) -> AssembledImage:
    """The system image is built (and exported) while the wheels download and their layers are written; each layer
    is staged into the engine's store as soon as it and those below it are there (``LayerStager``); then the
    ``.pyc`` layer, the files layer, the layout, and its load into the engine (which finds the staged layers made).
    A failure on the way, or an interrupt, sets ``stop``; the threads end, the staged layers no image uses are
    removed, and the first failure is raised."""
    blobs, stage = work / "blobs", work / "stage"
    blobs.mkdir(parents=True)
    stage.mkdir()
    stager = LayerStager(engine, stop=stop, ledger=work / STAGED_LEDGER)
    writers, pool = _Crew(stop, 2, "write"), _Crew(stop, 3, "build")
    try:
        with _probe_released(stage):
            image = _made(plan, config, engine, trace, context, groups, scheme, work, upload, stop, stager,
                          writers, pool)
    except BaseException as exc:
        stop.set(exc)
        for crew in (pool, writers):
            crew.end(failed=True)
        stager.close(abort=True)
        engine.discard_staged()
        reported = first_error(stop, exc)
        if reported is exc:
            raise
        raise reported from None
    for crew in (pool, writers):
        crew.end(failed=False)
    return image


def _made(plan: Plan, config: Config, engine: LayoutEngine, trace: Trace, context: Path,  # noqa: PLR0913
          groups: Sequence[LayerGroup], scheme: Scheme, work: Path, upload: EarlyUpload | None, stop: Stop,
          stager: LayerStager, writers: _Crew, pool: _Crew) -> AssembledImage:
    """The steps of :func:`_assemble`, on the main thread, the rest on ``pool`` and ``writers``."""
    log, blobs, stage = trace.log, work / "blobs", work / "stage"
    spec = EngineBuild({BUILD_KEY: plan.key, ENGINE: engine.name}, config.build_network, config.build_args,
                       no_cache=plan.request.options.no_cache, source_date_epoch=plan.source_date_epoch,
                       cache_repo=config.build_cache)
    compression = layer_compression(config.registry_compression)

    def ready(layer: LayoutLayer, *, staged: bool = True) -> None:  # a layer's blob is written: stage it, upload it
        if staged:
            stager.add(layer.diff_id, lambda: layer.path)
        if upload is not None:
            upload.add(layer.path, layer.descriptor.digest, layer.descriptor.size)

    pending = pool.submit(_lock_layers, plan, config, log, groups, scheme, blobs, stage, writers,
                          compression=compression, stop=stop)
    with Heartbeat(log, "building") as beat:
        system_id = engine.build(context, spec, beat.sink, stop=stop)
    system = pool.submit(_export, engine, system_id, work / "system", log, stop)
    argv, mounts = probe_argv(scheme.python, probe_folder(work / "probe"), stage)
    probe_run = pool.submit(engine.run_mounted, system_id, argv, mounts, timeout=WAIT_S + 600, stop=stop)
    with Heartbeat(log, "assembling") as beat:  # a line at least every 15 s: loading 5 GB takes minutes
        venv = _probe_answer(stage, VENV_FILE, probe_run, scheme, stop)
        whiteouts = _whiteout_layer(venv, groups, blobs, scheme, compression, stop)
        exported = _Exported(system, work / "system")
        for diff_id in _diff_ids(engine, system_id):  # staged before the export ends: it is not needed
            stager.add(diff_id, functools.partial(exported.blob, diff_id))  # where a layer is there already
        for system_layer in exported.layers():
            ready(system_layer, staged=False)
        written = []
        for layer in [*whiteouts, *(w for future in pending.result() for w in future.result())]:
            ready(layer.layout_layer())
            written.append(layer)
        probe = _compile(stage, probe_run, scheme, beat.sink, stop)
        top = [_pyc_layer(probe, stage, blobs, compression, stop), _files_layer(plan, blobs, compression, stop)]
        for layer in top:
            ready(layer.layout_layer())
        layout = write_layout(work / "system", [w.layout_layer() for w in [*written, *top]], work / "layout")
        beat.sink(f"loading the image into the engine ({sum(w.blob.size for w in written) / 1e9:.1f} GB of "
                  "lock layers)")
        stager.close()
        started = time.monotonic()
        image_id = engine.load_layout(layout, stop=stop)
    log(f"assembled image {image_id[:12]}: {len(written) + len(top)} layers on the system image; "
        f"{stager.describe()}; loaded into the engine in {time.monotonic() - started:.0f} s")
    return AssembledImage(image_id, layout, engine)


@contextmanager
def _probe_released(stage: Path) -> Iterator[None]:
    """On a failure, tell the probe waiting in its container for the staged sources that none are coming, so that
    it exits and the pool running it can end."""
    try:
        yield
    except BaseException:
        if not (stage / SOURCES_FILE).exists():
            write_sources(stage, None)
        raise


def _lock_layers(plan: Plan, config: Config, log: LineSink, groups: Sequence[LayerGroup],  # noqa: PLR0913
                 scheme: Scheme, blobs: Path, stage: Path, writers: _Crew | ThreadPoolExecutor, *,
                 compression: Compression = "gzip", stop: Stop | None = None) -> list[Future[list[Written]]]:
    """Download the lock's wheels (:func:`~imagectl.assemble.fetch.fetch_wheels`) layer by layer, and start writing
    each install layer on ``writers`` as soon as its wheels are there (the CUDA layer, the biggest, first); their
    futures, in the lock's order, each of the layers one install layer makes (:func:`group_layer`).  Each layer's
    wheels are checked against the layers before first (:class:`~imagectl.assemble.conflicts.LockPaths`): no lock
    layer is staged or uploaded before this returns, so a refusal comes before any of them leaves the work folder.
    ``compression``: of the layers written (``[registry] compression``); ``stop``: the build's."""
    header, framework = plan.spec.install_lock.header, plan.request.profile.framework
    futures, paths = [], LockPaths(scheme)
    for n, group in enumerate(groups):
        wheels = fetch_wheels(group.packages, header.index, plan.request.profile.python, header.platform,
                              cache_dir() / "wheels", ca_bundle=config.ca_bundle, on_line=log, stop=stop)
        paths.add(wheels.values())
        futures.append(writers.submit(group_layer, group, wheels, scheme, plan.files[group.file], blobs, stage, log,
                                      first=n == 0, own_from=framework.own_layer_mib(group.name) << 20,
                                      compression=compression, stop=stop))
    return futures


def group_layer(group: LayerGroup, wheels: dict[str, Path], scheme: Scheme, lock_file: bytes,  # noqa: PLR0913
                blobs: Path, stage: Path, log: LineSink, *, first: bool = False, own_from: int = 0,
                compression: Compression = "gzip", stop: Stop | None = None) -> list[Written]:
    """The layers of one install layer: its wheels (``wheels``: canonical name -> file; in the lock's order) and
    its lock file (``lock_file``'s bytes) in one, their ``.py`` files staged under ``stage``; with ``own_from``,
    each file a wheel stores in at least that many bytes in a layer of its own before it (``[framework] layers``'
    ``own_layer_mib``), the smallest first (then by path).  That order is for stores that key a layer by its whole
    chain (Docker's graph drivers), which pull every layer above the first one they lack: a framework's biggest
    files are its own compiled code, which every release changes (torch's ``libtorch_cuda.so``, triton's
    ``libtriton.so``), while the smaller ones are vendored tools and libraries that releases keep (``ptxas``,
    ``nvdisasm``, ``libcusparseLt``); see ``matrices/torch.toml``.  Any but the ``first`` install layer is written at
    a lower priority: the first one is staged first, the moment the system image is built, and the rest wait for it
    there anyway.  ``compression``: of every layer it writes; ``stop``: the build's, checked before each wheel and
    each piece a writer writes (raises Stopped)."""
    if not first:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    started, seen = time.monotonic(), set[str]()
    own: list[tuple[int, str, str, LayerWriter]] = []  # (stored size, path, package==version, its layer's writer)
    stem = Path(group.file).stem  # lock-3-framework: no name of the other layers' blobs (pyc, files, whiteouts)
    with (contextlib.ExitStack() as files,
          LayerWriter(blobs / blob_name(stem, compression), compression, stop=stop) as out):
        for package in group.packages:
            if stop is not None:
                stop.check()
            wheel = read_wheel(wheels[canonicalize_name(package.name)])

            def route(path: str, member: Member, pin: str = f"{package.name}=={package.version}") -> LayerWriter | None:
                if not own_from or member.stored_size < own_from:
                    return None
                writer = files.enter_context(LayerWriter(blobs / blob_name(f"{stem}+{len(own) + 1}", compression),
                                                         compression, stop=stop))
                own.append((member.stored_size, path, pin, writer))
                return writer

            seen.update(install_wheel(wheel, scheme, out, skip=seen.__contains__, route=route))
            source_files(wheel, scheme, stage)
        out.add_bytes(f"{FILES_DIR}/{group.file}", lock_file, FILE_MODE)
        layers = [Written(writer.close(), f"{INSTALL_STEP} {path} (a file of {pin})")
                  for _, path, pin, writer in sorted(own, key=lambda o: o[:2])]
    pins = " ".join(f"{p.name}=={p.version}" for p in group.packages)
    blob = out.close()
    layers.append(Written(blob, f"{INSTALL_STEP} {FILES_DIR}/{group.file} ({pins})"))
    mine = f" and {len(own)} of its files' own ({sum(w.blob.size for w in layers[:-1]) / 1e6:.1f} MB)" if own else ""
    log(f"wrote the {group.name} layer ({blob.size / 1e6:.1f} MB){mine} in {time.monotonic() - started:.0f} s")
    return layers


class _Exported:
    """The system image's layout once its export (``future``) is done: its layers, and each one's blob file by its
    diff_id."""

    def __init__(self, future: Future[None], layout: Path) -> None:
        self._future, self._layout = future, layout

    def layers(self) -> list[LayoutLayer]:
        self._future.result()
        return system_layers(self._layout)

    def blob(self, diff_id: str) -> Path:
        found = [layer.path for layer in self.layers() if layer.diff_id == diff_id]
        if not found:
            raise BuildError(f"the system image's layout has no layer {diff_id}", "build")
        return found[0]


def _diff_ids(engine: Engine, system_id: str) -> tuple[str, ...]:
    info = engine.inspect(system_id)
    if info is None or not info.diff_ids:
        raise BuildError(f"the engine does not know the system image {system_id[:12]}'s layers", "build")
    return info.diff_ids


def _export(engine: LayoutEngine, system_id: str, dest: Path, log: LineSink, stop: Stop) -> None:
    started = time.monotonic()
    engine.export_layout(system_id, dest, stop=stop)
    log(f"exported the system image in {time.monotonic() - started:.0f} s")


def _compile(stage: Path, run: Future[tuple[int, str]], scheme: Scheme, log: LineSink, stop: Stop) -> Probe:
    """Hand the probe running in a container of the system image (``run``) the staged ``.py`` files and wait for
    their ``.pyc`` files."""
    sources = [str(Path(root, name)).removeprefix(str(stage)) for root, _, names in os.walk(stage)
               for name in names if name.endswith(".py")]
    log(f"compiling {len(sources)} .py files with the image's Python")
    started = time.monotonic()
    write_sources(stage, sources)
    probe = _probe_answer(stage, PROBE_FILE, run, scheme, stop)
    log(f"compiled {len(probe.pyc)} .pyc files in {time.monotonic() - started:.0f} s")
    return probe


def _probe_answer(stage: Path, name: str, run: Future[tuple[int, str]], scheme: Scheme, stop: Stop) -> Probe:
    """The probe's file ``name`` once it is there (:mod:`imagectl.assemble.compile`), without waiting for its
    container to go (the engine may be busy with a layer); raises BuildError when the probe ended without it,
    Stopped when the build stops meanwhile."""
    while not (stage / name).exists():
        if run.done():
            status, output = run.result()
            if not (stage / name).exists():
                raise BuildError(f"the compile step in the system image failed (exit {status})", "build",
                                 output[-4000:])
        stop.wait(0.05)
        stop.check()
    return read_probe(stage, scheme, name)


def _pyc_layer(probe: Probe, stage: Path, blobs: Path, compression: Compression, stop: Stop) -> Written:
    with LayerWriter(blobs / blob_name("pyc", compression), compression, stop=stop) as out:
        for path in probe.pyc:
            out.add_bytes(path, (stage / path.lstrip("/")).read_bytes(), FILE_MODE)
    return Written(out.close(), f"{COMPILE_STEP} {len(probe.pyc)} .py files (hash-checked .pyc, PEP 552)")


def _files_layer(plan: Plan, blobs: Path, compression: Compression, stop: Stop) -> Written:
    """``/opt/imagectl``'s files, as the pip build copies them."""
    files = {LOCK_PATH: "lock.txt", CONSTRAINTS_PATH: "constraints.txt", f"{FILES_DIR}/check.py": "imagectl-check.py",
             ENTRY_PATH: "imagectl-entry.sh", f"{FILES_DIR}/extra-requirements.txt": "extra-requirements.txt",
             f"{FILES_DIR}/{EXTRAS_LOCK_FILE}": EXTRAS_LOCK_FILE}
    with LayerWriter(blobs / blob_name("files", compression), compression, stop=stop) as out:
        for path, name in sorted(files.items()):
            if name in plan.files:
                out.add_bytes(path, plan.files[name], FILE_MODE)
    return Written(out.close(), f"{COPY_STEP} {FILES_DIR} (lock, constraints, check)")


def _whiteout_layer(probe: Probe, groups: Sequence[LayerGroup], blobs: Path, scheme: Scheme,  # noqa: PLR0913
                    compression: Compression, stop: Stop) -> list[Written]:
    """A layer removing the files of each distribution the venv holds at another version than the lock's (none
    when there is none)."""
    locked = {canonicalize_name(p.name): p.version for g in groups for p in g.packages}
    old = [d for d in probe.dists if locked.get(canonicalize_name(d.name), d.version) != d.version]
    if not old:
        return []
    with LayerWriter(blobs / blob_name("whiteouts", compression), compression, stop=stop) as out:
        for dist in old:
            for path in sorted({*dist.files, dist.path}):
                if path.startswith(scheme.prefix + "/"):
                    out.add_whiteout(path)
    names = " ".join(f"{d.name}=={d.version}" for d in old)
    return [Written(out.close(), f"imagectl: remove {names} (the lock pins other versions)")]
