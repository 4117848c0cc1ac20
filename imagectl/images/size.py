"""An image's expected size before it is built, and the size budget that gates a build (pure).

The expected size is given per layer group, in the groups ``diff`` reads from a built image's history
(:mod:`.image_facts`): ``system`` (the base image and the layers the engine adds to it: Python, the venv, the JIT
step's OS packages), one group per install layer of the lock (``[framework] layers``), ``extras``, and ``imagectl``
(the ``.pyc`` layer and ``/opt/imagectl``'s files).  Each group is made of parts, and each part says how its numbers
are known (:data:`PartHow`):

- ``manifest``: the base image's layers, compressed, as its manifest lists them (a measurement of bytes that will be
  pulled; a manifest gives no unpacked size, so that is unknown);
- ``wheel``: a locked package.  Compressed: the wheel file's bytes, an estimate of its bytes in the layer: the
  assembled build copies the wheel's deflate streams into the layer as they are (:mod:`imagectl.assemble.layer`),
  a tar entry costs about what a zip entry does, and an engine that installs with pip compresses the same files
  again at a like ratio.  Unpacked: the sum of its members' sizes, read from the zip's central directory, what the
  install writes (RECORD aside);
- ``estimate``: the ``.pyc`` files the image's Python compiles from the wheels' ``.py`` members, :data:`PYC_PER_FILE`
  bytes a file and :data:`PYC_PER_PY` per ``.py`` byte; stored as they are in an assembled gzip layer
  (:mod:`imagectl.assemble.deflate` writes stored blocks), else compressed to :data:`PYC_COMPRESSED` of that;
- ``rendered``: ``/opt/imagectl``'s files, whose bytes the plan holds (compressed as the layer writer would);
- ``unknown``: what cannot be known before the build (the system layers), or was not fetched (``note`` says why).

A group's (and the image's) total is the sum of its known parts; :attr:`ExpectedGroup.complete` says whether that is
all of it or a floor.  Nothing here is a measurement of the image: the real sizes come from the built image's
manifest (:func:`real_over_budget`).

The budget (:func:`budget_of`): ``[build] size_budget`` of the team's configuration and ``size_budget`` of the
profile's ``[framework]`` table, each the most bytes the image's layers may weigh compressed (what a registry stores
and a node pulls); where both are set the smaller applies.  :func:`over_budget` judges the expected size before
anything is built (a floor over the budget is over it), :func:`real_over_budget` the built image before a tag names
it; each refusal names the five largest contributors.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..lock.lockfile import LockedPackage, canonical_name
from ..progress.units import human_bytes
from .layer_group_names import IMAGECTL_GROUP, SYSTEM_GROUP

if TYPE_CHECKING:
    from .image_facts import GroupSize

PartHow = Literal["manifest", "wheel", "estimate", "rendered", "unknown"]
LayerKind = Literal["stored", "compressed"]  # how imagectl's own files (.pyc, /opt/imagectl) end up in their layer
# A .py file's .pyc: PYC_PER_FILE bytes plus PYC_PER_PY per byte of source.  CPython 3.11's py_compile (checked-hash,
# as the image compiles) of the 12,719 .py files of 144 packages (143 MB; pip, setuptools, numpy, requests,
# cryptography, ...) gave 202 MB of .pyc (1.41 bytes per byte in all), an empty module's .pyc 194 to 200 bytes: 200
# bytes a file and the rest per byte of source fit both
PYC_PER_FILE = 200
PYC_PER_PY = 1.395
# a .pyc byte compressed: the tar of those .pyc files at gzip level 6 was 0.33 of their bytes (zstd level 3, which an
# assembled zstd build writes, is taken to compress them alike)
PYC_COMPRESSED = 0.33
# a file of imagectl's own in an assembled gzip layer: its tar header and padding as stored deflate blocks, measured
# with LayerWriter (1,000 and 100 files of 1 kB to 100 kB: 193 to 209 bytes each above the file's own)
STORED_ENTRY_BYTES = 200
CONTRIBUTORS = 5  # a refusal names this many of the largest parts


@dataclass(frozen=True)
class WheelSize:
    """What is known of one wheel file: its bytes (``size``), its members' bytes (``unpacked``: the central
    directory's uncompressed sizes) and its ``.py`` members' (bytes and count); None: not known."""

    filename: str
    size: int | None
    unpacked: int | None = None
    py: int | None = None
    py_files: int | None = None


@dataclass(frozen=True)
class BaseLayers:
    """The base image as its manifest lists it: the reference pulled, its manifest digest and its layers' sizes, and
    what else the estimate should say of them (``note``: a build that pushes them compressed otherwise)."""

    reference: str
    digest: str
    layers: tuple[int, ...]
    note: str = ""


@dataclass(frozen=True)
class Part:
    """One contributor to a layer group: bytes compressed and unpacked (None: unknown), how they are known, and a
    note (why unknown, or how estimated)."""

    name: str
    compressed: int | None
    unpacked: int | None
    how: PartHow
    note: str = ""


@dataclass(frozen=True)
class ExpectedGroup:
    """One layer group's expected size: the sum of its known parts."""

    group: str
    parts: tuple[Part, ...]

    @property
    def compressed(self) -> int:
        """The known parts' compressed bytes (all of them when :attr:`complete`, else a floor)."""
        return sum(p.compressed or 0 for p in self.parts)

    @property
    def unpacked(self) -> int:
        """The known parts' unpacked bytes (a floor unless :attr:`unpacked_complete`)."""
        return sum(p.unpacked or 0 for p in self.parts)

    @property
    def complete(self) -> bool:
        """Whether every part's compressed size is known."""
        return all(p.compressed is not None for p in self.parts)

    @property
    def unpacked_complete(self) -> bool:
        """Whether every part's unpacked size is known."""
        return all(p.unpacked is not None for p in self.parts)


@dataclass(frozen=True)
class ExpectedSize:
    """An image's expected size, group by group (see the module docstring)."""

    groups: tuple[ExpectedGroup, ...]

    @property
    def compressed(self) -> int:
        """The known compressed bytes of every group (a floor unless :attr:`complete`)."""
        return sum(g.compressed for g in self.groups)

    @property
    def unpacked(self) -> int:
        """The known unpacked bytes of every group (a floor unless :attr:`unpacked_complete`)."""
        return sum(g.unpacked for g in self.groups)

    @property
    def complete(self) -> bool:
        """Whether every compressed size is known."""
        return all(g.complete for g in self.groups)

    @property
    def unpacked_complete(self) -> bool:
        """Whether every unpacked size is known."""
        return all(g.unpacked_complete for g in self.groups)

    def largest(self, count: int = CONTRIBUTORS) -> list[Part]:
        """The ``count`` parts of known compressed size that weigh most, the largest first (then by name)."""
        known = [p for g in self.groups for p in g.parts if p.compressed]
        return sorted(known, key=lambda p: (-(p.compressed or 0), p.name))[:count]


@dataclass(frozen=True)
class Budget:
    """A size budget: the most bytes an image's layers may weigh compressed, and which setting says so."""

    limit: int
    source: str  # "[build] size_budget", or "[framework] size_budget of FILE"


@dataclass(frozen=True)
class SizeInputs:
    """What the expected size of one image is computed from (gathered by :mod:`.size_facts`).

    ``lock_groups``: the install layers (name, packages), the extras' last; ``wheels``: canonical name -> the wheel's
    sizes (a package without one is unknown, ``wheel_note`` says why); ``base``: the base's manifest (None: unknown,
    ``base_note`` says why); ``files``: ``/opt/imagectl``'s files (None: not rendered); ``kind``: how imagectl's own
    files are written (``stored`` in an assembled gzip build); ``pyc_layer``: the ``.pyc`` files are a layer of their
    own (an assembled build), else they are in the lock layers pip installs them in."""

    lock_groups: tuple[tuple[str, tuple[LockedPackage, ...]], ...]
    wheels: Mapping[str, WheelSize]
    wheel_note: str = "not fetched"
    base: BaseLayers | None = None
    base_note: str = "not fetched"
    files: Mapping[str, bytes] | None = None
    kind: LayerKind = "stored"
    pyc_layer: bool = True


def expected_size(inputs: SizeInputs) -> ExpectedSize:
    """The expected size of the image ``inputs`` describe, group by group (see the module docstring)."""
    lock = []
    for name, packages in inputs.lock_groups:
        parts = [wheel_part(p, inputs.wheels.get(canonical_name(p.name)), inputs.wheel_note) for p in packages]
        if not inputs.pyc_layer:
            parts.append(pyc_part(f".pyc of the {name} layer", _wheels_of(packages, inputs.wheels), "compressed"))
        lock.append(ExpectedGroup(name, tuple(parts)))
    top = [files_part(inputs.files, inputs.kind)]
    if inputs.pyc_layer:
        every = tuple(p for _, packages in inputs.lock_groups for p in packages)
        top.insert(0, pyc_part(".pyc", _wheels_of(every, inputs.wheels), inputs.kind))
    return ExpectedSize((system_group(inputs.base, inputs.base_note), *lock, ExpectedGroup(IMAGECTL_GROUP, tuple(top))))


def _wheels_of(packages: Sequence[LockedPackage], wheels: Mapping[str, WheelSize]) -> list[WheelSize | None]:
    return [wheels.get(canonical_name(p.name)) for p in packages]


def system_group(base: BaseLayers | None, note: str) -> ExpectedGroup:
    """The ``system`` group: the base's layers (from its manifest), and the layers the engine adds (unknown)."""
    engine = Part("system layers (Python, venv, JIT packages)", None, None, "unknown",
                  "built by the engine: known after the build")
    if base is None:
        return ExpectedGroup(SYSTEM_GROUP, (Part("base image", None, None, "unknown", note), engine))
    shown = f"base {base.reference}@{base.digest.removeprefix('sha256:')[:12]}"
    said = "; ".join(filter(None, (f"{len(base.layers)} layers; a manifest gives no unpacked size", base.note)))
    return ExpectedGroup(SYSTEM_GROUP, (Part(shown, sum(base.layers), None, "manifest", said), engine))


def wheel_part(package: LockedPackage, wheel: WheelSize | None, note: str) -> Part:
    """A locked package's part: its wheel's bytes and its members' bytes (see the module docstring)."""
    name = f"{package.name}=={package.version}"
    if wheel is None:
        return Part(name, None, None, "unknown", note)
    return Part(name, wheel.size, wheel.unpacked, "wheel" if wheel.size is not None else "unknown",
                wheel.filename if wheel.unpacked is not None else f"{wheel.filename}: central directory not read")


def pyc_part(name: str, wheels: Sequence[WheelSize | None], kind: LayerKind) -> Part:
    """The ``.pyc`` files compiled from the ``.py`` members of ``wheels``: :data:`PYC_PER_FILE` bytes a file and
    :data:`PYC_PER_PY` per ``.py`` byte, stored (plus :data:`STORED_ENTRY_BYTES` per file) or compressed to
    :data:`PYC_COMPRESSED`; unknown when a wheel's members were not read."""
    if any(w is None or w.py is None or w.py_files is None for w in wheels):
        return Part(name, None, None, "unknown", "needs every wheel's central directory")
    py = sum(w.py or 0 for w in wheels if w is not None)
    files = sum(w.py_files or 0 for w in wheels if w is not None)
    unpacked = round(py * PYC_PER_PY) + files * PYC_PER_FILE
    compressed = unpacked + files * STORED_ENTRY_BYTES if kind == "stored" else round(unpacked * PYC_COMPRESSED)
    how = "stored" if kind == "stored" else f"compressed to {PYC_COMPRESSED}"
    return Part(name, compressed, unpacked, "estimate",
                f"{files} .py files, {human_bytes(py)}: {PYC_PER_FILE} bytes of .pyc a file and {PYC_PER_PY} per "
                f"byte, {how}")


def files_part(files: Mapping[str, bytes] | None, kind: LayerKind) -> Part:
    """``/opt/imagectl``'s files: their bytes, stored (plus :data:`STORED_ENTRY_BYTES` each) or deflated."""
    name = "/opt/imagectl files"
    if files is None:
        return Part(name, None, None, "unknown", "rendered by build --plan and build")
    unpacked = sum(len(data) for data in files.values())
    if kind == "stored":
        return Part(name, unpacked + len(files) * STORED_ENTRY_BYTES, unpacked, "rendered")
    return Part(name, sum(len(zlib.compress(data, 6)) + STORED_ENTRY_BYTES for data in files.values()), unpacked,
                "rendered")


def budget_of(config_budget: int | None, framework_budget: int | None, framework_source: str) -> Budget | None:
    """The budget of a build: the smaller of the team's (``[build] size_budget``) and the profile family's
    (``[framework] size_budget`` of ``framework_source``); None when neither is set."""
    settings = ((config_budget, "[build] size_budget"),
                (framework_budget, f"[framework] size_budget of {framework_source}"))
    found = [Budget(limit, where) for limit, where in settings if limit is not None]
    return min(found, key=lambda b: b.limit) if found else None


def contributors_text(parts: Sequence[Part]) -> str:
    """``torch==2.3.1 780.1 MB, nvidia-cudnn-cu12==8.9.2.26 731.7 MB, ...``."""
    return ", ".join(f"{p.name} {human_bytes(p.compressed or 0)}" for p in parts)


def over_budget(expected: ExpectedSize, budget: Budget) -> str | None:
    """The refusal of an image whose expected compressed size (or its floor, where parts are unknown) is over
    ``budget``, naming the largest contributors; None when it fits (as far as is known)."""
    if expected.compressed <= budget.limit:
        return None
    floor = "" if expected.complete else "at least "
    return (f"expected size {floor}{human_bytes(expected.compressed)} compressed is over the size budget "
            f"{human_bytes(budget.limit)} ({budget.source}), before anything is built or pushed; the largest: "
            f"{contributors_text(expected.largest())}")


def real_over_budget(groups: Sequence[GroupSize], total: int, budget: Budget) -> str | None:
    """The refusal of a built image whose layers weigh ``total`` bytes compressed (its manifest's sizes), over
    ``budget``, naming its largest layer groups (``groups``: :func:`.image_facts.layer_groups`); None when it fits."""
    if total <= budget.limit:
        return None
    largest = sorted(groups, key=lambda g: (-g.size, g.group))[:CONTRIBUTORS]
    named = ", ".join(f"{g.group} {human_bytes(g.size)} ({g.layers} layer{'s' if g.layers != 1 else ''})"
                      for g in largest) or "its layer groups are unknown"
    return (f"built image is {human_bytes(total)} compressed, over the size budget {human_bytes(budget.limit)} "
            f"({budget.source}); no tag names it; the largest: {named}")
