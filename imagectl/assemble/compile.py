"""The ``.pyc`` files of the installed wheels, made by the image's own Python, and what the image already holds.

pip compiles every ``.py`` it installs with the interpreter it installs for; a ``.pyc`` is only valid for that
Python's bytecode, so the host cannot make them.  :data:`PROBE` runs in a container of the system image (base,
Python, venv) with a staging folder mounted at :data:`STAGE`: it holds the ``.py`` files of every wheel at their
paths in the image (under ``STAGE``).  It compiles each with ``py_compile`` as if it were at its real path (the
``dfile``: tracebacks and ``co_filename`` name the installed file), hash-checked (PEP 552: no timestamp; the same
source gives the same bytes), one process per core, and skips a file that does not compile as pip does.  It also
writes ``probe.json``: the venv's folders as ``sysconfig`` says (checked against :func:`~.install.venv_scheme`) and
the distributions the venv already holds with their files (so a locked package the venv already has is replaced,
not doubled).  Its text is fixed: only paths imagectl wrote into a JSON file reach it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from .install import Scheme

STAGE = "/imagectl-stage"
PROBE_FILE = "probe.json"
SOURCES_FILE = "sources.json"
PROBE = r"""
import concurrent.futures, importlib.metadata, importlib.util, json, os, py_compile, sys, sysconfig
stage = sys.argv[1]
with open(os.path.join(stage, "sources.json")) as f:
    sources = json.load(f)
def compile_one(path):
    try:
        py_compile.compile(stage + path, cfile=stage + importlib.util.cache_from_source(path), dfile=path,
                           doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        return importlib.util.cache_from_source(path)
    except (py_compile.PyCompileError, SyntaxError, ValueError, OSError):
        return None
with concurrent.futures.ProcessPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
    made = [p for p in pool.map(compile_one, sources, chunksize=64) if p]
dists = []
for dist in importlib.metadata.distributions():
    base = str(dist.locate_file(""))
    files = [os.path.normpath(os.path.join(base, str(f))) for f in (dist.files or ())]
    dists.append({"name": dist.metadata["Name"], "version": dist.version, "path": str(dist._path), "files": files})
paths = sysconfig.get_paths()
probe = {"purelib": paths["purelib"], "platlib": paths["platlib"], "scripts": paths["scripts"],
         "prefix": sys.prefix, "python": "%d.%d" % sys.version_info[:2], "pyc": made, "dists": dists}
with open(os.path.join(stage, "probe.json"), "w") as f:
    json.dump(probe, f)
"""


@dataclass(frozen=True)
class InstalledDist:
    """A distribution the image's venv holds before the lock is installed."""

    name: str
    version: str
    path: str  # its .dist-info folder
    files: tuple[str, ...]  # absolute paths RECORD lists


@dataclass(frozen=True)
class Probe:
    """What :data:`PROBE` found: the ``.pyc`` files it wrote (paths in the image) and the venv's distributions."""

    pyc: tuple[str, ...]
    dists: tuple[InstalledDist, ...]


def read_probe(stage: Path, scheme: Scheme) -> Probe:
    """The probe's answer in ``stage``; raises BuildError when there is none or the venv's folders are not
    ``scheme``'s (a base whose venv lays out otherwise cannot take these layers)."""
    try:
        data = json.loads((stage / PROBE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BuildError(f"the compile step wrote no readable {PROBE_FILE}: {exc}") from None
    seen = {key: data.get(key) for key in ("purelib", "platlib", "scripts", "prefix")}
    want = {"purelib": scheme.purelib, "platlib": scheme.platlib, "scripts": scheme.scripts, "prefix": scheme.prefix}
    if seen != want:
        raise BuildError(f"the image's venv lays out {seen}, imagectl writes wheels to {want}; set [build] install = "
                         "\"pip\" for this base")
    dists = tuple(InstalledDist(str(d["name"]), str(d["version"]), str(d["path"]), tuple(map(str, d["files"])))
                  for d in data.get("dists") or ())
    return Probe(tuple(sorted(map(str, data.get("pyc") or ()))), dists)


def write_sources(stage: Path, sources: list[str]) -> None:
    """The list of ``.py`` paths (in the image) the probe compiles."""
    (stage / SOURCES_FILE).write_text(json.dumps(sorted(sources)), encoding="utf-8")
