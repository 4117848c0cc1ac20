"""Pushing an OCI image layout directory to a registry, blob by blob, sending only what the registry lacks.

This is the push of the buildah engine (``buildah push --format oci --compression-format gzip|zstd IMAGE oci:DIR``,
then :func:`push_layout`).  For each blob of the image (config and layers; for an index, those of every child
manifest), in order:

1. ``HEAD`` it in the target repository: there, nothing is sent (``present``);
2. else mount it from another repository of the registry that holds it (``POST .../blobs/uploads/?mount=&from=``,
   201: no bytes move; ``mounted``).  Where the candidates come from (:class:`MountSources`): the repositories the
   caller names (``mount_from``) first, then the other repositories of the target's namespace that the registry's
   catalog lists (``/v2/_catalog``, read once, lazily, at most ``MAX_CATALOG_NAMES`` names, paged from the
   namespace on), most similar name first (``torch-2.3.0-cu121`` before ``torch-2.2-cu118`` for
   ``torch-2.3.1-cu121``), at most ``MAX_MOUNT_SOURCES`` of them.  A fresh CI runner knows nothing of what the
   registry holds, so the registry tells it.  Each candidate is asked with a ``HEAD`` (a candidate the
   credentials may not read is passed over), and the mount is asked only of one that has the blob; a registry
   that answers 202 instead (the blob went away meanwhile) opens an upload session, which step 3 uses;
3. else upload it: one ``PUT`` streamed from the file, its bytes hashed as they go (a file that does not match its
   digest is never committed: :class:`~.layout.CheckedBlob`), and the registry checks the digest too.

Then an index's child manifests are put by digest (those the repository lacks), and the root manifest under the
tag, last: a failed push never moves the tag.  Without a tag (``tag=None``) the root manifest is put by its digest:
the image is in the repository and no tag names it (``build`` attaches its attestations before it tags it).
Another writer pushing the same blobs at the same moment is harmless (a blob upload racing another one commits the
same bytes under the same digest); a blob deleted between its upload and the manifest ``PUT`` (a concurrent delete
or garbage collection) fails with one line naming it.

Progress goes to ``on_line``: "push: X of Y uploading (N of M blobs done)" at most every few seconds, and a last
line of what was uploaded, mounted and already there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AuthError, NotFoundError, OperationError, RegistryError
from ..progress.units import count_of, human_bytes
from ..reference import check_tag
from ..stop import Stop
from .client import RegistryClient
from .index_walk import walk_index
from .layout import CheckedBlob, blob_path, manifest_of, root_manifest
from .manifest import Descriptor, Manifest

log = logging.getLogger(__name__)

LineSink = Callable[[str], None]
Clock = Callable[[], float]
MAX_MOUNT_SOURCES = 16  # repositories asked (HEAD) for a blob the target lacks, most similar name first
MAX_CATALOG_NAMES = 5000  # names of the namespace read from /v2/_catalog, at most
CATALOG_PAGE = 1000
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class LayoutPush:
    """What a push of a layout did: the digest put under the tag, and the bytes of the image's blobs that were
    uploaded, mounted from another repository (``mounted_from``: digest -> repository), or already in the target
    (``present``), of ``total``."""

    digest: str
    uploaded: int
    mounted: int
    present: int
    total: int
    mounted_from: dict[str, str] = field(default_factory=dict)
    uploaded_blobs: tuple[str, ...] = ()


def _ignore(line: str) -> None:
    return None


def push_layout(  # noqa: PLR0913 - the target, then keyword-only options with defaults
    client: RegistryClient, layout: Path, repository: str, tag: str | None, *, mount_from: Sequence[str] = (),
    on_line: LineSink = _ignore, ref_name: str | None = None, discover: bool = True,
    every: float = PROGRESS_EVERY_S, clock: Clock = time.monotonic,
) -> LayoutPush:
    """Push the image of OCI layout ``layout`` (see :func:`.layout.root_manifest`; ``ref_name`` picks one of
    several) to ``repository:tag`` of ``client``'s registry (``tag`` None: by its digest, untagged), sending only
    the blobs it lacks (see the module docstring); ``discover=False`` asks only ``mount_from`` for mounts, not the
    catalog.

    Raises ValidationError for a bad tag, LayoutError for a layout that is missing or malformed, BlobDigestError
    for a blob file that does not match its digest, AuthError if refused, OperationError when a blob vanished
    before the manifest was put, RegistryError otherwise.
    """
    if tag is not None:
        check_tag(tag)
    root = root_manifest(layout, ref_name)
    children = _child_manifests(layout, root)
    blobs = _unique_blobs([*children, root])
    progress = UploadProgress(on_line, sum(blob.size for blob in blobs), len(blobs), every, clock)
    sources = MountSources(client, repository, mount_from, discover=discover, on_line=on_line)
    tally = _Tally()
    for blob in blobs:
        _ensure_blob(client, blob_path(layout, blob.digest), repository, blob, sources, progress, tally)
    for child in children:
        if client.head_manifest(repository, child.digest) is None:
            _put_manifest(client, repository, child.digest, child)
    digest = _put_manifest(client, repository, root.digest if tag is None else tag, root)
    progress.finish(tally)
    return LayoutPush(digest, tally.uploaded, tally.mounted, tally.present, progress.total,
                      dict(tally.mounted_from), tuple(tally.uploaded_blobs))


def _child_manifests(layout: Path, root: Manifest) -> list[Manifest]:
    """The manifests under an index, each after its own children (the order they must be put in); raises
    IndexDepthError for indexes nested deeper than engines follow (:func:`.index_walk.walk_index`)."""
    walk = walk_index(root, lambda child: manifest_of(layout, child), f"OCI layout {layout}: {root.digest}")
    return [manifest for manifest in walk if manifest is not root]


def _unique_blobs(manifests: Sequence[Manifest]) -> list[Descriptor]:
    """Every blob the manifests refer to, each once, in order (foreign layers left out)."""
    seen: dict[str, Descriptor] = {}
    for manifest in manifests:
        for blob in manifest.blobs():
            seen.setdefault(blob.digest, blob)
    return list(seen.values())


@dataclass
class _Tally:
    uploaded: int = 0
    mounted: int = 0
    present: int = 0
    mounted_from: dict[str, str] = field(default_factory=dict)
    uploaded_blobs: list[str] = field(default_factory=list)


class BlobSender:
    """Sends blobs to ``repository`` one at a time as :func:`push_layout` sends a layout's (present, mounted from
    another repository, or uploaded), before any manifest names them: a build uploads its layers while the rest of
    the image is still being made, and its push then finds them there.  Blobs alone change nothing a user sees (no
    manifest, no tag).  One thread calls it; :attr:`sent` is what it did (its ``digest`` empty).  ``stop``: once it
    is set, an upload under way ends before its next piece (its session cancelled) and :meth:`send` raises
    Stopped."""

    def __init__(self, client: RegistryClient, repository: str, *, mount_from: Sequence[str] = (),  # noqa: PLR0913
                 on_line: LineSink = _ignore, discover: bool = True, stop: Stop | None = None) -> None:
        self._client, self._repository, self._stop = client, repository, stop
        self._sources = MountSources(client, repository, mount_from, discover=discover, on_line=on_line)
        self._progress = UploadProgress(on_line, 0, 0, float("inf"))
        self._tally = _Tally()

    def send(self, path: Path, blob: Descriptor) -> None:
        """Make the repository hold ``blob``, whose file is ``path``.  Raises as :func:`push_layout`."""
        if self._stop is not None:
            self._stop.check()
        self._progress.total += blob.size
        _ensure_blob(self._client, path, self._repository, blob, self._sources, self._progress, self._tally,
                     self._stop)

    @property
    def sent(self) -> LayoutPush:
        tally = self._tally
        return LayoutPush("", tally.uploaded, tally.mounted, tally.present, self._progress.total,
                          dict(tally.mounted_from), tuple(tally.uploaded_blobs))


def _ensure_blob(  # noqa: PLR0913 - one blob's push needs its target, its file, its sources and the counters
    client: RegistryClient, path: Path, repository: str, blob: Descriptor, sources: "MountSources",
    progress: "UploadProgress", tally: _Tally, stop: Stop | None = None,
) -> None:
    """Make ``repository`` hold ``blob``: present, mounted, or uploaded (see the module docstring)."""
    if client.blob_exists(repository, blob.digest):
        tally.present += blob.size
        progress.blob_done()
        return
    source = sources.source_of(blob.digest)
    session = client.start_upload(repository, blob.digest, source)
    if session is None and source is not None:
        tally.mounted += blob.size
        tally.mounted_from[blob.digest] = source
        sources.worked(source)
        progress.blob_done()
        return
    assert session is not None  # a plain start (no mount asked) always opens a session
    try:
        with CheckedBlob(path, blob, progress.sent if stop is None else _stopping(progress.sent, stop)) as reader:
            client.finish_upload(repository, session, reader, blob.digest)
    except BaseException:
        client.cancel_upload(repository, session)
        raise
    tally.uploaded += blob.size
    tally.uploaded_blobs.append(blob.digest)
    progress.blob_done()


def _stopping(on_bytes: Callable[[int], None], stop: Stop) -> Callable[[int], None]:
    """``on_bytes``, after a check of ``stop`` (each piece of an upload: Stopped ends it)."""

    def counted(size: int) -> None:
        stop.check()
        on_bytes(size)

    return counted


def _put_manifest(client: RegistryClient, repository: str, reference: str, manifest: Manifest) -> str:
    """Put ``manifest`` under ``reference`` (the client sends it again while another writer links the same blobs:
    :meth:`~.client.RegistryClient.put_manifest`); a refusal because a blob is gone becomes one clear line.

    Raises OperationError when a blob or child manifest it needs is no longer in ``repository`` (deleted by
    another writer since it was pushed), AuthError, RegistryError otherwise.
    """
    try:
        return client.put_manifest(repository, reference, manifest)
    except NotFoundError as exc:
        raise OperationError(f"{exc}: it was pushed a moment ago (deleted by another writer or garbage "
                             "collection?); push again") from None


class MountSources:
    """The repositories of the registry a blob may be mounted from (see the module docstring): ``given`` first,
    then, read once on first need, the namespace's other repositories from the catalog, most similar first."""

    def __init__(self, client: RegistryClient, repository: str, given: Sequence[str] = (), *,  # noqa: PLR0913
                 discover: bool = True, on_line: LineSink = _ignore, limit: int = MAX_MOUNT_SOURCES) -> None:
        self._client, self._repository, self._on_line, self._limit = client, repository, on_line, limit
        self._given = [name for name in dict.fromkeys(given) if name != repository]
        self._discover = discover
        self._order: list[str] | None = None

    def candidates(self) -> list[str]:
        """The repositories asked for a blob, in the order asked (the catalog is read on the first call)."""
        if self._order is None:
            found = self._siblings() if self._discover else []
            ranked = rank_by_similarity(self._repository, [n for n in found if n not in self._given])
            self._order = (self._given + ranked)[: max(self._limit, len(self._given))]
        return self._order

    def source_of(self, digest: str) -> str | None:
        """The first candidate that holds blob ``digest`` (one HEAD each; one refused or gone is passed over)."""
        for name in self.candidates():
            try:
                if self._client.blob_exists(name, digest):
                    return name
            except (AuthError, NotFoundError) as exc:
                log.debug("not mounting from %s: %s", name, exc)
        return None

    def worked(self, name: str) -> None:
        """``name`` just served a mount: ask it first next time (an image's layers tend to come from one)."""
        order = self.candidates()
        order.remove(name)
        order.insert(0, name)

    def _siblings(self) -> list[str]:
        """The catalog's other repositories under the target's namespace; none (with a line) if it is not read."""
        namespace = self._repository.rpartition("/")[0]
        prefix = f"{namespace}/" if namespace else ""
        names: list[str] = []
        try:
            for name in self._client.list_repositories(after=prefix, page_size=CATALOG_PAGE,
                                                       max_pages=MAX_CATALOG_NAMES // CATALOG_PAGE):
                if not name.startswith(prefix):
                    break
                if name != self._repository and "/" not in name[len(prefix):]:
                    names.append(name)
        except RegistryError as exc:
            self._on_line(f"push: the registry's catalog cannot be read ({exc}); blobs of other repositories are "
                          "not mounted, only uploaded")
        return names


def rank_by_similarity(repository: str, names: Sequence[str]) -> list[str]:
    """``names`` ordered by how much of ``repository``'s last component they share at its start and its end
    (``torch-2.3.0-cu121`` before ``torch-2.2-cu118`` before ``jax-0.4-cu121`` for ``torch-2.3.1-cu121``), then by
    name (pure)."""
    own = repository.rpartition("/")[2]

    def shared(name: str) -> int:
        other = name.rpartition("/")[2]
        return _common_prefix(own, other) + _common_prefix(own[::-1], other[::-1])

    return sorted(names, key=lambda name: (-shared(name), name))


def _common_prefix(a: str, b: str) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


class UploadProgress:
    """Bytes uploaded of the image's total, as "push: X of Y uploading (N of M blobs done)" at most every
    ``every`` seconds, and a last line (:meth:`finish`).  Takes its clock, so it is tested without sleeping."""

    def __init__(self, emit: LineSink, total: int, blobs: int, every: float = PROGRESS_EVERY_S,  # noqa: PLR0913
                 clock: Clock = time.monotonic) -> None:
        self._emit, self.total, self._blobs, self._every, self._clock = emit, total, blobs, every, clock
        self._sent, self._done, self._last = 0, 0, clock()

    def sent(self, count: int) -> None:
        """``count`` more bytes went out (negative: an upload started again)."""
        self._sent += count
        self._maybe_emit()

    def blob_done(self) -> None:
        """One more blob is in the repository (present, mounted or uploaded)."""
        self._done += 1
        self._maybe_emit()

    def line(self) -> str:
        """The progress now, as one line."""
        return (f"push: {human_bytes(self._sent)} of {human_bytes(self.total)} uploading "
                f"({self._done} of {count_of(self._blobs, 'blob')} done)")

    def _maybe_emit(self) -> None:
        if self._clock() - self._last >= self._every:
            self._emit(self.line())
            self._last = self._clock()

    def finish(self, tally: _Tally) -> None:
        """The last line: what was uploaded, mounted from other repositories, and already there."""
        self._emit(f"push: {human_bytes(tally.uploaded)} uploaded, {human_bytes(tally.mounted)} mounted from other "
                   f"repositories ({count_of(len(tally.mounted_from), 'blob')}), {human_bytes(tally.present)} "
                   f"already there, of {human_bytes(self.total)}")
