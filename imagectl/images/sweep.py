"""What builds that died on this host left behind (``kill -9``, an out-of-memory kill, a reboot), found and removed:
by the next build, and by ``imagectl sweep``.

A build that ends, however it fails, removes what it made.  One that is killed cannot, so everything a build makes
on the host carries its process, ``PID.START`` (:mod:`imagectl.owner`), and whatever belongs to a process that is
gone is a leftover:

- ``container``: a working container imagectl made, ``imagectl-run-PID.START-HEX`` (the compile probe's, a
  check's); ``buildah rm`` unmounts it (its overlay mount holds the system image's files) and removes it;
- ``staged layer``: a layer an assembled build staged into containers-storage (listed in its work folder,
  :data:`imagectl.images.assembled.STAGED_LEDGER`) that no image, container or other layer uses;
- ``work folder``: a build's context and assemble folder under the cache (:mod:`.context_dirs`), gigabytes of
  layers for an assembled build;
- ``partial download``: a wheel download's temporary file in the wheel cache
  (:func:`imagectl.assemble.fetch.partial_prefix`);
- ``temporary folder``: a push's or a build's folder in the system's temporary folder
  (:func:`imagectl.engine.buildah.temporary_prefix`; a push writes a whole image there).

Never touched: anything of a process that is still running, and what the engines make themselves: ``buildah bud``
removes its own working containers when it fails or is told to end (``--force-rm``; it gets SIGTERM when imagectl
dies, :mod:`imagectl.engine.process`), and Docker's build containers are the daemon's, which removes them when the
client goes.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..cache import cache_dir
from ..engine import LayoutEngine
from ..engine.buildah import temporary_owner
from ..engine.layer_store import staged_by
from ..errors import ImagectlError
from ..owner import Owner, host_name
from .assembled import STAGED_LEDGER
from .context_dirs import dead_contexts

Kind = Literal["container", "staged layer", "work folder", "partial download", "temporary folder"]
KINDS: tuple[Kind, ...] = ("container", "staged layer", "work folder", "partial download", "temporary folder")
_PARTIAL = re.compile(r"\.(?P<owner>[0-9]+\.[0-9]+)-(?P<host>[A-Za-z0-9._]+)-.+\.part")


@dataclass(frozen=True)
class Leftover:
    """One thing a dead build left: its kind, its name (a container's, a layer's id, a path) and the process that
    made it (``PID.START``)."""

    kind: Kind
    name: str
    owner: str


@dataclass(frozen=True)
class Swept:
    """What a sweep found, what it removed, and what it could not remove (with the reason)."""

    found: tuple[Leftover, ...]
    removed: tuple[Leftover, ...] = ()
    failed: tuple[tuple[Leftover, str], ...] = field(default_factory=tuple)
    dry_run: bool = False


def find_leftovers(engine: LayoutEngine | None, *, cache: Path | None = None,
                   temporary: Path | None = None) -> list[Leftover]:
    """Everything on this host that imagectl processes now gone left (the module docstring), in the order a sweep
    removes them: containers, staged layers, work folders, partial downloads, temporary folders.  ``engine``: the
    buildah engine (None: no containers or layers are looked at); ``cache``/``temporary``: the cache and temporary
    folders (default: imagectl's).  Raises EngineError when buildah cannot list its containers."""
    cache = cache or cache_dir()
    folders = dead_contexts(cache / "contexts")
    found = [Leftover("container", name, owner.token) for name, owner in engine.leftover_containers()] \
        if engine is not None else []
    for folder, owner in folders:
        ids = staged_by(folder / "assemble" / STAGED_LEDGER)
        if engine is not None and ids:
            found += [Leftover("staged layer", layer, owner) for layer in engine.discard_layers(ids, dry_run=True)]
    found += [Leftover("work folder", str(folder), owner) for folder, owner in folders]
    found += _dead_files(cache / "wheels", lambda name: _owner(_PARTIAL, name), "partial download")
    found += _dead_files(temporary or Path(tempfile.gettempdir()), temporary_owner, "temporary folder")
    return found


def sweep(engine: LayoutEngine | None, *, dry_run: bool = False, cache: Path | None = None,
          temporary: Path | None = None) -> Swept:
    """Find the leftovers (:func:`find_leftovers`) and, unless ``dry_run``, remove them; never raises for one that
    cannot be removed (it is in ``failed``).  Raises EngineError when buildah cannot list its containers."""
    found = find_leftovers(engine, cache=cache, temporary=temporary)
    if dry_run:
        return Swept(tuple(found), dry_run=True)
    removed, failed = [], []
    layers = [item for item in found if item.kind == "staged layer"]
    gone = set(engine.discard_layers([item.name for item in layers])) if engine is not None and layers else set()
    for item in found:
        why = ("" if item.name in gone else "an image, a container or another layer uses it") \
            if item.kind == "staged layer" else _remove(item, engine)
        if why:
            failed.append((item, why))
        else:
            removed.append(item)
    return Swept(tuple(found), tuple(removed), tuple(failed))


def sweep_quietly(engine: LayoutEngine | None, log: Callable[[str], None]) -> Swept | None:
    """:func:`sweep` before a build: one log line when it removed something; never raises (a sweep that cannot
    run is no reason to fail a build)."""
    try:
        swept = sweep(engine)
    except (ImagectlError, OSError):
        return None
    if swept.removed:
        log(f"removed what builds killed earlier left: {describe(swept.removed)}")
    return swept


def describe(items: Sequence[Leftover]) -> str:
    """``2 containers, 1 work folder`` (pure)."""
    counts = [(kind, sum(1 for item in items if item.kind == kind)) for kind in KINDS]
    return ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in counts if n) or "nothing"


def _remove(item: Leftover, engine: LayoutEngine | None) -> str:
    """Remove one leftover (not a staged layer); "" when it went, else why not."""
    if item.kind == "container":
        return engine.remove_container(item.name) if engine is not None else "no buildah"
    path = Path(item.name)
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return ""


def _dead_files(folder: Path, owner_of: Callable[[str], Owner | None], kind: Kind) -> list[Leftover]:
    """The entries of ``folder`` whose name says a process that is gone made them (``owner_of``)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        owner = owner_of(name)
        if owner is not None and not owner.alive():
            found.append(Leftover(kind, str(folder / name), owner.token))
    return found


def _owner(pattern: re.Pattern[str], name: str) -> Owner | None:
    """The process of this host that ``name`` (matched by ``pattern``) says made it; None for another host's."""
    match = pattern.fullmatch(name)
    return Owner.parse(match["owner"]) if match and match["host"] == host_name() else None
