"""Where a wheel's files go in a virtual environment, as pip installs them (the binary distribution format).

:func:`install_wheel` writes one wheel into a :class:`~.layer.LayerWriter`: the members of its root into purelib or
platlib (``Root-Is-Purelib``), those of ``NAME-VERSION.data/SCHEME/`` into that scheme's folder (``scripts``
with a ``#!python`` first line get the venv's interpreter), a script for each console and GUI entry point (pip's
template), and the dist-info's ``INSTALLER`` (``imagectl``), ``REQUESTED`` and a new ``RECORD`` (every file
with its sha256 and size).  ``.pyc`` files are not written here (:mod:`.compile` makes them in the image, for every
package at once) and RECORD does not list them, which pip's uninstall copes with (it removes a ``.py``'s cached
files with it).  Members go in the wheel's order, which is fixed by its bytes, so one wheel always gives the same
entries.  :func:`planned_files` says which files a wheel installs and where their bytes come from, once, for the writer
here and for :mod:`.conflicts`, which refuses two wheels of a lock that install different bytes at one path.

Nothing of a member is held in memory whole but what is rewritten (a ``#!python`` script, at most
:data:`SCRIPT_CAP`); an installed path is at most :data:`MAX_DEPTH` folders below its scheme folder and
:data:`MAX_PATH_BYTES` long, each name at most 255 bytes (Linux's ``NAME_MAX``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import BuildError
from .layer import EXEC_MODE, FILE_MODE, FileDigest, LayerWriter
from .wheel import Member, Wheel, capped_bytes, first_piece, inflated_chunks, shown

INSTALLER = b"imagectl\n"
# A ``#!python`` script is read whole to rewrite its first line; the biggest of 967 real wheels' is 77 KB (python-sat's
# rc2.py).  Other scripts (maturin's is a 27 MB binary) are copied as they are stored, never read whole.
SCRIPT_CAP = 4 << 20
# The deepest member of 967 real wheels lies 16 folders down (orbax-checkpoint), the longest name is 238 characters;
# a layer writer and the staging of ``.py`` files make each folder in turn, and Linux refuses paths of 4096 bytes.
MAX_DEPTH = 128
MAX_PATH_BYTES = 1024
_NAME_MAX = 255
_ENTRY_POINT = re.compile(r"^(?P<module>[A-Za-z_][\w.]*)\s*:\s*(?P<attr>[A-Za-z_][\w.]*)\s*(\[[\w.,\s-]*\])?$")
_PYTHON_SHEBANG = re.compile(rb"^#!python\S*(\s.*)?$")
_SCRIPT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+-]*$")
_SCRIPT = """\
#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from {module} import {name}
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit({call}())
"""


@dataclass(frozen=True)
class Scheme:
    """The folders of a virtual environment (absolute paths in the image) and its interpreter."""

    prefix: str
    purelib: str
    platlib: str
    scripts: str
    include: str  # headers go to INCLUDE/PROJECT
    python: str

    def folder(self, key: str, wheel: Wheel) -> str:
        """The folder of a ``.data`` scheme ``key``; raises BuildError for one the format does not name."""
        folders = {"purelib": self.purelib, "platlib": self.platlib, "scripts": self.scripts, "data": self.prefix,
                   "headers": f"{self.include}/{wheel.project}"}
        if key not in folders:
            raise BuildError(f"{wheel.path.name}: {wheel.data_dir}/{key} is no install scheme the wheel format knows")
        return folders[key]


def venv_scheme(prefix: str, python: str) -> Scheme:
    """The scheme of the virtual environment at ``prefix`` made by Python ``python`` (``3.11``): the layout
    ``python -m venv`` makes on POSIX (checked in the image by :mod:`.compile`)."""
    site = f"{prefix}/lib/python{python}/site-packages"
    return Scheme(prefix, site, site, f"{prefix}/bin", f"{prefix}/include/site/python{python}", f"{prefix}/bin/python")


Skip = Callable[[str], bool]
Route = Callable[[str, Member], LayerWriter | None]


@dataclass(frozen=True)
class Planned:
    """One file :func:`install_wheel` writes for a wheel: its absolute path, its mode, and its bytes: a ``member``
    copied (``script``: a ``.data/scripts`` file, whose ``#!python`` line gets the venv's interpreter) or ``data``
    made here (an entry point's script, ``INSTALLER``, ``REQUESTED``)."""

    path: str
    mode: int
    member: Member | None = None
    script: bool = False
    data: bytes = b""


def planned_files(wheel: Wheel, scheme: Scheme) -> Iterator[Planned]:
    """The files ``wheel`` installs into ``scheme`` but its RECORD (:func:`record_path`), in the order written: its
    members (the dist-info's RECORD, INSTALLER and REQUESTED aside), its entry points' scripts by name, INSTALLER
    and REQUESTED.  Raises BuildError for a malformed wheel or entry point, or a path out of bounds."""
    site = _site(wheel, scheme)
    made_here = {f"{wheel.dist_info}/{name}" for name in ("RECORD", "INSTALLER", "REQUESTED")}
    for member in wheel.members:
        if member.name not in made_here:
            path, script = _destination(wheel, member.name, scheme, site)
            yield Planned(path, EXEC_MODE if script or member.executable else FILE_MODE, member, script)
    for name, target in sorted(_entry_scripts(wheel).items()):
        yield Planned(f"{scheme.scripts}/{name}", EXEC_MODE, data=_entry_script(wheel, name, target, scheme))
    for name, data in (("INSTALLER", INSTALLER), ("REQUESTED", b"")):
        yield Planned(f"{site}/{wheel.dist_info}/{name}", FILE_MODE, data=data)


def record_path(wheel: Wheel, scheme: Scheme) -> str:
    """Where ``wheel``'s RECORD goes (written last, listing the rest)."""
    return f"{_site(wheel, scheme)}/{wheel.dist_info}/RECORD"


def install_wheel(wheel: Wheel, scheme: Scheme, out: LayerWriter, *, skip: Skip = lambda path: False,
                  route: Route = lambda path, member: None) -> list[str]:
    """Write ``wheel``'s installed files (:func:`planned_files`) into ``out``, leaving out member paths ``skip``
    accepts (another wheel of the layer wrote them already: :mod:`.conflicts` has made sure, for a lock, that it wrote
    the same bytes, so the first and the last writer agree); a member that ``route`` (given its path and the member)
    answers with another writer goes into that one instead (a layer of its own), still listed in ``out``'s RECORD.
    Returns the paths written, RECORD's last.  Raises BuildError for a malformed wheel or entry point."""
    site = _site(wheel, scheme)
    record = record_path(wheel, scheme)
    rows: dict[str, FileDigest] = {}
    for planned in planned_files(wheel, scheme):
        if planned.member is None:
            rows[planned.path] = out.add_bytes(planned.path, planned.data, planned.mode)
        elif not skip(planned.path):
            rewritten = script_bytes(wheel, planned, scheme)
            if rewritten is not None:
                rows[planned.path] = out.add_bytes(planned.path, rewritten, planned.mode)
            else:
                writer = (None if planned.script else route(planned.path, planned.member)) or out
                rows[planned.path] = writer.add_member(planned.path, wheel.path, planned.member, planned.mode)
    out.add_bytes(record, record_text(rows, site, record).encode())
    return [*rows, record]


def script_bytes(wheel: Wheel, planned: Planned, scheme: Scheme) -> bytes | None:
    """The bytes of a ``.data/scripts`` file whose first line is ``#!python...``, that line pointing at the venv's
    interpreter (pip does the same); None for any other file (its member is copied as it is).  Raises BuildError for
    such a script over :data:`SCRIPT_CAP` bytes."""
    if not planned.script or planned.member is None:
        return None
    if not first_piece(wheel.path, planned.member).startswith(b"#!python"):
        return None
    data = capped_bytes(wheel.path, planned.member, SCRIPT_CAP)
    first, newline, rest = data.partition(b"\n")
    shebang = _PYTHON_SHEBANG.match(first.rstrip(b"\r"))
    return b"#!" + scheme.python.encode() + (shebang[1] or b"") + newline + rest if shebang else data


def planned_sha256(wheel: Wheel, planned: Planned, scheme: Scheme) -> str:
    """The sha256 (hex) of the bytes :func:`install_wheel` writes for ``planned``, a piece at a time."""
    digest = hashlib.sha256()
    rewritten = script_bytes(wheel, planned, scheme)
    if planned.member is None or rewritten is not None:
        digest.update(planned.data if planned.member is None else rewritten)  # type: ignore[arg-type]  # one is set
    else:
        for chunk in inflated_chunks(wheel.path, planned.member):
            digest.update(chunk)
    return digest.hexdigest()


def source_files(wheel: Wheel, scheme: Scheme, stage: Path) -> int:
    """Write the ``.py`` files ``wheel`` installs into purelib or platlib under ``stage`` at their paths in the
    image (``stage/opt/venv/lib/...``), for :mod:`.compile`, a piece at a time; how many.  Raises BuildError for a
    malformed wheel or a file that cannot be written."""
    site = _site(wheel, scheme)
    count = 0
    for member in wheel.members:
        if not member.name.endswith(".py"):
            continue
        path, script = _destination(wheel, member.name, scheme, site)
        if script or not path.startswith((scheme.purelib + "/", scheme.platlib + "/")):
            continue
        dest = stage / path.lstrip("/")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            with dest.open("wb") as staged:
                for chunk in inflated_chunks(wheel.path, member):
                    staged.write(chunk)
        except OSError as exc:
            raise BuildError(f"{wheel.path.name}: cannot stage {shown(path)}: {exc.strerror}") from None
        count += 1
    return count


def _site(wheel: Wheel, scheme: Scheme) -> str:
    return scheme.purelib if wheel.root_is_purelib else scheme.platlib


def _destination(wheel: Wheel, name: str, scheme: Scheme, site: str) -> tuple[str, bool]:
    """(absolute path, whether it is a ``.data/scripts`` file) of member ``name``."""
    if not name.startswith(f"{wheel.data_dir}/"):
        return _under(site, name, wheel), False
    key, _, rest = name[len(wheel.data_dir) + 1:].partition("/")
    if not rest:
        raise BuildError(f"{wheel.path.name}: {name} is a file where a scheme folder belongs")
    return _under(scheme.folder(key, wheel), rest, wheel), key == "scripts"


def _under(folder: str, relative: str, wheel: Wheel) -> str:
    """``folder/relative``; raises BuildError for a member that would land outside ``folder``, or a path deeper,
    longer, or with a longer name than an image's file system takes (:data:`MAX_DEPTH`, :data:`MAX_PATH_BYTES`)."""
    parts = PurePosixPath(relative).parts
    if relative.startswith("/") or ".." in parts or not parts:
        raise BuildError(f"{wheel.path.name}: member {shown(relative)!r} would land outside {folder}")
    path = f"{folder}/{'/'.join(parts)}"
    if len(parts) > MAX_DEPTH:
        raise BuildError(f"{wheel.path.name}: member {shown(relative)!r} is {len(parts) - 1} folders deep (at most "
                         f"{MAX_DEPTH} are installed)")
    size = len(path.encode("utf-8", "surrogateescape"))
    if size > MAX_PATH_BYTES or max(len(p.encode("utf-8", "surrogateescape")) for p in parts) > _NAME_MAX:
        raise BuildError(f"{wheel.path.name}: member {shown(relative)!r} would be a path of {size} bytes or hold a "
                         f"name over {_NAME_MAX} (at most {MAX_PATH_BYTES}, names {_NAME_MAX})")
    return path


def _entry_scripts(wheel: Wheel) -> dict[str, str]:
    scripts: dict[str, str] = {}
    for group in wheel.entry_points().values():
        scripts.update(group)
    return scripts


def _entry_script(wheel: Wheel, name: str, target: str, scheme: Scheme) -> bytes:
    """pip's console-script launcher for ``name = module:attr``; raises BuildError for a name or target that is not
    a plain script name and a ``module:attribute`` (nothing else may reach the generated code)."""
    found = _ENTRY_POINT.match(target.strip())
    if not _SCRIPT_NAME.match(name) or found is None:
        raise BuildError(f"{wheel.path.name}: entry point {name!r} = {target!r} is not a script name and "
                         "module:attribute")
    attr = found["attr"]
    return _SCRIPT.format(python=scheme.python, module=found["module"], name=attr.split(".")[0], call=attr).encode()


def record_text(rows: dict[str, FileDigest], site: str, record: str) -> str:
    """RECORD's lines (CSV, as pip writes it: a path with a comma is quoted): each path relative to ``site``
    (``../../../bin/x`` for a script), its hash and size, sorted, RECORD itself last without either (pure)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(sorted([_relative(path, site), digest.sha256, digest.size] for path, digest in rows.items()))
    writer.writerow([_relative(record, site), "", ""])
    return out.getvalue()


def _relative(path: str, site: str) -> str:
    return posixpath.relpath(path, site)
