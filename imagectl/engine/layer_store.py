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
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EngineError

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

    def put(self, layer_id: str, parent: str, blob: Path) -> None:
        """Make layer ``layer_id`` on ``parent`` ("" for none) from the layer blob ``blob`` (compressed or not);
        raises EngineError when the store refuses (an id already in use among them)."""
        done = self._call(["import-layer", "--id", layer_id, "--file", str(blob), *([parent] if parent else [])])
        if done.returncode != 0:
            raise EngineError(f"{TOOL}: import of layer {layer_id[:12]}: {_last(done)}")

    def delete(self, layer_id: str) -> bool:
        """Remove layer ``layer_id`` unless an image, a container or another layer uses it; whether it went."""
        return self._call(["delete-layer", layer_id]).returncode == 0

    def _call(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        """Run one command, then ``shutdown``: the program, unlike buildah, leaves the store's driver folder
        bind-mounted on itself when it exits; ``shutdown`` (not forced) undoes that unless a layer is mounted."""
        try:
            done = subprocess.run([*self._argv, *args], capture_output=True, text=True, check=False,
                                  timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL)
            subprocess.run([*self._argv, "shutdown"], capture_output=True, check=False, timeout=60,
                           stdin=subprocess.DEVNULL)
            return done
        except subprocess.TimeoutExpired:
            raise EngineError(f"{TOOL} {args[0]}: no answer within {_TIMEOUT_S}s") from None
        except OSError as exc:
            raise EngineError(f"{TOOL} {args[0]}: {exc.strerror or exc}") from None


def _last(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr or done.stdout or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"
