"""The advisories imagectl knows: the shipped snapshot (``matrices/advisories/``) and the team's folders
(``[paths] advisories``), every ``*.json`` OSV record under them."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .. import paths, shipped
from ..config import Config
from ..errors import MatrixError
from .match import Finding, findings
from .record import Advisory, parse_record

ADVISORIES = "advisories"  # the shipped snapshot's folder, under the shipped matrices
MAX_RECORD_BYTES = 4 << 20  # an OSV record of one vulnerability is kilobytes; a bigger file is no record


@dataclass(frozen=True)
class Advisories:
    """The known advisories, by the canonical name of each package they affect."""

    by_package: Mapping[str, tuple[Advisory, ...]]

    @property
    def count(self) -> int:
        """How many records."""
        return len({a.where for items in self.by_package.values() for a in items})

    def findings(self, versions: Mapping[str, str]) -> list[Finding]:
        """Every vulnerability of the locked ``versions`` (canonical name -> version)."""
        relevant = sorted({a for name in versions for a in self.by_package.get(name, ())}, key=lambda a: a.where)
        return findings(relevant, versions)


def advisory_dirs(config: Config) -> list[Path]:
    """The shipped snapshot's folder, then the team's ``[paths] advisories`` folders."""
    return [shipped.shipped_dir("matrices") / ADVISORIES, *config.advisory_dirs]


def read_record(path: Path) -> Advisory | None:
    """The advisory of the OSV JSON file ``path`` (None: withdrawn, or no PyPI package); raises MatrixError naming
    the file for one that cannot be read, is no JSON or no OSV record."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise MatrixError(f"{path}: {path.stat().st_size} bytes is too big for an OSV record")
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise MatrixError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise MatrixError(f"{path}: not a JSON OSV record: {str(exc)[:120]}") from None
    return parse_record(data, str(path))


def record_files(directory: Path) -> list[Path]:
    """The ``*.json`` files under ``directory`` (any depth, sorted); none for a folder that is not there; raises
    MatrixError naming the folder, or the record, that cannot be looked at (a parent the user may not enter)."""
    if not paths.is_dir(directory, MatrixError, "the advisories folder"):
        return []
    try:
        found = sorted(directory.rglob("*.json"))
    except OSError as exc:
        raise paths.cannot_read(exc.filename or directory, exc, MatrixError, "the advisories folder") from None
    return [p for p in found if paths.is_file(p, MatrixError, "the OSV record")]


def load_advisories(dirs: Sequence[Path]) -> Advisories:
    """Every record under ``dirs`` (later folders may add records; one with an id already read replaces it);
    raises MatrixError for a record that cannot be read."""
    by_id: dict[str, Advisory] = {}
    for directory in dirs:
        for path in record_files(directory):
            advisory = read_record(path)
            if advisory is not None:
                by_id[advisory.id] = advisory
    by_package: dict[str, list[Advisory]] = defaultdict(list)
    for advisory in by_id.values():
        for name in dict.fromkeys(part.package for part in advisory.affected):
            by_package[name].append(advisory)
    return Advisories({name: tuple(items) for name, items in by_package.items()})


def known_advisories(config: Config) -> Advisories:
    """The shipped snapshot and the team's folders (see :func:`load_advisories`)."""
    return load_advisories(advisory_dirs(config))
