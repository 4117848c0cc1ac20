"""Layers written straight into containers-storage, buildah's image store, with its own CLI (Debian's
``containers-storage`` package, the same containers/storage library buildah is built on).

Why: ``buildah pull oci:LAYOUT`` of an assembled image copies each layer blob into a temporary file while it
decompresses it once to learn its digest, and only then decompresses it a second time into the store.  For the
3 GB of a torch image's lock layers that is most of a build.  ``containers-storage import-layer`` applies a blob
in one pass, and it can start on a layer while the next ones are still being written.

How a pull then reuses them: containers/image gives each layer it stores the id :func:`storage_layer_id` computes
from the diff_ids of the layers up to it (the chain), and when a layer of that id is already in the store it uses
it as it is.  A layer imported under that id, on the parent of the same rule, is therefore the one the pull would
have made.  The pull trusts the id, so :meth:`LayerStore.layer` is read back after each import and the caller
refuses a layer whose content digest is not the diff_id it was made from.

:class:`LayerStager` drives that for a build: it stages an image's layers through
:meth:`~imagectl.engine.LayoutEngine.stage_layer`, from the bottom up, in a thread of its own, while the build
writes the next ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BuildError, EngineError, ImagectlError
from ..stop import Stop
from . import LayoutEngine
from .process import run_child

TOOL = "containers-storage"
_TIMEOUT_S = 1800  # one layer of several GB, on a slow disk


def storage_layer_id(diff_ids: Sequence[str]) -> str:
    """The id containers/image gives the last layer of ``diff_ids`` (the image's layers from the bottom up, as
    ``sha256:HEX``): the first layer's is its diff_id's hex digits; each next one's is the sha256 of
    ``PARENT_ID + "+" + DIFF_HEX`` (pure)."""
    if not diff_ids:
        raise ValueError("a layer chain has at least one layer")
    layer_id = ""
    for diff_id in diff_ids:
        algorithm, _, hexdigest = diff_id.partition(":")
        if algorithm != "sha256" or len(hexdigest) != 64:
            raise ValueError(f"not a sha256 diff_id: {diff_id!r}")
        layer_id = hexdigest if not layer_id else hashlib.sha256(f"{layer_id}+{hexdigest}".encode()).hexdigest()
    return layer_id


@dataclass(frozen=True)
class StoredLayer:
    """A layer of the store: its id, the digest of its uncompressed tar, and of the blob it was made from."""

    id: str
    diff_digest: str
    compressed_digest: str


class LayerStore:
    """The store buildah uses, through the ``containers-storage`` program, with buildah's own store options."""

    def __init__(self, binary: str, options: Sequence[str]) -> None:
        self._argv = [binary, *options]

    @classmethod
    def of(cls, store: Mapping[str, Any]) -> LayerStore | None:
        """The store ``buildah info`` describes (its ``store`` object), or None where the tool is not installed or
        this process is not root (a rootless store lives in a user namespace only buildah enters)."""
        binary = shutil.which(TOOL)
        if binary is None or os.geteuid() != 0:
            return None
        root, run, driver = store.get("GraphRoot"), store.get("RunRoot"), store.get("GraphDriverName")
        if not (isinstance(root, str) and isinstance(run, str) and isinstance(driver, str) and root and run and driver):
            return None
        options = ["--graph", root, "--run", run, "--storage-driver", driver]
        for option in store.get("GraphOptions") or ():
            options += ["--storage-opt", str(option)]
        return cls(binary, options)

    def layer(self, layer_id: str) -> StoredLayer | None:
        """The layer ``layer_id``, or None when the store has none of that id."""
        done = self._call(["layer", "--json", layer_id])  # exits 1 even when it prints the layer
        try:
            found = json.loads(done.stdout or "[]")
        except ValueError:
            raise EngineError(f"{TOOL}: layer {layer_id[:12]}: unreadable answer: {_last(done)}") from None
        for item in found if isinstance(found, list) else ():
            if isinstance(item, dict) and item.get("id") == layer_id:
                return StoredLayer(layer_id, str(item.get("diff-digest") or ""),
                                   str(item.get("compressed-diff-digest") or ""))
        return None

    def put(self, layer_id: str, parent: str, blob: Path, *, stop: Stop | None = None) -> None:
        """Make layer ``layer_id`` on ``parent`` ("" for none) from the layer blob ``blob`` (compressed or not);
        raises EngineError when the store refuses (an id already in use among them), Stopped when ``stop`` was set
        meanwhile (the import ended: the store removes a layer it did not finish)."""
        done = self._call(["import-layer", "--id", layer_id, "--file", str(blob), *([parent] if parent else [])],
                          stop=stop)
        if done.returncode != 0:
            raise EngineError(f"{TOOL}: import of layer {layer_id[:12]}: {_last(done)}")

    def delete(self, layer_id: str) -> bool:
        """Remove layer ``layer_id`` unless an image, a container or another layer uses it; whether it went."""
        return self._call(["delete-layer", layer_id]).returncode == 0

    def shutdown(self) -> None:
        """Undo the bind mount of the store's driver folder on itself that the program leaves when it exits, unless a
        layer is mounted (``shutdown``, not forced); never raises."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([*self._argv, "shutdown"], capture_output=True, check=False, timeout=60,
                           stdin=subprocess.DEVNULL)

    def _call(self, args: Sequence[str], stop: Stop | None = None) -> subprocess.CompletedProcess[str]:
        """Run one command (it ends with the build's ``stop`` and with imagectl: :mod:`.process`), then
        :meth:`shutdown`, also when it was ended."""
        try:
            return run_child([*self._argv, *args], stop=stop, timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise EngineError(f"{TOOL} {args[0]}: no answer within {_TIMEOUT_S}s") from None
        except OSError as exc:
            raise EngineError(f"{TOOL} {args[0]}: {exc.strerror or exc}") from None
        finally:
            self.shutdown()


class LayerStager:
    """Stages an image's layers into ``engine``'s store (:meth:`~imagectl.engine.LayoutEngine.stage_layer`), from the
    bottom up, in a thread of its own: :meth:`add` each layer in the image's order as soon as its blob is written,
    then :meth:`close`.  Where the engine cannot stage, or a layer fails to, the rest are left to the load (which
    makes them itself: slower, the same image); a staged layer that is not what its diff_id says fails the build.

    ``stop``: the build's stop; once it is set, nothing more is staged and an import under way ends.  ``ledger``: a
    file that gets the store id of each layer imported, one a line, so that the layers of a build that died before
    it could remove them are found by the next (:mod:`imagectl.images.sweep`)."""

    def __init__(self, engine: LayoutEngine, *, stop: Stop | None = None, ledger: Path | None = None) -> None:
        self._engine, self._chain = engine, list[str]()
        self._queue: queue.SimpleQueue[tuple[str, Callable[[], Path]] | None] = queue.SimpleQueue()
        self._abort, self._stop, self._ledger = threading.Event(), stop or Stop(), ledger
        self.done: dict[str, int] = {"imported": 0, "present": 0}
        self.seconds, self.stopped = 0.0, ""
        self.took: list[float] = []  # seconds of each layer staged, from the bottom up
        self._error: BuildError | None = None
        self._thread = threading.Thread(target=self._work, name="imagectl-stage", daemon=True)
        self._thread.start()

    def add(self, diff_id: str, blob: Callable[[], Path]) -> None:
        """The next layer up: its diff_id and where its blob file is (asked only if the layer must be imported)."""
        self._queue.put((diff_id, blob))

    def close(self, *, abort: bool = False) -> None:
        """Wait until every layer added is staged (``abort``: only the one being imported now); raises the
        BuildError of a layer that is not what it stands for."""
        if abort:
            self._abort.set()
        self._queue.put(None)
        self._thread.join()
        if self._error is not None and not abort:
            raise self._error

    def describe(self) -> str:
        """What it did, for the build's log."""
        if self.stopped:
            return f"layers not staged ({self.stopped}): the load made them"
        return (f"{self.done['imported']} layers staged into the engine's store as they were written "
                f"({self.seconds:.0f} s), {self.done['present']} there already (seconds per layer: "
                + " ".join(f"{t:.0f}" for t in self.took) + ")")

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            self._chain.append(item[0])
            if self._abort.is_set() or self._stop.is_set() or self.stopped or self._error is not None:
                continue
            started = time.monotonic()
            try:
                how = self._engine.stage_layer(tuple(self._chain), item[1], stop=self._stop)
            except BuildError as exc:
                self._error = exc
            except (ImagectlError, ValueError) as exc:  # ValueError: a diff_id that is not sha256:HEX
                self.stopped = str(exc)
            else:
                if how == "unsupported":
                    self.stopped = "the engine cannot: apt-get install containers-storage"
                else:
                    self.done[how] += 1
                    if how == "imported":
                        self._note(storage_layer_id(self._chain))
            self.took.append(time.monotonic() - started)
            self.seconds += self.took[-1]


    def _note(self, layer_id: str) -> None:
        if self._ledger is not None:
            with contextlib.suppress(OSError), self._ledger.open("a", encoding="ascii") as ledger:
                ledger.write(layer_id + "\n")


def staged_by(ledger: Path) -> list[str]:
    """The store ids a :class:`LayerStager`'s ledger lists (none when it cannot be read)."""
    try:
        lines = ledger.read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return []
    return [line for line in lines if len(line) == 64 and all(c in "0123456789abcdef" for c in line)]


def _last(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr or done.stdout or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"
