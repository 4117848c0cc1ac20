"""An in-memory container engine (:class:`imagectl.engine.Engine`) for hermetic tests of the build pipeline.

``build`` reads its context as an engine would: the Dockerfile's ``LABEL`` instructions and the labels passed in
become the new image's labels, and every file of the context is recorded (:class:`Build`).  ``run`` of the
in-image check prints the JSON report ``templates/check/main.py.j2`` prints, made from the image's labels, so
the check passes; ``lies`` make the report contradict chosen labels.  ``push`` returns a digest derived from
the repository and the image, records it, and hands the tag to ``registry`` (a :class:`FakeRegistry`, whose
repositories are the in-memory :class:`tests.unit.tags.tagfakes.FakeStore`); ``push_by_digest`` does the same with
no tag (what ``build`` does: :func:`push_by_digest` stands in for :func:`imagectl.images.publish.push_by_digest`).
``inspect`` of ``REPO@DIGEST`` finds the image pushed there; ``pull`` brings in what ``remote`` holds for the
reference.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from imagectl.config import Config
from imagectl.engine import EngineBuild, ImageInfo, KnownLayers, LineSink, Pushed
from imagectl.errors import BuildError, EngineError, NotFoundError
from imagectl.imagecheck.run import CHECK_COMMAND
from imagectl.labels import (CUDA, CUDNN, EXTRAS, FRAMEWORK, FRAMEWORK_VERSION, LOCK_PACKAGES, LOCK_SHA256, NCCL,
                             PACKAGES, PROFILE, PYTHON, split_packages)
from imagectl.reference import Reference
from tests.unit.tags.tagfakes import FakeStore

CREATED = "2024-05-01T12:00:00Z"
CHECK_SCRIPT = "imagectl-check.py"  # the context file the Dockerfile copies to /opt/imagectl/check.py
_LABEL_PAIR = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\.)*")')


@dataclass(frozen=True)
class Build:
    """One call of :meth:`FakeEngine.build`; ``image`` is "" for a build that failed."""

    files: dict[str, bytes]
    labels: dict[str, str]
    network: str | None
    build_args: dict[str, str]
    no_cache: bool
    image: str
    context: str = ""  # the context directory the engine was given (gone once the build returned)

    @property
    def dockerfile(self) -> str:
        return self.files["Dockerfile"].decode()


@dataclass(frozen=True)
class Run:
    """One call of :meth:`FakeEngine.run`."""

    image: str
    command: list[str]
    network: str | None
    gpus: bool


class FakeRegistry:
    """The repositories of one registry, each a FakeStore (keyed by the familiar repository name)."""

    def __init__(self) -> None:
        self.stores: dict[str, FakeStore] = {}
        self.opened: list[str] = []

    def store(self, repository: str) -> FakeStore:
        return self.stores.setdefault(repository, FakeStore(repository))

    def receive(self, repository: str, tag: str, digest: str, labels: Mapping[str, str]) -> None:
        """What a push does to the registry: ``tag`` names manifest ``digest`` (with the image's labels; ``tag`` "":
        pushed by digest, no tag names it)."""
        store = self.store(repository)
        if tag:
            store.add(tag, digest)
        else:
            store.manifests.add(digest)
        store.label_map[digest] = dict(labels)

    def open_tag_store(self, repo: Reference, config: Config, make_engine: Any) -> FakeStore:
        """A stand-in for :func:`imagectl.tags.managed.open_tag_store` with a registry configured."""
        self.opened.append(repo.familiar)
        return self.store(repo.familiar)


def dockerfile_labels(dockerfile: str) -> dict[str, str]:
    """The labels of the ``LABEL`` instructions of a Dockerfile (``KEY="json string"`` pairs, continued lines)."""
    labels: dict[str, str] = {}
    for line in dockerfile.replace("\\\n", " ").splitlines():
        if line.startswith("LABEL "):
            labels.update({key: json.loads(value) for key, value in _LABEL_PAIR.findall(line)})
    return labels


def check_report(labels: Mapping[str, str], gpu: bool = False) -> dict[str, Any]:
    """The report the in-image check prints in an image that holds exactly what ``labels`` promise."""
    pins = dict(item.split("==", 1) for item in labels.get(PACKAGES, "").split(",") if "==" in item)
    version = labels.get(FRAMEWORK_VERSION)
    framework: dict[str, Any] = {
        "name": labels.get(FRAMEWORK), "version": version, "local_version": f"{version}+fake",
        "cuda": labels.get(CUDA), "cudnn": labels.get(CUDNN) or None, "nccl": labels.get(NCCL) or None,
    }
    if gpu:
        framework["gpu"] = {"available": False, "device_count": 0}
    locked = {**split_packages(labels.get(LOCK_PACKAGES)), **split_packages(labels.get(EXTRAS))}
    return {
        "python": f"{labels.get(PYTHON)}.4",
        "packages": {**pins, **locked, "pip": "24.0"},
        "lock_files": [{"kind": "lock", "path": "/opt/imagectl/lock.txt", "sha256": labels.get(LOCK_SHA256),
                        "error": None}],
        "pip_check": {"ok": True, "output": "No broken requirements found."},
        "system_nccl": {"env": None, "dpkg": None},
        "gpu_requested": gpu,
        "framework": framework,
    }


def context_of(context: Path) -> dict[str, bytes]:
    """Every file of a build context, by its relative POSIX path."""
    return {p.relative_to(context).as_posix(): p.read_bytes() for p in sorted(context.rglob("*")) if p.is_file()}


@dataclass
class FakeEngine:
    """Images, local tags, builds, check runs and pushes, all in memory."""

    registry: FakeRegistry | None = None
    images: dict[str, ImageInfo] = field(default_factory=dict)  # image id -> info (tags computed by inspect)
    refs: dict[str, str] = field(default_factory=dict)  # "repository:tag" -> image id
    builds: list[Build] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    pushes: list[tuple[str, str, str]] = field(default_factory=list)  # (repository, tag, digest)
    pulls: list[str] = field(default_factory=list)
    remote: dict[str, ImageInfo] = field(default_factory=dict)  # ref -> the image a pull of it brings in
    build_failures: dict[str | None, str] = field(default_factory=dict)  # profile label (None: any) -> error
    lies: dict[str, str] = field(default_factory=dict)  # label key -> the value the check reports instead
    check_status: int = 0  # non-zero: the check script crashes with this status
    push_failure: str = ""  # non-empty: every push fails with this error
    tag_failures: set[str] = field(default_factory=set)  # tags that ``tag`` refuses to set
    rebuild_same: bool = False  # every build gives the image of the last one (a rebuild entirely from the cache)
    _ids: Any = field(default_factory=itertools.count, repr=False)  # thread-safe: build_many runs builds in threads

    # -- setup helpers
    def add_image(self, ref: str, repo_digests: tuple[str, ...] = (), labels: Mapping[str, str] | None = None) -> str:
        """A local image (a pulled base, say) tagged ``ref``; returns its id."""
        image_id = self._new_id()
        self.images[image_id] = ImageInfo(image_id, (), repo_digests, dict(labels or {}), 1000, CREATED)
        self.refs[ref] = image_id
        return image_id

    def fail_builds(self, message: str, profile: str | None = None) -> None:
        """Make the builds of ``profile`` (every build: None) fail with ``message``."""
        self.build_failures[profile] = message

    def tags_of(self, repository: str) -> dict[str, str]:
        """The local tags of ``repository`` -> image id."""
        prefix = f"{repository}:"
        return {ref[len(prefix):]: image for ref, image in self.refs.items() if ref.startswith(prefix)}

    def _new_id(self) -> str:
        return "sha256:" + hashlib.sha256(f"image-{next(self._ids)}".encode()).hexdigest()

    def _resolve(self, ref: str) -> str | None:
        image_id = self.refs.get(ref, ref)
        if image_id not in self.images and "@" in ref:  # REPO@DIGEST: an image pushed there (its repo digest)
            image_id = next((i for i, info in self.images.items() if ref in info.repo_digests), "")
        return image_id if image_id in self.images else None

    # -- the Engine protocol
    name = "docker"
    reproducible = False

    def version(self) -> str:
        return "fake"

    def export_layout(self, image: str, dest: Path, *, known: KnownLayers | None = None) -> None:
        raise EngineError("the fake engine exports no layouts")

    def share_with_docker(self, image: str, repository: str, tags: tuple[str, ...]) -> bool:
        return False

    def build(self, context: Path, spec: EngineBuild, on_line: LineSink) -> str:
        labels, network, build_args, no_cache = spec.labels, spec.network, spec.build_args, spec.no_cache
        files = context_of(context)
        dockerfile = files["Dockerfile"].decode()
        all_labels = {**dockerfile_labels(dockerfile), **labels}
        steps = [line for line in dockerfile.splitlines() if line and not line.startswith((" ", "#"))]
        for number, step in enumerate(steps, 1):
            on_line(f"Step {number}/{len(steps)} : {step}")
        failure = self.build_failures.get(all_labels.get(PROFILE)) or self.build_failures.get(None)
        last = next((b.image for b in reversed(self.builds) if b.image), "") if self.rebuild_same else ""
        image_id = "" if failure else last or self._new_id()
        self.builds.append(Build(files, dict(labels), network, dict(build_args), no_cache, image_id, str(context)))
        if failure:
            on_line(f"ERROR: {failure}")
            raise BuildError(f"build failed: {failure}", "build", "\n".join([*steps[-3:], f"ERROR: {failure}"]))
        size = sum(len(content) for content in files.values())
        known = self.images[image_id].repo_digests if image_id in self.images else ()  # a cached rebuild keeps them
        self.images[image_id] = ImageInfo(image_id, (), known, all_labels, size, CREATED)
        return image_id

    def tag(self, image: str, repository: str, tag: str) -> None:
        image_id = self._resolve(image)
        if image_id is None:
            raise EngineError(f"engine: no such image: {image}")
        if tag in self.tag_failures:
            raise EngineError(f"engine: tag {repository}:{tag}: refused")
        self.refs[f"{repository}:{tag}"] = image_id

    def untag(self, ref: str) -> None:
        self.refs.pop(ref, None)

    def inspect(self, ref: str) -> ImageInfo | None:
        image_id = self._resolve(ref)
        if image_id is None:
            return None
        return replace(self.images[image_id], tags=tuple(sorted(r for r, i in self.refs.items() if i == image_id)))

    def list_tags(self, repository: str) -> list[str]:
        return sorted(self.tags_of(repository))

    def push(self, repository: str, tag: str, on_line: LineSink) -> Pushed:
        ref = f"{repository}:{tag}"
        image_id = self.refs.get(ref)
        if image_id is None:
            raise BuildError(f"push of {ref} failed: An image does not exist locally with the tag", "push")
        return self._push(repository, tag, image_id, on_line)

    def push_by_digest(self, repository: str, image_id: str, on_line: LineSink) -> Pushed:
        """Push local image ``image_id`` to ``repository`` with no tag (recorded in :attr:`pushes` with tag "")."""
        if self._resolve(image_id) is None:
            raise BuildError(f"push of {repository} failed: no local image {image_id}", "push")
        return self._push(repository, "", image_id, on_line)

    def _push(self, repository: str, tag: str, image_id: str, on_line: LineSink) -> Pushed:
        ref = f"{repository}:{tag}" if tag else repository
        if self.push_failure:
            raise BuildError(f"push of {ref} failed: {self.push_failure}", "push", self.push_failure)
        digest = "sha256:" + hashlib.sha256(f"{repository}@{image_id}".encode()).hexdigest()
        on_line(f"{tag or 'untagged'}: digest: {digest}")
        self.pushes.append((repository, tag, digest))
        info = self.images[image_id]
        repo_digests = tuple(sorted({*info.repo_digests, f"{repository}@{digest}"}))
        self.images[image_id] = replace(info, repo_digests=repo_digests)
        if self.registry is not None:
            self.registry.receive(repository, tag, digest, info.labels)
        return Pushed(digest, info.size, info.size)

    def pull(self, ref: str, on_line: LineSink) -> ImageInfo:
        self.pulls.append(ref)
        if ref in self.remote and self.inspect(ref) is None:
            pulled = self.remote[ref]
            self.images[pulled.id] = pulled
        info = self.inspect(ref)
        if info is None:
            raise NotFoundError(f"pull {ref}: no such image")
        on_line(f"{ref}: image is up to date")
        return info

    def run(self, image: str, command: list[str], network: str | None = None,
            gpus: bool = False) -> tuple[int, str]:
        self.runs.append(Run(image, list(command), network, gpus))
        image_id = self._resolve(image)
        if image_id is None:
            raise EngineError(f"engine: run {image}: no such image")
        if command[: len(CHECK_COMMAND)] != CHECK_COMMAND:
            return 127, f"exec: {command[0]!r}: not faked\n"
        if not any(b.image == image_id and CHECK_SCRIPT in b.files for b in self.builds):
            return 2, "python: can't open file '/opt/imagectl/check.py': [Errno 2] No such file or directory\n"
        if self.check_status:
            return self.check_status, "Traceback (most recent call last):\nSystemError: the check crashed\n"
        report = check_report({**self.images[image_id].labels, **self.lies}, gpu="--gpu" in command)
        return 0, "some warning of the framework\n" + json.dumps(report, sort_keys=True) + "\n"


def push_by_digest(engine: FakeEngine, image_id: str, repo: Reference, config: Config, on_line: LineSink,
                   layout: Path | None = None) -> Pushed:
    """A stand-in for :func:`imagectl.images.publish.push_by_digest`: the fake ``engine`` pushes ``image_id`` into its
    registry by digest."""
    return engine.push_by_digest(repo.familiar, image_id, on_line)
