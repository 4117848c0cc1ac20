"""A build whose lock layers imagectl writes itself (``[build] install = "assembled"``, buildah; the default there).

The engine builds the system image from the Dockerfile, which then ends before the lock (base, Python, venv, JIT
packages, CA, ENTRYPOINT, ENV, LABEL: :func:`imagectl.render.context.assembled`).  Meanwhile the locked wheels are
downloaded on the host into a cache keyed by their sha256 (:mod:`imagectl.assemble.fetch`: a rebuild on this
machine downloads nothing; no index credential ever reaches a build).  Then, on top of the system image's layers:

1. one layer per install layer of the lock (``[framework] layers``; the extras' closure one more), holding its
   wheels installed as pip installs them and its ``lock-N-NAME.txt`` (:mod:`imagectl.assemble.install`), written by
   :class:`~imagectl.assemble.layer.LayerWriter` from the wheels' own deflated bytes, two at a time;
2. one layer of the ``.pyc`` files the image's Python compiles from the installed ``.py`` files
   (:mod:`imagectl.assemble.compile`, in a container of the system image);
3. one layer of ``/opt/imagectl``'s files (the lock, constraints, check and entry scripts, the extras' files).

A locked package the venv already holds at another version is replaced as pip would: a layer of whiteouts of its
files comes right after the system image.  The image (its config: the system image's, with these layers'
``diff_ids`` and history entries at time 0) is written as an OCI layout and loaded into the engine, where the check
runs on it; the push sends the layout's own blobs (nothing is compressed again).  Layers that change least come
first, so an upgrade of the framework moves only the layers above the CUDA one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..assemble.compile import PROBE, STAGE, Probe, read_probe, write_sources
from ..assemble.fetch import fetch_wheels
from ..assemble.install import Scheme, install_wheel, source_files, venv_scheme
from ..assemble.layer import FILE_MODE, LayerBlob, LayerWriter
from ..assemble.wheel import read_wheel
from ..cache import cache_dir
from ..config import Config
from ..engine import Engine, EngineBuild, LineSink
from ..errors import BuildError
from ..labels import BUILD_KEY, ENGINE
from ..lock.layers import split_layers
from ..lock.lockfile import LockedPackage
from ..progress.heartbeat import Heartbeat
from ..registry.layout import blob_path, link_or_copy, read_small_blob, root_manifest
from ..registry.manifest import sha256_digest
from ..render.context import CONSTRAINTS_PATH, ENTRY_PATH, EXTRAS_LOCK_FILE, LOCK_PATH, lock_layers
from .context_write import write_context
from .plan import Plan
from .trace import Trace

VENV = "/opt/venv"
FILES_DIR = "/opt/imagectl"
EPOCH = "1970-01-01T00:00:00Z"
INSTALL_STEP = "imagectl: install"  # the history entry of a lock layer: "imagectl: install /opt/imagectl/FILE (pins)"
COMPILE_STEP = "imagectl: compile"
COPY_STEP = "imagectl: copy"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


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


@dataclass(frozen=True)
class AssembledImage:
    """The loaded image: its id in the engine and the OCI layout it came from (pushed as it is)."""

    image_id: str
    layout: Path


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
def assembled_build(plan: Plan, config: Config, engine: Engine, trace: Trace, work: Path) -> Iterator[AssembledImage]:
    """Build ``plan``'s image as the module docstring says, in folder ``work`` (removed when the block ends, with the
    layout); yields the loaded image.  Raises BuildError (step ``build``) for a failure on the way, PackageIndexError
    for the index."""
    log = trace.log
    with trace.timed("build"):
        context, assemble = work / "context", work / "assemble"
        write_context(plan.context(), plan.added, context, link=True)
        groups = layer_groups(plan)
        scheme = venv_scheme(VENV, plan.request.profile.python)
        log(f"building {plan.request.profile.name} (build key {plan.key[:10]}): the system image, the lock's "
            f"{len(groups)} layers from its wheels")
        image = _assemble(plan, config, engine, trace, context, groups, scheme, assemble)
    yield image


def _assemble(plan: Plan, config: Config, engine: Engine, trace: Trace, context: Path,  # noqa: PLR0913
              groups: Sequence[LayerGroup], scheme: Scheme, work: Path) -> AssembledImage:
    """The system image is built (and exported) while the wheels download and their layers are written; then the
    ``.pyc`` layer, the files layer, the layout, and its load into the engine."""
    log, blobs, stage = trace.log, work / "blobs", work / "stage"
    blobs.mkdir(parents=True)
    stage.mkdir()
    spec = EngineBuild({BUILD_KEY: plan.key, ENGINE: engine.name}, config.build_network, config.build_args,
                       no_cache=plan.request.options.no_cache, source_date_epoch=plan.source_date_epoch,
                       cache_repo=config.build_cache)
    with ThreadPoolExecutor(max_workers=2) as pool:
        layers = pool.submit(_lock_layers, plan, config, log, groups, scheme, blobs, stage)
        with Heartbeat(log, "building") as beat:
            system_id = engine.build(context, spec, beat.sink)
        system = pool.submit(engine.export_layout, system_id, work / "system")
        with Heartbeat(log, "assembling") as beat:  # a line at least every 15 s: loading 5 GB takes minutes
            written = layers.result()
            probe = _compile(engine, system_id, stage, scheme, beat.sink)
            system.result()
            top = [_pyc_layer(probe, stage, blobs), _files_layer(plan, blobs)]
            whiteouts = _whiteout_layer(probe, groups, blobs, scheme)
            layout = write_layout(work / "system", [*whiteouts, *written, *top], work / "layout")
            started = time.monotonic()
            beat.sink(f"loading the image into the engine ({sum(w.blob.size for w in written) / 1e9:.1f} GB of "
                      "lock layers)")
            image_id = engine.load_layout(layout)
    log(f"assembled image {image_id[:12]}: {len(whiteouts) + len(written) + len(top)} layers on the system image, "
        f"loaded into the engine in {time.monotonic() - started:.0f} s")
    return AssembledImage(image_id, layout)


def _lock_layers(plan: Plan, config: Config, log: LineSink, groups: Sequence[LayerGroup],  # noqa: PLR0913
                 scheme: Scheme, blobs: Path, stage: Path) -> list[Written]:
    """Download the lock's wheels (:func:`~imagectl.assemble.fetch.fetch_wheels`), then write its layers, two at a
    time."""
    header = plan.spec.install_lock.header
    packages = [p for group in groups for p in group.packages]
    wheels = fetch_wheels(packages, header.index, plan.request.profile.python, header.platform,
                          cache_dir() / "wheels", ca_bundle=config.ca_bundle, on_line=log)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        written = list(pool.map(lambda g: _group_layer(g, wheels, scheme, plan, blobs, stage), groups))
    log(f"wrote {len(written)} lock layers in {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{g.name} {w.blob.size / 1e6:.1f} MB" for g, w in zip(groups, written, strict=True)))
    return written


def _group_layer(group: LayerGroup, wheels: dict[str, Path], scheme: Scheme, plan: Plan, blobs: Path,  # noqa: PLR0913
                 stage: Path) -> Written:
    """One install layer: its wheels (in the lock's order) and its lock file; their ``.py`` files staged."""
    seen: set[str] = set()
    with LayerWriter(blobs / f"{group.name}.tar.gz") as out:
        for package in group.packages:
            wheel = read_wheel(wheels[canonicalize_name(package.name)])
            seen.update(install_wheel(wheel, scheme, out, skip=seen.__contains__))
            source_files(wheel, scheme, stage)
        out.add_bytes(f"{FILES_DIR}/{group.file}", plan.files[group.file], FILE_MODE)
    pins = " ".join(f"{p.name}=={p.version}" for p in group.packages)
    return Written(out.close(), f"{INSTALL_STEP} {FILES_DIR}/{group.file} ({pins})")


def _compile(engine: Engine, system_id: str, stage: Path, scheme: Scheme, log: LineSink) -> Probe:
    """Run the probe (:data:`~imagectl.assemble.compile.PROBE`) in a container of the system image."""
    sources = [str(Path(root, name)).removeprefix(str(stage)) for root, _, names in os.walk(stage)
               for name in names if name.endswith(".py")]
    write_sources(stage, sources)
    log(f"compiling {len(sources)} .py files with the image's Python")
    started = time.monotonic()
    status, output = engine.run_mounted(system_id, [scheme.python, "-c", PROBE, STAGE], {stage: STAGE})
    if status != 0:
        raise BuildError(f"the compile step in the system image failed (exit {status})", "build", output[-4000:])
    probe = read_probe(stage, scheme)
    log(f"compiled {len(probe.pyc)} .pyc files in {time.monotonic() - started:.0f} s")
    return probe


def _pyc_layer(probe: Probe, stage: Path, blobs: Path) -> Written:
    with LayerWriter(blobs / "pyc.tar.gz") as out:
        for path in probe.pyc:
            out.add_bytes(path, (stage / path.lstrip("/")).read_bytes(), FILE_MODE)
    return Written(out.close(), f"{COMPILE_STEP} {len(probe.pyc)} .py files (hash-checked .pyc, PEP 552)")


def _files_layer(plan: Plan, blobs: Path) -> Written:
    """``/opt/imagectl``'s files, as the pip build copies them."""
    files = {LOCK_PATH: "lock.txt", CONSTRAINTS_PATH: "constraints.txt", f"{FILES_DIR}/check.py": "imagectl-check.py",
             ENTRY_PATH: "imagectl-entry.sh", f"{FILES_DIR}/extra-requirements.txt": "extra-requirements.txt",
             f"{FILES_DIR}/{EXTRAS_LOCK_FILE}": EXTRAS_LOCK_FILE}
    with LayerWriter(blobs / "files.tar.gz") as out:
        for path, name in sorted(files.items()):
            if name in plan.files:
                out.add_bytes(path, plan.files[name], FILE_MODE)
    return Written(out.close(), f"{COPY_STEP} {FILES_DIR} (lock, constraints, check)")


def _whiteout_layer(probe: Probe, groups: Sequence[LayerGroup], blobs: Path, scheme: Scheme) -> list[Written]:
    """A layer removing the files of each distribution the venv holds at another version than the lock's (none
    when there is none)."""
    locked = {canonicalize_name(p.name): p.version for g in groups for p in g.packages}
    old = [d for d in probe.dists if locked.get(canonicalize_name(d.name), d.version) != d.version]
    if not old:
        return []
    with LayerWriter(blobs / "whiteouts.tar.gz") as out:
        for dist in old:
            for path in sorted({*dist.files, dist.path}):
                if path.startswith(scheme.prefix + "/"):
                    out.add_whiteout(path)
    names = " ".join(f"{d.name}=={d.version}" for d in old)
    return [Written(out.close(), f"imagectl: remove {names} (the lock pins other versions)")]


def write_layout(system: Path, layers: Sequence[Written], dest: Path) -> Path:
    """An OCI layout at ``dest`` of the system image (layout ``system``) with ``layers`` on top: its blobs linked,
    a config with their diff_ids and history, a manifest.  Raises LayoutError for a broken system layout."""
    manifest = root_manifest(system)
    config_descriptor = manifest.config()
    if config_descriptor is None:
        raise BuildError("the system image's layout has no config", "build")
    config = json.loads(read_small_blob(system, config_descriptor.digest))
    config["rootfs"]["diff_ids"] = [*config["rootfs"]["diff_ids"], *(w.blob.diff_id for w in layers)]
    config["history"] = [*config.get("history", []), *({"created": EPOCH, "created_by": w.created_by} for w in layers)]
    config_bytes = json.dumps(config, separators=(",", ":")).encode()
    body = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config_bytes), "size": len(config_bytes)},
            "layers": [*manifest.json()["layers"], *(w.blob.descriptor() for w in layers)]}
    manifest_bytes = json.dumps(body, separators=(",", ":")).encode()
    (dest / "blobs" / "sha256").mkdir(parents=True)
    for layer in manifest.layers():
        _put_blob(blob_path(system, layer.digest), blob_path(dest, layer.digest))
    for written in layers:
        _put_blob(written.blob.path, blob_path(dest, written.blob.digest))
    for data in (config_bytes, manifest_bytes):
        blob_path(dest, sha256_digest(data)).write_bytes(data)
    (dest / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    index = {"schemaVersion": 2, "manifests": [{"mediaType": OCI_MANIFEST, "digest": sha256_digest(manifest_bytes),
                                                 "size": len(manifest_bytes)}]}
    (dest / "index.json").write_text(json.dumps(index, separators=(",", ":")))
    return dest


def _put_blob(source: Path, dest: Path) -> None:
    if not dest.exists():  # two layers of the same bytes (two empty ones) are one blob
        link_or_copy(source, dest)
