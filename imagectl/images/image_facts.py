"""What ``diff`` knows of one pushed image, and the pure readers that make it from what a registry serves.

An image's facts come from its manifest (compressed layer sizes), its config (labels, creation time, the history
that says which step made each layer) and its attestations (:mod:`imagectl.evidence`: the check report and the
SBOM), never from its layers: nothing is pulled.  Every function here is pure; :mod:`.read_facts` does the reading.

Layer groups (:func:`layer_groups`): each layer is put in the group of the step that made it, read from the config's
history, whose entries that made a layer pair one to one with the manifest's layers:

- ``system``: everything below the lock's first layer (the base image, Python, the OS packages of the JIT step, a
  CA bundle; with a private index the one layer that copies the whole venv);
- one group per install layer of the lock, named as ``[framework] layers`` names it (``cuda``, ``libs``,
  ``framework``, ``rest``): the step that copies or installs ``/opt/imagectl/lock-N-NAME.txt``, and the layers an
  assembled build writes of a wheel's big files (``imagectl: install PATH (a file of PIN)``), which come right before
  their group's layer;
- ``extras``: the layer of a team's extras (``extras-lock.txt``);
- ``imagectl``: the rest above the lock (the lock file, the check, the entry point, an assembled build's .pyc).

A history that does not pair with the layers (an image not built by imagectl, a hand-edited config) gives no groups,
only the total.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..advisories.match import Finding
from ..errors import InputError, OperationError
from ..labels import expectations
from ..lock.lockfile import canonical_name
from ..render.context import EXTRAS_LOCK_FILE
from .layer_group_names import EXTRAS_GROUP, IMAGECTL_GROUP, SYSTEM_GROUP

_LOCK_LAYER = re.compile(r"/opt/imagectl/lock-\d+-(?P<name>[A-Za-z0-9_.-]+?)\.txt\b")
_OWN_FILE = re.compile(r"^imagectl: install (?!/opt/imagectl/)\S+ \(a file of ")  # a big file's own layer
_DEB_PURL = re.compile(r"^pkg:deb/[^/]+/(?P<name>[^@?#]+)@(?P<version>[^?#]+)")


@dataclass(frozen=True)
class Layer:
    """One layer of an image's manifest: its digest and compressed size."""

    digest: str
    size: int


@dataclass(frozen=True)
class GroupSize:
    """One layer group of an image: its name, how many layers and their compressed bytes (as the manifest says)."""

    group: str
    layers: int
    size: int


@dataclass(frozen=True)
class CheckSummary:
    """What an image's check report says: its result and what the check found in the image (flat strings: the
    framework's version and the CUDA, cuDNN and NCCL it loads, Python, whether the GPU part ran, where it ran)."""

    result: str
    found: Mapping[str, str]


@dataclass(frozen=True)
class ImageFacts:
    """One image as ``diff`` compares it (see the module docstring).

    ``reference`` is what the argument resolved to, ``digest`` what it pointed to (an index's digest for a
    multi-platform image, whose ``platforms`` are listed; every other fact is then of its ``linux/amd64`` image,
    else its first, ``image_digest``).  ``layers`` are that image's, ``groups`` their layer groups (() unknown).
    ``packages`` is the lock (or, for an image of no lock, the pins) plus the extras, by canonical name.
    ``os_packages`` and ``check`` are None when the image has no readable SBOM or check report; ``attestations``
    is ``verify``'s verdict (``ok, signatures ...`` or ``N problems, signatures ...``)."""

    reference: str
    digest: str
    image_digest: str
    labels: Mapping[str, str]
    packages: Mapping[str, str]
    created: str = ""
    platforms: tuple[str, ...] = ()
    layers: tuple[Layer, ...] = ()
    groups: tuple[GroupSize, ...] = ()
    os_packages: Mapping[str, str] | None = None
    check: CheckSummary | None = None
    attestations: str = ""
    attestation_problems: tuple[str, ...] = ()
    advisories: tuple[Finding, ...] = field(default=())

    @property
    def size(self) -> int:
        """The compressed bytes of its layers."""
        return sum(layer.size for layer in self.layers)


def image_packages(labels: Mapping[str, str], where: str) -> dict[str, str]:
    """The Python packages an image's labels record: its lock (else its pins) plus its extras, by canonical name.
    Raises InputError naming ``where`` for an image without imagectl labels."""
    try:
        promised = expectations(labels)
    except OperationError as exc:
        raise InputError(f"{where}: {exc}") from None
    packages = promised["lock"] if promised["lock"] is not None else promised["packages"]
    return {canonical_name(name): version for name, version in {**packages, **promised["extras"]}.items()}


def config_history(raw: bytes) -> list[Mapping[str, Any]]:
    """The ``history`` entries of an image config's bytes (empty when it has none or is no JSON object)."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return []
    history = data.get("history") if isinstance(data, dict) else None
    return [entry for entry in history if isinstance(entry, dict)] if isinstance(history, list) else []


def _group_of(created_by: str, seen_lock: bool) -> str | None:
    """The group of the layer ``created_by`` made; None for a big file's own layer (its group comes next)."""
    found = _LOCK_LAYER.search(created_by)
    if found:
        return found["name"]
    if f"/opt/imagectl/{EXTRAS_LOCK_FILE}" in created_by:
        return EXTRAS_GROUP
    if _OWN_FILE.match(created_by):
        return None
    return IMAGECTL_GROUP if seen_lock else SYSTEM_GROUP


def layer_groups(history: Sequence[Mapping[str, Any]], sizes: Sequence[int]) -> tuple[GroupSize, ...]:
    """The layer groups of an image (see the module docstring) in the order they first appear; () when the
    history's layer-making entries are not as many as the manifest's layers ``sizes``."""
    made = [str(entry.get("created_by") or "") for entry in history if not entry.get("empty_layer")]
    if len(made) != len(sizes) or not sizes:
        return ()
    groups: dict[str, list[int]] = {}
    pending: list[int] = []
    for created_by, size in zip(made, sizes, strict=True):
        group = _group_of(created_by, seen_lock=any(name != SYSTEM_GROUP for name in groups))
        if group is None:
            pending.append(size)
            continue
        groups.setdefault(group, []).extend([*pending, size])
        pending = []
    if pending:
        groups.setdefault(IMAGECTL_GROUP, []).extend(pending)
    return tuple(GroupSize(name, len(found), sum(found)) for name, found in groups.items())


def deb_packages(document: Mapping[str, Any]) -> dict[str, str]:
    """name -> version of every ``pkg:deb`` component of a CycloneDX document (pure; read from the purl)."""
    out = {}
    for component in document.get("components") or []:
        purl = component.get("purl") if isinstance(component, dict) else None
        found = _DEB_PURL.match(purl) if isinstance(purl, str) else None
        if found:
            out[unquote(found["name"])] = unquote(found["version"])
    return out


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def check_summary(predicate: Mapping[str, Any]) -> CheckSummary:
    """The summary of a check-report predicate (:func:`imagectl.evidence.provenance.check_predicate`'s shape)."""
    found, ran, where = (_mapping(predicate.get(key)) for key in ("found", "ran", "where"))
    framework = _mapping(found.get("framework"))
    summary = {"python": _text(found.get("python")), "framework": _text(framework.get("version")),
               "cuda": _text(framework.get("cuda")), "cudnn": _text(framework.get("cudnn")),
               "nccl": _text(framework.get("nccl")), "gpu": "ran" if ran.get("gpuRan") else "not run",
               "platform": _text(where.get("platform"))}
    return CheckSummary(_text(predicate.get("result")) or "unknown", {k: v for k, v in summary.items() if v})
