"""The container engine seam: the narrow, engine-neutral interface imagectl asks of an engine.

:class:`Engine` is what the image pipeline and the tag stores call; :mod:`.docker` implements it over the
Docker SDK (the only module that imports ``docker``), and a second engine (buildah) will sit beside it.
Commands that need no engine never import an implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

LineSink = Callable[[str], None]
TAIL_LINES = 40


@dataclass(frozen=True)
class EngineBuild:
    """What an engine builds a context with: the image's labels, the network of its RUN steps, the build args and
    whether the layer cache may serve it."""

    labels: Mapping[str, str]
    network: str | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)
    no_cache: bool = False


@dataclass(frozen=True)
class ImageInfo:
    """What the engine knows of one local image."""

    id: str
    tags: tuple[str, ...]
    repo_digests: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    size: int = 0
    created: str = ""


class Engine(Protocol):
    """What imagectl asks of a container engine.  Where connecting must wait until an engine is really needed, a
    caller passes :class:`imagectl.engine.docker.LazyEngine`, which connects on first use."""

    def list_tags(self, repository: str) -> list[str]: ...
    def inspect(self, ref: str) -> ImageInfo | None: ...
    def build(self, context: Path, spec: EngineBuild, on_line: LineSink) -> str: ...
    def tag(self, image: str, repository: str, tag: str) -> None: ...
    def untag(self, ref: str) -> None: ...
    def push(self, repository: str, tag: str, on_line: LineSink) -> str: ...
    def pull(self, ref: str, on_line: LineSink) -> ImageInfo: ...
    def run(self, image: str, command: list[str], network: str | None = None, *,
            gpus: bool = False) -> tuple[int, str]: ...
