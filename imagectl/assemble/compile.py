"""The ``.pyc`` files of the installed wheels, made by the image's own Python, and what the image already holds: the
host side of the compile probe.

pip compiles every ``.py`` it installs with the interpreter it installs for; a ``.pyc`` is only valid for that
Python's bytecode, so the host cannot make them.  The probe, :mod:`imagectl.assemble.probe.compile_probe` (a module
of the package data, run as a file by the venv's Python: :func:`probe_folder`, :func:`probe_argv`), runs in a
container of the system image (base, Python, venv) with a staging folder mounted at :data:`STAGE`, started as soon as
the system image is built.  It writes :data:`VENV_FILE` at once (the venv's folders and the distributions it holds),
waits for :data:`SOURCES_FILE` (:func:`write_sources`: the ``.py`` files staged at their paths in the image; None:
the build stopped), compiles them hash-checked (PEP 552) as if they were at those paths, and writes
:data:`PROBE_FILE`; :func:`read_probe` reads either answer.  It ends when its stdin does: the engine holds that pipe
open while imagectl runs, so a probe never outlives the build that started it (``kill -9`` included).

Waiting in a running container lets the compile start the moment the sources are there, whatever else holds the
engine's store then (a layer being staged into it): a container started at that moment was held up 10 s by the
staging of an 800 MB layer (``bench/compile_probe.py``).  Only paths imagectl wrote into a JSON file reach the probe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import BuildError
from .install import Scheme
from .probe.compile_probe import PROBE_FILE, SOURCES_FILE, VENV_FILE, WAIT_S

__all__ = ["PROBE_FILE", "SOURCES_FILE", "STAGE", "VENV_FILE", "WAIT_S", "InstalledDist", "Probe", "probe_argv",
           "probe_folder", "read_probe", "write_sources"]

STAGE = "/imagectl-stage"  # where the staging folder is mounted in the probe's container
PROBE_DIR = "/imagectl-probe"  # where the probe's own folder is mounted (read from there, never written)
PROBE_MODULE = "compile_probe.py"


def probe_folder(dest: Path) -> Path:
    """Write the probe module (package data) into the new folder ``dest``, which holds nothing else (it is mounted
    into the probe's container); ``dest``.  Raises OSError when it cannot be written."""
    dest.mkdir(parents=True, exist_ok=True)
    source = resources.files("imagectl.assemble.probe").joinpath(PROBE_MODULE).read_bytes()
    (dest / PROBE_MODULE).write_bytes(source)
    return dest


def probe_argv(python: str, folder: Path, stage: Path, wait_s: float = WAIT_S) -> tuple[list[str], dict[Path, str]]:
    """The command that runs the probe of ``folder`` (:func:`probe_folder`) with the image's ``python`` on the
    staging folder ``stage``, waiting at most ``wait_s`` seconds for the sources and no longer than its stdin stays
    open (the engine holds it open while imagectl runs: ``run_mounted``), and the mounts it needs (host folder: path
    in the container) (pure)."""
    return ([python, f"{PROBE_DIR}/{PROBE_MODULE}", STAGE, f"{wait_s:g}", "stdin"],
            {stage: STAGE, folder: PROBE_DIR})


@dataclass(frozen=True)
class InstalledDist:
    """A distribution the image's venv holds before the lock is installed."""

    name: str
    version: str
    path: str  # its .dist-info folder
    files: tuple[str, ...]  # absolute paths RECORD lists


@dataclass(frozen=True)
class Probe:
    """What the probe found: the ``.pyc`` files it wrote (paths in the image) and the venv's distributions."""

    pyc: tuple[str, ...]
    dists: tuple[InstalledDist, ...]


def read_probe(stage: Path, scheme: Scheme, name: str = PROBE_FILE) -> Probe:
    """The probe's answer in ``stage`` (``name``: :data:`PROBE_FILE`, or :data:`VENV_FILE`, which has no ``.pyc``
    files); raises BuildError when there is none or the venv's folders are not ``scheme``'s (a base whose venv lays
    out otherwise cannot take these layers)."""
    try:
        data = json.loads((stage / name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BuildError(f"the compile step wrote no readable {name}: {exc}") from None
    seen = {key: data.get(key) for key in ("purelib", "platlib", "scripts", "prefix")}
    want = {"purelib": scheme.purelib, "platlib": scheme.platlib, "scripts": scheme.scripts, "prefix": scheme.prefix}
    if seen != want:
        raise BuildError(f"the image's venv lays out {seen}, imagectl writes wheels to {want}; set [build] install = "
                         "\"pip\" for this base")
    dists = tuple(InstalledDist(str(d["name"]), str(d["version"]), str(d["path"]), tuple(map(str, d["files"])))
                  for d in data.get("dists") or ())
    return Probe(tuple(sorted(map(str, data.get("pyc") or ()))), dists)


def write_sources(stage: Path, sources: list[str] | None) -> None:
    """The list of ``.py`` paths (in the image) the probe compiles (None: it exits without compiling), by rename:
    the probe never reads half of it."""
    part = stage / f"{SOURCES_FILE}.part"
    part.write_text(json.dumps(None if sources is None else sorted(sources)), encoding="utf-8")
    part.replace(stage / SOURCES_FILE)
