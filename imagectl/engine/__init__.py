"""The container engine seam: the narrow, engine-neutral interface imagectl asks of an engine.

:class:`Engine` is what the image pipeline and the tag stores call; :mod:`.docker` implements it over the
Docker SDK (the only module that imports ``docker``); :mod:`.buildah` implements it over the buildah CLI (daemonless,
reproducible), and :class:`LayoutEngine` as well, what an assembled build adds (:mod:`imagectl.images.assembled`);
:mod:`.select` picks one for ``[build] engine``.  Commands that need no engine never import an
implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..owner import Owner
from ..stop import Stop

if TYPE_CHECKING:
    from ..registry.manifest import Descriptor

LineSink = Callable[[str], None]
TAIL_LINES = 40
EngineName = Literal["docker", "buildah"]
Staged = Literal["imported", "present", "unsupported"]  # what LayoutEngine.stage_layer did


@dataclass(frozen=True)
class EngineBuild:
    """What an engine builds a context with: the image's labels, the network of its RUN steps, the build args and
    whether the layer cache may serve it."""

    labels: Mapping[str, str]
    network: str | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)
    no_cache: bool = False
    source_date_epoch: int | None = None  # every timestamp of the image (layers, config, history); from the inputs
    platform: str | None = None  # "linux/arm64": the image's platform; None: the host's
    cache_repo: str | None = None  # [build] cache: registry layer cache (buildah --cache-from/--cache-to); Docker: none


@dataclass(frozen=True)
class Pushed:
    """What a push did: the manifest digest under the tag, the bytes of the blobs it uploaded, and of all of the
    image's blobs (those the registry already had, or mounted from another of its repositories, were not sent)."""

    digest: str
    uploaded: int = 0
    total: int = 0


class KnownLayers(Protocol):
    """What the destination of an export already holds, for an engine that compresses layers itself (Docker's
    :meth:`~Engine.export_layout`; buildah's compresses with buildah and never asks): ``held`` is the blob of the
    layer whose uncompressed tar is ``diff_id``, as the layer writer ``writer`` compresses it, where the destination
    has it (the export then leaves that blob out of the layout), else None; ``start`` makes the first bytes of that
    blob from the layer itself, for the destination's blob to be checked against.  ``made`` tells of a blob the
    export just wrote.  Raises RegistryError when the destination cannot be asked."""

    def held(self, diff_id: str, writer: str, start: Callable[[], bytes]) -> Descriptor | None: ...
    def made(self, diff_id: str, writer: str, blob: Descriptor) -> None: ...


@dataclass(frozen=True)
class ImageInfo:
    """What the engine knows of one local image."""

    id: str
    tags: tuple[str, ...]
    repo_digests: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    size: int = 0
    created: str = ""
    diff_ids: tuple[str, ...] = ()  # its layers' (buildah; Docker: not read)


class Engine(Protocol):
    """What imagectl asks of every container engine, and what each one does in full.  Where connecting must wait
    until an engine is really needed, a caller passes :class:`imagectl.engine.select.LazyEngine`, which connects on
    first use.

    ``reproducible``: whether the same context and ``source_date_epoch`` give the same image bit for bit (layers,
    config, digests); an engine that cannot promise it says False and ``build`` reports ``"reproducible": false``.
    ``export_layout`` writes a local image as an OCI image layout directory (for comparing it with a registry's, and
    for ``build``'s push by digest); with ``known``, an engine that compresses the layers itself may leave out the
    blobs the destination holds (:class:`KnownLayers`): the layout's manifest names them, its ``blobs/`` lacks them.
    ``share_with_docker`` copies a local image into a local Docker daemon, where one answers and the engine is
    another (False: nothing to do), so ``docker run`` finds images built without a registry.
    """

    name: EngineName

    @property
    def reproducible(self) -> bool: ...
    def version(self) -> str: ...
    def list_tags(self, repository: str) -> list[str]: ...
    def inspect(self, ref: str) -> ImageInfo | None: ...
    def build(self, context: Path, spec: EngineBuild, on_line: LineSink) -> str: ...
    def tag(self, image: str, repository: str, tag: str) -> None: ...
    def untag(self, ref: str) -> None: ...
    def push(self, repository: str, tag: str, on_line: LineSink) -> Pushed: ...
    def pull(self, ref: str, on_line: LineSink) -> ImageInfo: ...
    def run(self, image: str, command: list[str], network: str | None = None, *,
            gpus: bool = False) -> tuple[int, str]: ...
    def export_layout(self, image: str, dest: Path, *, known: KnownLayers | None = None) -> None: ...
    def share_with_docker(self, image: str, repository: str, tags: tuple[str, ...]) -> bool: ...


@runtime_checkable
class LayoutEngine(Engine, Protocol):
    """An engine that also takes images whose lock layers imagectl writes itself (:mod:`imagectl.images.assembled`):
    buildah's.  Only a LayoutEngine reaches that path, and the type checker holds it there: a caller narrows its
    engine with :func:`imagectl.engine.select.layout_engine` first.

    ``run_mounted`` runs a program in a container of an image with host folders mounted; ``load_layout`` loads an OCI
    layout as a local image and ``push_layout`` pushes one, its blobs as they are; ``stage_layer`` puts a layer
    into the engine's store while the next ones are written, so that ``load_layout`` finds it there
    (``unsupported``: nothing done, the load does all), and ``discard_staged`` removes those no loaded image uses.

    An assembled build is long work on several threads with one stop signal (:class:`imagectl.stop.Stop`): each of
    these calls, and ``build`` and ``export_layout``, takes it and ends what it runs when the stop is set (raising
    Stopped).  ``leftover_containers`` lists the working containers of imagectl processes that are gone (a build
    killed with ``kill -9``), ``remove_container`` removes one, and ``discard_layers`` removes staged layers such a
    build left that no image uses (:mod:`imagectl.images.sweep`).
    """

    def build(self, context: Path, spec: EngineBuild, on_line: LineSink, *, stop: Stop | None = None) -> str: ...
    def export_layout(self, image: str, dest: Path, *, known: KnownLayers | None = None,
                      stop: Stop | None = None) -> None: ...
    def run_mounted(self, image: str, argv: list[str], mounts: Mapping[Path, str], *,
                    timeout: float | None = None, stop: Stop | None = None) -> tuple[int, str]: ...
    def load_layout(self, layout: Path, *, stop: Stop | None = None) -> str: ...
    def stage_layer(self, diff_ids: Sequence[str], blob: Callable[[], Path], *,
                    stop: Stop | None = None) -> Staged: ...
    def discard_staged(self) -> None: ...
    def leftover_containers(self) -> list[tuple[str, Owner]]: ...
    def remove_container(self, name: str) -> str: ...
    def discard_layers(self, layer_ids: Sequence[str], *, dry_run: bool = False) -> list[str]: ...
    def push_layout(self, layout: Path, repository: str, tag: str, on_line: LineSink) -> Pushed: ...
