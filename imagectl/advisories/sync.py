"""``imagectl advisories sync``: refresh a snapshot of OSV records from a copy of an advisory database.

A source is a local folder (a checkout of pypa/advisory-database, ``vulns/<package>/PYSEC-*.yaml``; of
github/advisory-database, ``advisories/github-reviewed/YYYY/MM/GHSA-*/GHSA-*.json``; or any folder of OSV ``.json``
files) or the URL of a zip archive of one (osv.dev's ``PyPI/all.zip``, a GitHub archive of a database).  Only the
records of packages the locks hold are kept, each written as OSV JSON to ``<package>/<ID>.json`` with a ``source``
(the repository or URL it was read from, the path inside it, and the commit where the copy says one).

JSON is read with :func:`json.loads`; pypa's YAML only where PyYAML is installed, with its ``BaseLoader`` (every
scalar a string: no tags, no objects, no ``1.10`` read as the float 1.1).  Nothing read can run code.
"""

from __future__ import annotations

import io
import json
import re
import stat
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from .. import paths
from ..errors import InputError, MatrixError, OperationError
from ..lock.store import write_atomically
from .record import parse_record

MAX_ARCHIVE_BYTES = 1 << 30  # osv.dev's PyPI/all.zip is tens of MiB; a GitHub archive of a database some hundreds
MAX_RECORD_BYTES = 4 << 20
_COMMIT = re.compile(r"[0-9a-f]{40}")
SUFFIXES = (".json", ".yaml", ".yml")


@dataclass(frozen=True)
class Record:
    """A record read from a source, before it is kept or not: its data and where it was read."""

    data: dict[str, Any]
    where: str  # the path inside the source (for errors and the record's ``source``)


@dataclass(frozen=True)
class SyncResult:
    """What a sync wrote: records kept, records read, YAML files left unread (no PyYAML), stale files removed."""

    kept: int
    read: int
    yaml_skipped: int
    removed: int


def _yaml_loader() -> Any:
    """PyYAML's ``load`` with its BaseLoader, or None where PyYAML is not installed (it is no dependency)."""
    try:
        import yaml
    except ImportError:
        return None
    return lambda text: yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 - BaseLoader builds strings only


def parse_text(text: bytes, name: str, where: str) -> Any:
    """The data of one record file ``name`` (JSON, or YAML where PyYAML is installed); raises MatrixError naming
    ``where`` for one that does not parse."""
    try:
        if name.endswith(".json"):
            return json.loads(text.decode("utf-8"))
        loader = _yaml_loader()
        return None if loader is None else loader(text.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - json's and PyYAML's errors both become one line naming the file
        raise MatrixError(f"{where}: not an OSV record ({type(exc).__name__}: {str(exc).splitlines()[0][:100]})") \
            from None


def folder_records(root: Path) -> Iterator[tuple[str, bytes]]:
    """``(path inside root, bytes)`` of every record file under ``root``; raises InputError for a folder that is
    not there, and naming the path for one that cannot be read."""
    if not paths.is_dir(root, InputError, "the --from folder"):
        raise InputError(f"--from {root}: not a folder of OSV records (nor an http(s) URL of a zip of them)")
    for path in _walk(root):
        if path.suffix in SUFFIXES and ".git" not in path.relative_to(root).parts:
            found = paths.status(path, InputError, "the OSV record")
            if found is None or not stat.S_ISREG(found.st_mode):
                continue
            if found.st_size > MAX_RECORD_BYTES:
                raise MatrixError(f"{path}: {found.st_size} bytes is too big for an OSV record")
            yield path.relative_to(root).as_posix(), paths.read_bytes(path, InputError, "the OSV record")


def _walk(root: Path) -> list[Path]:
    """Every path under ``root``, sorted; raises InputError naming the folder that cannot be listed."""
    try:
        return sorted(root.rglob("*"))
    except OSError as exc:
        raise paths.cannot_read(exc.filename or root, exc, InputError, "the --from folder") from None


def archive_records(data: bytes, url: str) -> Iterator[tuple[str, bytes]]:
    """``(member name, bytes)`` of every record file of the zip archive ``data``; raises OperationError for bytes
    that are no zip archive."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise OperationError(f"{url}: the answer is not a zip archive of OSV records") from None
    for info in archive.infolist():
        if info.filename.endswith(SUFFIXES) and not info.is_dir():
            if info.file_size > MAX_RECORD_BYTES:
                raise MatrixError(f"{url}: {info.filename}: {info.file_size} bytes is too big for an OSV record")
            yield info.filename, archive.read(info)


def archive_commit(data: bytes) -> str | None:
    """The commit a GitHub archive of a repository was made from (its zip comment), or None."""
    try:
        comment = zipfile.ZipFile(io.BytesIO(data)).comment.decode("ascii", "replace")
    except zipfile.BadZipFile:
        return None
    return comment if _COMMIT.fullmatch(comment) else None


def folder_commit(root: Path) -> str | None:
    """The commit checked out in ``root`` when it is the top of a git work tree (a checkout of the database, not a
    folder inside another repository), else None."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    top, _, head = out.stdout.strip().partition("\n")
    if out.returncode != 0 or Path(top).resolve() != root.resolve():
        return None
    return head if _COMMIT.fullmatch(head) else None


def download(url: str, timeout: float | None) -> bytes:
    """The bytes at ``url`` (at most :data:`MAX_ARCHIVE_BYTES`); raises OperationError naming the URL."""
    import requests  # here: only a sync from a URL needs an HTTP client

    try:
        with requests.get(url, stream=True, timeout=timeout or 60) as answer:
            answer.raise_for_status()
            chunks, size = [], 0
            for chunk in answer.iter_content(1 << 20):
                size += len(chunk)
                if size > MAX_ARCHIVE_BYTES:
                    raise OperationError(f"{url}: more than {MAX_ARCHIVE_BYTES >> 20} MiB, not read further")
                chunks.append(chunk)
            return b"".join(chunks)
    except requests.RequestException as exc:
        raise OperationError(f"{url}: cannot download the advisories: {type(exc).__name__}: {str(exc)[:160]}") \
            from None


def with_source(data: Any, repository: str, path: str, commit: str | None) -> Any:
    """``data`` with a ``source`` saying where it was read, unless it already carries one (a record of another
    snapshot keeps the upstream source it was first read from)."""
    if not isinstance(data, dict) or isinstance(data.get("source"), dict):
        return data
    source = {"repository": repository, "path": path, **({"commit": commit} if commit else {})}
    return {**data, "source": source}


def kept_package(data: dict[str, Any], packages: set[str], where: str) -> str | None:
    """The first package of ``packages`` the record affects (the folder it is written to), or None; raises
    MatrixError for a record that does not follow the OSV schema."""
    advisory = parse_record(data, where)
    names = [part.package for part in advisory.affected] if advisory else []
    return next((name for name in names if name in packages), None)


def record_file(package: str, ident: str) -> str:
    """``<package>/<ID>.json``; raises MatrixError for an id that cannot be a file name."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", ident):
        raise MatrixError(f"{ident[:60]!r}: an OSV id that cannot be a file name")
    return f"{package}/{ident}.json"


def select(files: Iterable[tuple[str, bytes]], packages: set[str], origin: str,
           commit: str | None) -> tuple[dict[str, dict[str, Any]], int, int]:
    """``({relative file: record}, records read, YAML files skipped)``: the records of ``files`` that affect one
    of ``packages``, each with its source."""
    kept: dict[str, dict[str, Any]] = {}
    read = skipped = 0
    for name, text in files:
        where = f"{origin}/{name}"
        data = parse_text(text, name, where)
        if data is None:  # YAML without PyYAML
            skipped += 1
            continue
        read += 1
        package = kept_package(data, packages, where)
        if package is not None:
            kept[record_file(package, data["id"])] = with_source(data, origin, name, commit)
    return kept, read, skipped


def write_snapshot(records: dict[str, dict[str, Any]], dest: Path) -> int:
    """Write ``records`` under ``dest`` (sorted keys, two-space indent) and remove the ``*.json`` records of
    ``dest`` that are not among them; returns how many were removed.  Raises OperationError."""
    for relative, data in sorted(records.items()):
        write_atomically(dest / relative, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                         "the advisory record")
    stale = [p for p in dest.glob("*/*.json") if p.relative_to(dest).as_posix() not in records]
    for path in stale:
        path.unlink()
    for folder in dest.iterdir() if dest.is_dir() else ():
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    return len(stale)


def source_files(source: str, timeout: float | None) -> tuple[Iterator[tuple[str, bytes]], str, str | None]:
    """``(record files, origin, commit)`` of one ``--from`` value: a local folder or the http(s) URL of a zip
    archive; raises InputError for anything else, OperationError for a download that fails."""
    if re.match(r"[a-z]+://", source):
        if not source.startswith(("https://", "http://")):
            raise InputError(f"--from {source[:80]}: only http(s) URLs of zip archives, or a local folder")
        data = download(source, timeout)
        return archive_records(data, source), source, archive_commit(data)
    root = Path(source).expanduser()
    files = folder_records(root)  # a generator: the folder is checked on first use, so check it now
    if not paths.is_dir(root, InputError, "the --from folder"):
        raise InputError(f"--from {source}: not a folder of OSV records (nor an http(s) URL of a zip of them)")
    return files, str(root.resolve()), folder_commit(root)


def sync_advisories(sources: Iterable[str], dest: Path, packages: set[str], timeout: float | None = None) -> SyncResult:
    """Read every source in order (a later record with the same file replaces an earlier one), keep the records of
    ``packages`` and make ``dest`` hold exactly them, with a README saying where they came from.  Nothing is written
    when a source fails (InputError for a bad ``--from``, MatrixError naming a malformed record, OperationError)."""
    kept: dict[str, dict[str, Any]] = {}
    read = skipped = 0
    for source in sources:
        files, origin, commit = source_files(source, timeout)
        records, n_read, n_skipped = select(files, packages, origin, commit)
        kept.update(records)
        read, skipped = read + n_read, skipped + n_skipped
    removed = write_snapshot(kept, dest)
    write_atomically(dest / "README.md", snapshot_readme(kept.values()), "the advisories README")
    return SyncResult(len(kept), read, skipped, removed)


def snapshot_readme(records: Iterable[dict[str, Any]]) -> str:
    """The snapshot folder's README: what it is, and each source (repository, commit) with its number of records."""
    counts: dict[tuple[str, str], int] = {}
    for data in records:
        source = data.get("source") if isinstance(data.get("source"), dict) else {}
        repository = str(source.get("repository", "?")) + (f" (a mirror of {source['mirror_of']})"
                                                           if source.get("mirror_of") else "")
        key = (repository, str(source.get("commit", "no commit recorded")))
        counts[key] = counts.get(key, 0) + 1
    rows = [f"| {repo} | {commit} | {n} |" for (repo, commit), n in sorted(counts.items())]
    return "\n".join([
        "# Advisories (OSV records)", "",
        "Written by `imagectl advisories sync`: the OSV records of the packages the locks hold, one JSON file per",
        "record (`<package>/<ID>.json`), each as upstream wrote it plus a `source` (repository, path, commit).",
        "Do not edit them by hand: sync again.  A team's own records go in `[paths] advisories`.  A record whose",
        "`source` says `trimmed` left those fields out (the upstream file has them).", "",
        "| repository | commit | records |", "| --- | --- | ---: |", *rows, ""])
