"""Which engine a command gets: ``[build] engine = "auto" | "docker" | "buildah"``, made on first use.

``auto`` takes buildah where it is installed (it builds reproducibly and needs no daemon), else a Docker engine
that answers, else fails with one line naming both.  :class:`LazyEngine` waits until an engine is really needed:
a build reused from the registry, or a tag command against a registry, never makes one.  :func:`layout_engine` is
where an assembled build learns that its engine is a :class:`~imagectl.engine.LayoutEngine`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..config import Config
from ..errors import EngineError
from . import Engine, EngineBuild, EngineName, ImageInfo, KnownLayers, LayoutEngine, LineSink, Pushed
from .features import picks_buildah

EngineChoice = Literal["auto", "docker", "buildah"]
ENGINE_CHOICES: tuple[EngineChoice, ...] = ("auto", "docker", "buildah")


def make_engine(choice: EngineChoice, *, compression: str = "gzip", insecure_hosts: tuple[str, ...] = (),
                timeout: float | None = None) -> Engine:
    """The engine ``choice`` names, connected; raises EngineError when it is not there (``auto``: neither)."""
    if picks_buildah(choice):
        return _buildah(compression, insecure_hosts, timeout)
    from .docker import DockerEngine  # here: it loads the Docker SDK

    if choice == "docker":
        return DockerEngine()
    try:
        return DockerEngine()
    except EngineError as exc:
        raise EngineError(f"no container engine: buildah is not installed (apt-get install buildah) and {exc}") \
            from None


def engine_for(config: Config) -> "LazyEngine":
    """The engine ``config`` asks for (``[build] engine``), made on first use."""
    compression = config.registry_compression
    return LazyEngine(lambda: make_engine(config.build_engine, compression=compression,  # type: ignore[arg-type]
                                          insecure_hosts=config.insecure_hosts, timeout=config.registry_timeout))


def _buildah(compression: str, insecure_hosts: tuple[str, ...], timeout: float | None) -> LayoutEngine:
    from ..registry.access import client_for, is_insecure  # here: the registry package loads requests
    from ..registry.layout_push import push_layout
    from .buildah import BuildahEngine

    def pusher(layout: Path, repository: str, tag: str, on_line: LineSink) -> Pushed:
        host, _, path = repository.partition("/")
        with client_for(host, insecure_hosts, timeout) as client:
            done = push_layout(client, layout, path, tag, on_line=on_line)
        return Pushed(done.digest, done.uploaded, done.total)

    return BuildahEngine(pusher, compression, insecure=lambda host: is_insecure(host, insecure_hosts))


def layout_engine(engine: Engine) -> LayoutEngine | None:
    """``engine`` as a :class:`LayoutEngine` (buildah), the one a :class:`LazyEngine` makes where it is one, else
    None (Docker): the check that lets an assembled build take it.  A LazyEngine connects; raises what it raises."""
    made = engine.connected() if isinstance(engine, LazyEngine) else engine
    return made if isinstance(made, LayoutEngine) else None


class LazyEngine(Engine):
    """An :class:`Engine` that connects on first use.  The first call of any method calls ``factory`` (``auto``
    by default) once, in any thread, and raises what it raises (EngineError when no engine answers); every call
    then goes to the engine it made.  It is an Engine only, whichever it makes: :func:`layout_engine` hands out a
    buildah engine it made as the :class:`LayoutEngine` it is."""

    def __init__(self, factory: Callable[[], Engine] | None = None) -> None:
        self._factory: Callable[[], Engine] = factory or (lambda: make_engine("auto"))
        self._engine: Engine | None = None
        self._lock = threading.Lock()

    def connected(self) -> Engine:
        """The engine, made by the first call; raises what ``factory`` raises."""
        with self._lock:
            if self._engine is None:
                self._engine = self._factory()
            return self._engine

    @property
    def name(self) -> EngineName:  # type: ignore[override]
        """See :attr:`Engine.name`."""
        return self.connected().name

    @property
    def reproducible(self) -> bool:
        """See :attr:`Engine.reproducible`."""
        return self.connected().reproducible

    def version(self) -> str:
        """See :meth:`Engine.version`."""
        return self.connected().version()

    def list_tags(self, repository: str) -> list[str]:
        """See :meth:`Engine.list_tags`."""
        return self.connected().list_tags(repository)

    def inspect(self, ref: str) -> ImageInfo | None:
        """See :meth:`Engine.inspect`."""
        return self.connected().inspect(ref)

    def build(self, context: Path, spec: EngineBuild, on_line: LineSink) -> str:
        """See :meth:`Engine.build`."""
        return self.connected().build(context, spec, on_line)

    def tag(self, image: str, repository: str, tag: str) -> None:
        """See :meth:`Engine.tag`."""
        self.connected().tag(image, repository, tag)

    def untag(self, ref: str) -> None:
        """See :meth:`Engine.untag`."""
        self.connected().untag(ref)

    def push(self, repository: str, tag: str, on_line: LineSink) -> Pushed:
        """See :meth:`Engine.push`."""
        return self.connected().push(repository, tag, on_line)

    def pull(self, ref: str, on_line: LineSink) -> ImageInfo:
        """See :meth:`Engine.pull`."""
        return self.connected().pull(ref, on_line)

    def run(self, image: str, command: list[str], network: str | None = None, *,
            gpus: bool = False) -> tuple[int, str]:
        """See :meth:`Engine.run`."""
        return self.connected().run(image, command, network, gpus=gpus)

    def export_layout(self, image: str, dest: Path, *, known: KnownLayers | None = None) -> None:
        """See :meth:`Engine.export_layout`."""
        self.connected().export_layout(image, dest, known=known)

    def share_with_docker(self, image: str, repository: str, tags: tuple[str, ...]) -> bool:
        """See :meth:`Engine.share_with_docker`."""
        return self.connected().share_with_docker(image, repository, tags)
