"""Comparing two images bit for bit: a rebuild (an OCI layout on disk) against the registry's image.

Both sides are :class:`ImageSource`\\ s (:class:`LayoutSource`, :class:`RegistrySource`): a manifest, a config and
layer blobs to stream.  :func:`compare_images` says whether the manifests are the same bytes (``reproduced``) and,
where they are not, why: the first layer whose ``rootfs.diff_ids`` differ, with the Dockerfile history entry that
made it on both sides and the files that differ in it (path, type, size, sha256, mode, mtime on each side); or the
config keys that differ when every layer is the same; or, when layers and config agree, that only the compressed
bytes differ.  Layer tars are streamed, decompressed by media type, and each member hashed as it passes: memory
stays bounded by the number of files of a layer, never its bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Protocol

from ..errors import OperationError
from ..registry.client import RegistryClient
from ..registry.layout import blob_path, manifest_of, read_small_blob, root_manifest
from ..registry.manifest import LAYER_COMPRESSION, Descriptor, Manifest, pick_platform

MAX_FILES_SHOWN = 50
_CHUNK = 1024 * 1024
_TYPES = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink",
          tarfile.LNKTYPE: "hardlink", tarfile.CHRTYPE: "char", tarfile.BLKTYPE: "block", tarfile.FIFOTYPE: "fifo"}


class ImageSource(Protocol):
    """One side of a comparison: an image manifest, its config bytes, and its layer blobs as streams."""

    name: str

    def manifest(self) -> Manifest: ...
    def config(self) -> bytes: ...
    def open_layer(self, layer: Descriptor) -> IO[bytes]: ...


class LayoutSource:
    """The image of an OCI layout directory (for an index, its linux/amd64 entry)."""

    def __init__(self, layout: Path, name: str = "rebuilt") -> None:
        self.layout, self.name = layout, name
        root = root_manifest(layout)
        self._manifest = manifest_of(layout, pick_platform(root.children())) if root.is_index else root

    def manifest(self) -> Manifest:
        return self._manifest

    def config(self) -> bytes:
        config = self._manifest.config()
        if config is None:
            raise OperationError(f"{self.layout}: manifest {self._manifest.digest} has no config")
        return read_small_blob(self.layout, config.digest, 64 * 1024 * 1024)

    def open_layer(self, layer: Descriptor) -> IO[bytes]:
        return blob_path(self.layout, layer.digest).open("rb")


class RegistrySource:
    """The image at ``repository:reference`` of a registry (for an index, its linux/amd64 child)."""

    def __init__(self, client: RegistryClient, repository: str, manifest: Manifest, name: str = "registry") -> None:
        self._client, self._repository, self.name = client, repository, name
        if manifest.is_index:
            manifest = client.get_manifest(repository, pick_platform(manifest.children()).digest)
        self._manifest = manifest

    def manifest(self) -> Manifest:
        return self._manifest

    def config(self) -> bytes:
        config = self._manifest.config()
        if config is None:
            raise OperationError(f"registry {self._client.host}: manifest {self._manifest.digest} has no config")
        return self._client.read_blob(self._repository, config.digest, 64 * 1024 * 1024)

    def open_layer(self, layer: Descriptor) -> IO[bytes]:
        return self._client.open_blob(self._repository, layer.digest)  # type: ignore[return-value]


@dataclass(frozen=True)
class FileFacts:
    """One member of a layer tar as the comparison sees it."""

    type: str
    size: int
    sha256: str  # of the contents of a file; the link target of a link; "" otherwise
    mode: str  # octal, e.g. "0o755"
    mtime: float
    owner: str  # uid:gid

    def as_json(self) -> dict[str, Any]:
        return {"type": self.type, "size": self.size, "sha256": self.sha256, "mode": self.mode, "mtime": self.mtime,
                "owner": self.owner}


@dataclass(frozen=True)
class FileDiff:
    """A path that differs in the first differing layer: its facts on each side (None: not in that layer)."""

    path: str
    rebuilt: FileFacts | None
    registry: FileFacts | None

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "rebuilt": self.rebuilt.as_json() if self.rebuilt else None,
                "registry": self.registry.as_json() if self.registry else None}


@dataclass(frozen=True)
class LayerDiff:
    """The first layer whose diff_ids differ: its index (0 = the bottom layer), both diff_ids, the history entry
    that made it on both sides, and the files that differ (at most ``MAX_FILES_SHOWN``; ``files_total`` all)."""

    index: int
    rebuilt_diff_id: str
    registry_diff_id: str
    rebuilt_created_by: str
    registry_created_by: str
    files: tuple[FileDiff, ...] = ()
    files_total: int = 0
    note: str = ""  # why the files were not compared (e.g. no zstd decompressor)

    def as_json(self) -> dict[str, Any]:
        return {"index": self.index, "rebuilt_diff_id": self.rebuilt_diff_id,
                "registry_diff_id": self.registry_diff_id, "rebuilt_created_by": self.rebuilt_created_by,
                "registry_created_by": self.registry_created_by, "files": [f.as_json() for f in self.files],
                "files_total": self.files_total, "note": self.note}


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_images` found; ``reproduced`` when both manifests are the same bytes."""

    rebuilt_digest: str
    registry_digest: str
    rebuilt_config: str
    registry_config: str
    layer: LayerDiff | None = None
    config_keys: tuple[str, ...] = ()  # top-level config keys that differ (when every layer is the same)
    note: str = ""
    history: tuple[int, str, str] | None = None  # the first differing history entry: index, rebuilt, registry (JSON)

    @property
    def reproduced(self) -> bool:
        return self.rebuilt_digest == self.registry_digest

    def as_json(self) -> dict[str, Any]:
        return {"reproduced": self.reproduced, "rebuilt_digest": self.rebuilt_digest,
                "registry_digest": self.registry_digest, "rebuilt_config": self.rebuilt_config,
                "registry_config": self.registry_config, "layer": self.layer.as_json() if self.layer else None,
                "config_keys": list(self.config_keys), "note": self.note,
                "history": {"index": self.history[0], "rebuilt": self.history[1], "registry": self.history[2]}
                if self.history else None}


def compare_images(rebuilt: ImageSource, registry: ImageSource) -> Comparison:
    """Compare ``rebuilt`` with ``registry`` (see the module docstring).  Raises OperationError when a config is
    not JSON, RegistryError or LayoutError when a blob cannot be read."""
    ours, theirs = rebuilt.manifest(), registry.manifest()
    our_config, their_config = _config_json(rebuilt), _config_json(registry)
    base = dict(rebuilt_digest=ours.digest, registry_digest=theirs.digest,
                rebuilt_config=_digest_of(ours.config()), registry_config=_digest_of(theirs.config()))
    if ours.digest == theirs.digest:
        return Comparison(**base)
    index = first_difference(diff_ids(our_config), diff_ids(their_config))
    if index is not None:
        return Comparison(**base, layer=_layer_diff(rebuilt, registry, our_config, their_config, index))
    keys = differing_keys(our_config, their_config)
    if keys:
        return Comparison(**base, config_keys=keys, note="every layer is the same; the config differs",
                          history=history_difference(our_config, their_config))
    return Comparison(**base, note="the same layers and config; the layers' compressed bytes (or the manifest's "
                                   "annotations) differ")


def _digest_of(descriptor: Descriptor | None) -> str:
    return descriptor.digest if descriptor else ""


def _config_json(source: ImageSource) -> dict[str, Any]:
    try:
        data = json.loads(source.config())
    except (ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict):
        raise OperationError(f"the {source.name} image's config is not a JSON object")
    return data


def diff_ids(config: Mapping[str, Any]) -> list[str]:
    """The config's ``rootfs.diff_ids`` (pure)."""
    return [str(d) for d in (config.get("rootfs") or {}).get("diff_ids") or []]


def first_difference(ours: list[str], theirs: list[str]) -> int | None:
    """The index of the first position where the lists differ (one longer than the other counts); None if equal."""
    for index in range(max(len(ours), len(theirs))):
        if index >= len(ours) or index >= len(theirs) or ours[index] != theirs[index]:
            return index
    return None


def layer_history(config: Mapping[str, Any]) -> list[str]:
    """The ``created_by`` of each layer's history entry, in layer order (entries with ``empty_layer`` made no
    layer) (pure)."""
    return [str(entry.get("created_by") or "") for entry in config.get("history") or []
            if isinstance(entry, dict) and not entry.get("empty_layer")]


def history_difference(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> tuple[int, str, str] | None:
    """The first history entry that differs: its index and each side's entry as JSON ("" where absent) (pure)."""
    our_history, their_history = list(ours.get("history") or []), list(theirs.get("history") or [])
    for index in range(max(len(our_history), len(their_history))):
        mine = our_history[index] if index < len(our_history) else None
        other = their_history[index] if index < len(their_history) else None
        if mine != other:
            def text(entry: object) -> str:
                return json.dumps(entry, sort_keys=True) if entry is not None else ""
            return index, text(mine), text(other)
    return None


def differing_keys(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> tuple[str, ...]:
    """The config keys whose values differ, ``config.X`` for keys of the runtime config (pure)."""
    keys = {k for k in {*ours, *theirs} if k != "config" and ours.get(k) != theirs.get(k)}
    inner_ours, inner_theirs = ours.get("config") or {}, theirs.get("config") or {}
    keys |= {f"config.{k}" for k in {*inner_ours, *inner_theirs} if inner_ours.get(k) != inner_theirs.get(k)}
    return tuple(sorted(keys))


def _layer_diff(rebuilt: ImageSource, registry: ImageSource, ours: Mapping[str, Any], theirs: Mapping[str, Any],
                index: int) -> LayerDiff:
    """The first differing layer, with the files that differ in it."""
    our_ids, their_ids = diff_ids(ours), diff_ids(theirs)
    our_history, their_history = layer_history(ours), layer_history(theirs)
    our_layers, their_layers = rebuilt.manifest().layers(), registry.manifest().layers()
    diff = LayerDiff(index, _at(our_ids, index), _at(their_ids, index), _at(our_history, index),
                     _at(their_history, index))
    try:
        our_files = layer_files(rebuilt, our_layers[index]) if index < len(our_layers) else {}
        their_files = layer_files(registry, their_layers[index]) if index < len(their_layers) else {}
    except DecompressorMissing as exc:
        return replace(diff, note=str(exc))
    files = diff_files(our_files, their_files)
    return replace(diff, files=tuple(files[:MAX_FILES_SHOWN]), files_total=len(files))


def _at(values: list[str], index: int) -> str:
    return values[index] if index < len(values) else ""


def diff_files(ours: Mapping[str, FileFacts], theirs: Mapping[str, FileFacts]) -> list[FileDiff]:
    """Every path whose facts differ (or that only one side has), sorted by path (pure)."""
    return [FileDiff(path, ours.get(path), theirs.get(path)) for path in sorted({*ours, *theirs})
            if ours.get(path) != theirs.get(path)]


class DecompressorMissing(OperationError):
    """A layer compressed with zstd, and neither the zstandard module nor the zstd command to read it."""


def layer_files(source: ImageSource, layer: Descriptor) -> dict[str, FileFacts]:
    """Every member of ``layer``'s tar (path -> facts), streamed and decompressed by its media type.  Raises
    DecompressorMissing for zstd without a decompressor, OperationError for a layer that is not a tar of a known
    compression."""
    compression = LAYER_COMPRESSION.get(layer.media_type)
    if compression is None:
        raise OperationError(f"layer {layer.digest}: media type {layer.media_type!r} is not a layer tar imagectl reads")
    with source.open_layer(layer) as raw, decompressed(raw, compression) as stream:
        return tar_facts(stream)


def tar_facts(stream: IO[bytes]) -> dict[str, FileFacts]:
    """path -> facts of every member of the tar ``stream``, read once from start to end (pure over its bytes).
    Raises OperationError for bytes that are not a tar."""
    facts: dict[str, FileFacts] = {}
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                facts[member.name.removeprefix("./").rstrip("/") or "."] = _member_facts(tar, member)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise OperationError(f"a layer is not a readable tar: {exc}") from None
    return facts


def _member_facts(tar: tarfile.TarFile, member: tarfile.TarInfo) -> FileFacts:
    digest = ""
    if member.isfile():
        hasher = hashlib.sha256()
        handle = tar.extractfile(member)
        if handle is not None:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
        digest = hasher.hexdigest()
    elif member.issym() or member.islnk():
        digest = f"-> {member.linkname}"
    return FileFacts(_TYPES.get(member.type, "other"), member.size, digest, oct(member.mode), member.mtime,
                     f"{member.uid}:{member.gid}")


@contextmanager
def decompressed(raw: IO[bytes], compression: str) -> Iterator[IO[bytes]]:
    """``raw`` decompressed: "" as is, "gzip" with the standard library, "zstd" with the zstandard module if it is
    installed, else through the ``zstd`` command; raises DecompressorMissing when there is neither."""
    if compression == "":
        yield raw
    elif compression == "gzip":
        with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
            yield stream  # type: ignore[misc]
    else:
        with _zstd(raw) as stream:
            yield stream


@contextmanager
def _zstd(raw: IO[bytes]) -> Iterator[IO[bytes]]:
    try:
        import zstandard  # type: ignore[import-not-found]  # optional: only where it is installed
    except ImportError:
        zstandard = None
    if zstandard is not None:
        with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
            yield stream
        return
    command = shutil.which("zstd")
    if command is None:
        raise DecompressorMissing("comparing zstd layers needs the zstandard module (pip install zstandard) or the "
                                  "zstd command (apt-get install zstd)")
    with subprocess.Popen([command, "-dc", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,  # noqa: S603
                          stderr=subprocess.DEVNULL) as process:
        feeder = threading.Thread(target=_feed, args=(raw, process.stdin), daemon=True)
        feeder.start()
        try:
            assert process.stdout is not None
            yield process.stdout
        finally:
            process.kill()
            feeder.join(10)


def _feed(raw: IO[bytes], sink: IO[bytes] | None) -> None:
    """Copy ``raw`` into ``sink`` (a decompressor's stdin), then close it; a reader that stopped early is fine."""
    if sink is None:
        return
    try:
        while chunk := raw.read(_CHUNK):
            sink.write(chunk)
    except (BrokenPipeError, OSError):
        pass
    finally:
        with suppress(OSError):
            sink.close()


def format_comparison(result: Comparison) -> list[str]:
    """The lines ``rebuild --compare`` prints (pure)."""
    if result.reproduced:
        return [f"reproduced {result.registry_digest}"]
    lines = [f"differs: rebuilt {result.rebuilt_digest}, registry {result.registry_digest}"]
    if result.layer is not None:
        layer = result.layer
        lines += [f"first differing layer: #{layer.index}",
                  f"  rebuilt  {layer.rebuilt_diff_id or '(no such layer)'}  {_short(layer.rebuilt_created_by)}",
                  f"  registry {layer.registry_diff_id or '(no such layer)'}  {_short(layer.registry_created_by)}"]
        if layer.note:
            lines.append(f"  files not compared: {layer.note}")
        for diff in layer.files:
            lines.append(f"  {diff.path}")
            lines.append(f"    rebuilt  {_facts(diff.rebuilt)}")
            lines.append(f"    registry {_facts(diff.registry)}")
        if layer.files_total > len(layer.files):
            lines.append(f"  ... and {layer.files_total - len(layer.files)} more files")
        if not layer.files and not layer.note:
            lines.append("  the same files; the tars differ in order or headers")
    if result.config_keys:
        lines.append(f"config differs in: {', '.join(result.config_keys)}")
    if result.history is not None:
        index, ours, theirs = result.history
        lines += [f"first differing history entry: #{index}", f"  rebuilt  {_short(ours, 300) or '(absent)'}",
                  f"  registry {_short(theirs, 300) or '(absent)'}"]
    if result.note and result.layer is None:
        lines.append(result.note)
    return lines


def _short(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _facts(facts: FileFacts | None) -> str:
    if facts is None:
        return "(absent)"
    what = f" sha256 {facts.sha256}" if facts.type == "file" else (f" {facts.sha256}" if facts.sha256 else "")
    return f"{facts.type} size {facts.size}{what} mode {facts.mode} mtime {facts.mtime:g} owner {facts.owner}"


__all__ = ["Comparison", "FileDiff", "FileFacts", "ImageSource", "LayerDiff", "LayoutSource", "RegistrySource",
           "compare_images", "format_comparison"]
