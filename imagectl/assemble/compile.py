"""The ``.pyc`` files of the installed wheels, made by the image's own Python, and what the image already holds.

pip compiles every ``.py`` it installs with the interpreter it installs for; a ``.pyc`` is only valid for that
Python's bytecode, so the host cannot make them.  :data:`PROBE` runs in a container of the system image (base,
Python, venv) with a staging folder mounted at :data:`STAGE`, started as soon as the system image is built:

1. it writes :data:`VENV_FILE` at once: the venv's folders as ``sysconfig`` says (checked against
   :func:`~.install.venv_scheme`) and the distributions the venv already holds with their files (so a locked
   package the venv already has is replaced, not doubled);
2. it waits for :data:`SOURCES_FILE` (:func:`write_sources`, written when every wheel's ``.py`` files are staged
   at their paths in the image, under ``STAGE``; ``null``: the build stopped, exit at once), at most the seconds
   its second argument says;
3. it compiles each with ``py_compile`` as if it were at its real path (the ``dfile``: tracebacks and
   ``co_filename`` name the installed file), hash-checked (PEP 552: no timestamp; the same source gives the same
   bytes), one process per core, skipping a file that does not compile as pip does, and writes
   :data:`PROBE_FILE`: the same facts and the ``.pyc`` files.

Waiting in a running container lets the compile start the moment the sources are there, whatever else holds the
engine's store then (a layer being staged into it).  Files appear by rename, never half-written.  Its text is
fixed: only paths imagectl wrote into a JSON file reach it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import BuildError
from .install import Scheme

STAGE = "/imagectl-stage"
VENV_FILE = "venv.json"
PROBE_FILE = "probe.json"
SOURCES_FILE = "sources.json"
WAIT_S = 3600  # how long the probe waits for the sources
PROBE = r"""
import concurrent.futures, importlib.metadata, importlib.util, json, os, py_compile, sys, sysconfig, time
stage = sys.argv[1]
def write(name, data):
    with open(os.path.join(stage, name + ".part"), "w") as f:
        json.dump(data, f)
    os.replace(os.path.join(stage, name + ".part"), os.path.join(stage, name))
dists = []
for dist in importlib.metadata.distributions():
    base = str(dist.locate_file(""))
    files = [os.path.normpath(os.path.join(base, str(f))) for f in (dist.files or ())]
    dists.append({"name": dist.metadata["Name"], "version": dist.version, "path": str(dist._path), "files": files})
paths = sysconfig.get_paths()
venv = {"purelib": paths["purelib"], "platlib": paths["platlib"], "scripts": paths["scripts"],
        "prefix": sys.prefix, "python": "%d.%d" % sys.version_info[:2], "dists": dists}
write("venv.json", venv)
go, deadline = os.path.join(stage, "sources.json"), time.monotonic() + float(sys.argv[2] if len(sys.argv) > 2 else 3600)
while not os.path.exists(go):
    if time.monotonic() > deadline:
        sys.exit("imagectl probe: no sources.json in time")
    time.sleep(0.05)
with open(go) as f:
    sources = json.load(f)
if sources is None:
    sys.exit(0)
try:
    os.nice(10)  # the layers being staged meanwhile come first
except OSError:
    pass
def compile_one(path):
    try:
        py_compile.compile(stage + path, cfile=stage + importlib.util.cache_from_source(path), dfile=path,
                           doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
        return importlib.util.cache_from_source(path)
    except (py_compile.PyCompileError, SyntaxError, ValueError, OSError):
        return None
with concurrent.futures.ProcessPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
    made = [p for p in pool.map(compile_one, sources, chunksize=64) if p]
write("probe.json", dict(venv, pyc=made))
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
