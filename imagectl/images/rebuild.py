"""``imagectl rebuild NAME --compare``: build an image again from the inputs its labels record, and compare the
result with the registry's image bit for bit.

The inputs are the labels a build writes (:mod:`imagectl.labels`): the profile (``imagectl.profile``, its Python
``imagectl.python``), the lock (``imagectl.lock.sha256``), the base image's digest
(``org.opencontainers.image.base.digest``), the imagectl version (``imagectl.version``) and the build key
(``imagectl.build-key``).  No separate template hash is needed: the build key is a sha256 over the rendered build
context (the templates' output), the base digest, the build args and the added context files, so a rebuild whose
plan has another build key would not be built from the same inputs, and is refused before anything is built,
naming both keys.  A missing label, another imagectl version, an image with extras, or another engine than the one
that built it (``imagectl.engine``) is refused with one line (exit 2).

The lock is looked up by its sha256 in the lock directories (:func:`~imagectl.lock.store.lock_dirs`), else read
from the registry's image itself (``/opt/imagectl/lock.txt``: a fresh CI runner has no lock files of its own); it
is handed to the plan through a lock directory of its own, so planning installs exactly it.  The base is pinned to
the labelled digest.  The engine builds the plan without its layer cache (a cached layer would prove nothing) and
without tagging or pushing anything, exports the image as an OCI layout, and
:func:`~.compare_image.compare_images` compares it with the registry's.
"""

from __future__ import annotations

import json
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from .. import __version__
from ..config import Config
from ..engine import Engine, LineSink
from ..errors import InputError, OperationError
from ..labels import BUILD_KEY, ENGINE, IMAGECTL_VERSION, LOCK_SHA256, OCI_BASE_DIGEST, PROFILE, PYTHON
from ..lock.lockfile import Lock, parse_lock
from ..lock.store import lock_files, read_lock
from ..lock.target import profile_lock_id, target_for
from ..matrix.model import Matrix
from ..matrix.names import resolve_profile
from ..reference import Reference, parse_reference
from ..registry.access import client_for
from ..registry.client import RegistryClient
from ..registry.manifest import LAYER_COMPRESSION, Manifest, parse_image_config, pick_platform
from ..render.context import LOCK_PATH
from ..tags.naming import moving_reference
from .base_digest import resolve_pinned_base
from .builder import built_image
from .compare_image import Comparison, LayoutSource, RegistrySource, compare_images, decompressed, layer_history
from .plan import BuildOptions, BuildRequest, Plan, plan_build
from .trace import Trace

REQUIRED = (PROFILE, LOCK_SHA256, OCI_BASE_DIGEST, IMAGECTL_VERSION, BUILD_KEY)
MAX_LOCK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class RebuildInputs:
    """What an image's labels say it was built from."""

    profile: str
    python: str
    lock_sha256: str
    base_digest: str
    version: str
    build_key: str
    engine: str = ""  # "" for images from before the label


@dataclass(frozen=True)
class RebuildResult:
    """A rebuild and its comparison with the registry's image at ``reference``."""

    reference: str
    inputs: RebuildInputs
    engine: str
    reproducible_engine: bool
    comparison: Comparison
    lock_from: str  # where the lock came from: a file path, or the image


def inputs_from_labels(labels: Mapping[str, str], reference: str, version: str = __version__) -> RebuildInputs:
    """The inputs ``labels`` record; raises InputError naming what is missing, an image with extras, or another
    imagectl version than ``version`` (pure)."""
    missing = [label for label in REQUIRED if not labels.get(label)]
    if missing:
        raise InputError(f"{reference}: cannot rebuild: the image has no {', '.join(missing)} label "
                         "(built by an older imagectl, or not by imagectl)")
    if labels[PROFILE].endswith("+extras"):
        raise InputError(f"{reference}: cannot rebuild an image with extras ({labels[PROFILE]}) yet")
    if labels[IMAGECTL_VERSION] != version:
        raise InputError(f"{reference}: built by imagectl {labels[IMAGECTL_VERSION]}, this is imagectl {version}; "
                         f"rebuild with imagectl {labels[IMAGECTL_VERSION]}")
    return RebuildInputs(labels[PROFILE], labels.get(PYTHON, ""), labels[LOCK_SHA256], labels[OCI_BASE_DIGEST],
                         labels[IMAGECTL_VERSION], labels[BUILD_KEY], labels.get(ENGINE, ""))


def image_reference(name: str, matrix: Matrix, config: Config) -> Reference:
    """The registry image ``name`` stands for: an image reference (``host/path:tag``), or a profile's moving tag in
    the team registry.  Raises InputError without a registry, UnknownProfileError for an unknown name."""
    if "/" in name or "@" in name:
        ref = parse_reference(name)
        return ref if ref.tag or ref.digest else ref.with_tag("latest")
    profile = resolve_profile(name, matrix)
    if not config.registry_url:
        raise InputError(f"rebuild {name}: --compare compares with the team registry's image: set [registry] url, or "
                         "name an image reference (host/path:tag)")
    return moving_reference(profile.name, config)


def rebuild_and_compare(name: str, matrix: Matrix, config: Config, engine: Engine, log: LineSink) -> RebuildResult:
    """Rebuild the image ``name`` names (see :func:`image_reference`) from its labels and compare it with the
    registry's.  Raises InputError (labels, version, engine, lock or build key that do not allow an exact rebuild),
    BuildError (the build), EngineError, RegistryError, NotFoundError."""
    ref = image_reference(name, matrix, config)
    with client_for(ref.domain, config.insecure_hosts, config.registry_timeout) as client:
        manifest = _image_manifest(client, ref)
        config_blob = manifest.config()
        if config_blob is None:
            raise OperationError(f"{ref}: the manifest has no config")
        image_config = client.read_blob(ref.path, config_blob.digest, 64 * 1024 * 1024)
        labels = parse_image_config(image_config, config_blob.digest).labels
        inputs = inputs_from_labels(labels, str(ref))
        if inputs.engine and inputs.engine != engine.name:
            raise InputError(f"{ref}: built by the {inputs.engine} engine; [build] engine gives {engine.name}, which "
                             f"cannot make the same bytes (set [build] engine = \"{inputs.engine}\")")
        if not engine.reproducible:
            log(f"note: the {engine.name} engine does not build reproducibly: expect the layers to differ")
        with tempfile.TemporaryDirectory(prefix="imagectl-rebuild-") as tmp:
            registry = RegistrySource(client, ref.path, manifest, name=str(ref))
            lock, lock_from = find_lock_by_sha256(inputs.lock_sha256, config, registry,
                                                  layer_history(_json(image_config)))
            plan = _plan(inputs, lock, matrix, config, Path(tmp) / "locks", log)
            log(f"rebuilding {ref} from its labels: lock {inputs.lock_sha256[:12]}, base {inputs.base_digest}, "
                f"build key {inputs.build_key[:10]}")
            with built_image(plan.plan, plan.config, engine, Trace(log)) as fresh:
                layout = Path(tmp) / "layout"
                engine.export_layout(fresh.image_id, layout)
                comparison = compare_images(LayoutSource(layout), registry)
    return RebuildResult(str(ref), inputs, engine.name, engine.reproducible, comparison, lock_from)


def _image_manifest(client: RegistryClient, ref: Reference) -> Manifest:
    """The image manifest at ``ref`` (the linux/amd64 child of an index)."""
    manifest = client.get_manifest(ref.path, ref.digest or ref.tag or "latest")
    if manifest.is_index:
        manifest = client.get_manifest(ref.path, pick_platform(manifest.children()).digest)
    return manifest


def _json(raw: bytes) -> dict[str, object]:
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class _PlannedBuild:
    """A plan and the configuration it was planned under (with the lock's directory first)."""

    plan: Plan
    config: Config


def _plan(inputs: RebuildInputs, lock: Lock, matrix: Matrix, config: Config, lock_dir: Path,  # noqa: PLR0913
          log: LineSink) -> _PlannedBuild:
    """The build plan of ``inputs``: the labelled profile, the found lock (through a lock directory of its own,
    searched first), the base pinned to its labelled digest; raises InputError when the plan's lock or build key
    is not the image's."""
    profile = resolve_profile(inputs.profile, matrix, inputs.python or None)
    index = target_for(profile, config).index
    if lock.header.index.rstrip("/") != index.rstrip("/"):
        raise InputError(f"the image's lock was resolved against {lock.header.index}; this configuration installs "
                         f"{profile.name} from {index} ([pip] index_url)")
    lock_dir.mkdir(parents=True, exist_ok=True)
    (lock_dir / f"{profile_lock_id(profile)}.txt").write_text(lock.text, encoding="utf-8")
    pinned = replace(config, lock_dirs=(lock_dir, *config.lock_dirs))
    request = BuildRequest(profile, BuildOptions(no_cache=True))  # a layer the cache served would prove nothing
    plan = plan_build(request, pinned, lambda base: resolve_pinned_base(base, inputs.base_digest, config), Trace(log))
    if plan.lock.lock.sha256 != inputs.lock_sha256:
        raise InputError(f"the plan installs lock {plan.lock.lock.sha256[:12]}, not the image's "
                         f"{inputs.lock_sha256[:12]}")
    if plan.key != inputs.build_key:
        raise InputError(f"the rebuild's inputs are not the image's: build key {plan.key[:10]}, the image's "
                         f"{inputs.build_key[:10]} (the templates, [build] args or [paths] context files differ)")
    return _PlannedBuild(plan, pinned)


def find_lock_by_sha256(sha256: str, config: Config, image: RegistrySource, history: list[str]) -> tuple[Lock, str]:
    """The lock whose file has ``sha256``: from a lock directory, else from the image (``/opt/imagectl/lock.txt``,
    the layers whose history mentions ``/opt/imagectl`` read first).  Raises InputError when neither has it."""
    for path in lock_files(config):
        try:
            lock = read_lock(path)
        except InputError:
            continue
        if lock.sha256 == sha256:
            return lock, str(path)
    text = lock_in_image(image, history)
    if text is not None:
        lock = parse_lock(text, f"{image.name}:{LOCK_PATH}")
        if lock.sha256 == sha256:
            return lock, f"the image's {LOCK_PATH}"
    raise InputError(f"lock sha256 {sha256[:12]}: in no lock directory, and not in the image at {LOCK_PATH}")


def lock_in_image(image: RegistrySource, history: list[str]) -> str | None:
    """The text of ``LOCK_PATH`` in the image (the layers whose history mentions ``/opt/imagectl`` first, then from
    the top), or None."""
    layers = image.manifest().layers()
    hinted = [i for i, step in enumerate(history) if "/opt/imagectl" in step and i < len(layers)]
    order = list(dict.fromkeys([*reversed(hinted), *reversed(range(len(layers)))]))
    wanted = LOCK_PATH.lstrip("/")
    for index in order:
        layer = layers[index]
        compression = LAYER_COMPRESSION.get(layer.media_type)
        if compression is None:
            continue
        with image.open_layer(layer) as raw, decompressed(raw, compression) as stream, \
                tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if member.name.removeprefix("./") == wanted and member.isfile() and member.size <= MAX_LOCK_BYTES:
                    handle = tar.extractfile(member)
                    return handle.read().decode("utf-8") if handle else None
    return None
