"""Where a wheel's files go in a virtual environment, as pip installs them (the binary distribution format).

:func:`install_wheel` writes one wheel into a :class:`~.layer.LayerWriter`: the members of its root into purelib or
platlib (``Root-Is-Purelib``), those of ``NAME-VERSION.data/SCHEME/`` into that scheme's folder (``scripts``
with a ``#!python`` first line get the venv's interpreter), a script for each console and GUI entry point (pip's
template), and the dist-info's ``INSTALLER`` (``imagectl``), ``REQUESTED`` and a new ``RECORD`` (every file
with its sha256 and size).  ``.pyc`` files are not written here (:mod:`.compile` makes them in the image, for every
package at once) and RECORD does not list them, which pip's uninstall copes with (it removes a ``.py``'s cached
files with it).  Members go in the wheel's order, which is fixed by its bytes, so one wheel always gives the same
entries.
"""

from __future__ import annotations

import csv
import io
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import BuildError
from .layer import EXEC_MODE, FILE_MODE, FileDigest, LayerWriter
from .wheel import Member, Wheel, member_bytes

INSTALLER = b"imagectl\n"
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


def install_wheel(wheel: Wheel, scheme: Scheme, out: LayerWriter, *, skip: Skip = lambda path: False,
                  route: Route = lambda path, member: None) -> list[str]:
    """Write ``wheel``'s installed files into ``out`` (see the module docstring), leaving out paths ``skip``
    accepts (another wheel of the layer wrote them already, as the later of two pip installs would overwrite);
    a member that ``route`` (given its path and the member) answers with another writer goes into that one
    instead (a layer of its own), still listed in ``out``'s RECORD.  Returns the paths written, RECORD's last.
    Raises BuildError for a malformed wheel or entry point."""
    site = scheme.purelib if wheel.root_is_purelib else scheme.platlib
    record = f"{site}/{wheel.dist_info}/RECORD"
    rows: dict[str, FileDigest] = {}
    for member in wheel.members:
        if member.name in (f"{wheel.dist_info}/RECORD", f"{wheel.dist_info}/INSTALLER", f"{wheel.dist_info}/REQUESTED"):
            continue
        path, script = _destination(wheel, member.name, scheme, site)
        if skip(path):
            continue
        if script:
            rows[path] = _script_file(wheel, member.name, scheme, path, out)
        else:
            writer = route(path, member) or out
            rows[path] = writer.add_member(path, wheel.path, member, EXEC_MODE if member.executable else FILE_MODE)
    for name, target in sorted(_entry_scripts(wheel).items()):
        path = f"{scheme.scripts}/{name}"
        rows[path] = out.add_bytes(path, _entry_script(wheel, name, target, scheme), EXEC_MODE)
    for name, data in ((f"{wheel.dist_info}/INSTALLER", INSTALLER), (f"{wheel.dist_info}/REQUESTED", b"")):
        rows[f"{site}/{name}"] = out.add_bytes(f"{site}/{name}", data)
    out.add_bytes(record, record_text(rows, site, record).encode())
    return [*rows, record]


def source_files(wheel: Wheel, scheme: Scheme, stage: Path) -> int:
    """Write the ``.py`` files ``wheel`` installs into purelib or platlib under ``stage`` at their paths in the
    image (``stage/opt/venv/lib/...``), for :mod:`.compile`; how many."""
    site = scheme.purelib if wheel.root_is_purelib else scheme.platlib
    count = 0
    for member in wheel.members:
        if not member.name.endswith(".py"):
            continue
        path, script = _destination(wheel, member.name, scheme, site)
        if script or not path.startswith((scheme.purelib + "/", scheme.platlib + "/")):
            continue
        dest = stage / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(member_bytes(wheel.path, member))
        count += 1
    return count


def _destination(wheel: Wheel, name: str, scheme: Scheme, site: str) -> tuple[str, bool]:
    """(absolute path, whether it is a ``.data/scripts`` file) of member ``name``."""
    if not name.startswith(f"{wheel.data_dir}/"):
        return _under(site, name, wheel), False
    key, _, rest = name[len(wheel.data_dir) + 1:].partition("/")
    if not rest:
        raise BuildError(f"{wheel.path.name}: {name} is a file where a scheme folder belongs")
    return _under(scheme.folder(key, wheel), rest, wheel), key == "scripts"


def _under(folder: str, relative: str, wheel: Wheel) -> str:
    parts = PurePosixPath(relative).parts
    if relative.startswith("/") or ".." in parts or not parts:
        raise BuildError(f"{wheel.path.name}: member {relative!r} would land outside {folder}")
    return f"{folder}/{'/'.join(parts)}"


def _script_file(wheel: Wheel, name: str, scheme: Scheme, path: str, out: LayerWriter) -> FileDigest:
    """A ``.data/scripts`` file, its ``#!python`` line pointing at the venv's interpreter (pip does the same)."""
    data = member_bytes(wheel.path, wheel.member(name))  # type: ignore[arg-type]  # the member exists
    first, newline, rest = data.partition(b"\n")
    shebang = _PYTHON_SHEBANG.match(first.rstrip(b"\r"))
    if shebang:
        data = b"#!" + scheme.python.encode() + (shebang[1] or b"") + newline + rest
    return out.add_bytes(path, data, EXEC_MODE)


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
