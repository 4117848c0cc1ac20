"""The exact wheel files a lock pins, downloaded on the host into a content-addressed cache.

The image build installs a lock's wheels without pip (:mod:`.install`), so the files must be chosen the way pip
would choose them on the image's platform, and be the very bytes the lock hashes:

- :func:`supported_tags` lists the wheel tags CPython ``X.Y`` accepts on a lock's platform (``x86_64-manylinux_2_28``),
  in pip's order, from the platform string alone (never from the running machine);
- :func:`pick_wheel` takes, of one project's files on the index, the wheel of the locked version whose best tag
  comes first in that order, among those the index lists with one of the lock's sha256 or with none at all;
- :func:`fetch_wheels` lists each project once, picks its file and downloads it, a few at a time.

An index need not list hashes: a team's static folder of wheels (``python -m http.server``, nginx, ``dir2pi`` pages)
links its files without a ``#sha256=`` fragment.  As pip with ``--require-hashes`` does, such a file is chosen by its
name (the lock's name and version, the best tag), and its bytes must then hash to one of the lock's sha256
(:func:`expected_sha256`); a file the index lists with a sha256 must have that one, which the lock holds.  Where the
index lists one file of a release with a lock's sha256 and another without any, the listed one wins, as in pip.

The cache is ``cache_dir/<sha256>/<file name>``.  A cached file is hashed again before it is used; one that does not
match its name is replaced by a fresh download (written over, not deleted first: a process that has just put the
right bytes there never loses them).  A download streams into a uniquely named temporary file in ``cache_dir``
(named after its process: :func:`partial_prefix`),
hashed as it comes, and is renamed into place (the folder of its sha256) only when that sha256 is one the file may
have; on any failure it is removed.  Nothing but a verified file ever leaves this module: the layers are written from
those.

Deadlines: listing a project is an index request like any other (the ``[pip] timeout`` for all of it,
:mod:`imagectl.pypi.transport`).  A wheel has no size bound (torch's is 780 MB), so its download is not held to that
whole-request deadline: the request itself (connecting, retries, the answer's headers) is, and then the body must
keep coming: each MiB within ``settings.deadline_s`` of the previous one, and no socket read waiting longer than
``settings.timeout`` (the registry client's rule for blobs, :class:`imagectl.registry.client.BlobReader`).

Stopping: a call's downloads share one :class:`~imagectl.stop.Stop` (the caller's, so a build's other failures and
Ctrl-C reach them): the first failure sets it, and every download then stops before its next socket read, or at once
when it is waiting for one (the stop shuts its connection down); its partial file is removed, and the call raises
that first failure, or Stopped when the stop came from elsewhere.

A CA bundle (``[build] ca_bundle``) is the only trust store of the HTTPS requests made here, whatever
``REQUESTS_CA_BUNDLE`` says: it is given to every HTTPS request by the session's adapter.  Every error is one line
without credentials (URL userinfo and the index URL's password are masked).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import tempfile
import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import requests
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from requests.adapters import HTTPAdapter

from .. import paths
from ..errors import BuildError, ImagectlError, InputError
from ..lock.lockfile import LockedPackage
from ..progress.units import count_of, human_bytes
from ..pypi.simple import DistFile, project_files
from ..pypi.transport import DEFAULT_SETTINGS, IndexDeadline, IndexSettings, error_for_status, index_error
from ..pypi.transport import new_session, request
from ..pypi.wheels import cpython_tag
from ..redact import redact, userinfo_secrets
from ..registry.body import read_some
from ..registry.deadline import PROGRESS_BYTES
from ..owner import host_name, this_process
from ..stop import Stop, Stopped

_PLATFORM = re.compile(r"(?P<arch>x86_64|i686|aarch64|armv7l|ppc64le|s390x|riscv64)-manylinux_2_(?P<minor>[0-9]+)")
# the legacy names of glibc levels (PEP 600): manylinux2014 is glibc 2.17, manylinux2010 2.12, manylinux1 2.5
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
# the oldest glibc 2.x a manylinux tag names on each machine: 2.5 on Intel, 2.17 (manylinux2014) elsewhere
_OLDEST_MINOR = {"x86_64": 5, "i686": 5}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_READ_BYTES = 256 * 1024
_LATE = "less than 1 MiB of the file came in that time"


def linux_platforms(resolver_platform: str) -> list[str]:
    """The platform tags of a lock's ``platform`` header (``x86_64-manylinux_2_28``), most preferred first, as
    :mod:`packaging` orders them on a machine with that glibc: ``manylinux_2_28_x86_64`` down to ``manylinux_2_5``,
    each legacy alias (``manylinux2014``, ``manylinux2010``, ``manylinux1``) right after its level, then
    ``linux_x86_64``.

    Raises:
        InputError: ``resolver_platform`` is not ``MACHINE-manylinux_2_N``.
    """
    match = _PLATFORM.fullmatch(resolver_platform)
    if not match:
        raise InputError(f"platform {resolver_platform!r}: expected MACHINE-manylinux_2_N, e.g. x86_64-manylinux_2_28 "
                         "or aarch64-manylinux_2_28")
    arch, newest = match["arch"], int(match["minor"])
    tags: list[str] = []
    for minor in range(newest, _OLDEST_MINOR.get(arch, 17) - 1, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in _LEGACY:
            tags.append(f"{_LEGACY[minor]}_{arch}")
    return [*tags, f"linux_{arch}"]


def supported_tags(python: str, resolver_platform: str) -> list[Tag]:
    """The wheel tags CPython ``python`` (``3.11``, ``3.13t``) accepts on ``resolver_platform``
    (``x86_64-manylinux_2_28``), most preferred first, as pip on such a machine orders them (``cpython_tags`` then
    ``compatible_tags`` over :func:`linux_platforms`); nothing is read from the running machine.

    Raises:
        InputError: ``python`` is not a CPython version, or ``resolver_platform`` cannot be read.
    """
    abi = cpython_tag(python)
    version = (3, int(abi[3:].rstrip("t")))
    platforms = linux_platforms(resolver_platform)
    return [*cpython_tags(version, [abi], platforms), *compatible_tags(version, f"cp3{version[1]}", platforms)]


def pick_wheel(
    files: Iterable[DistFile], package: LockedPackage, tags: Sequence[Tag], *, index_url: str = ""
) -> DistFile:
    """The file of ``files`` (one project's, as the index lists them) to install for ``package``: a wheel of its name
    and version that the index lists with one of the lock's sha256 or with no sha256 at all, as pip's
    ``--require-hashes`` takes it.  One listed with a lock's sha256 beats one listed without (pip's order too); then
    the best tag, the one earliest in ``tags``; then the higher build number, then the index's order.  A file the
    index lists with another sha256 is never taken.  What the download must hash to: :func:`expected_sha256`.
    ``index_url`` only names the index in the error.

    Raises:
        BuildError: (step ``build``) no file fits; the line says why (the lock gives no sha256, no listed file has
            one of the lock's, sdists only, other platforms).
    """
    files = tuple(files)
    rank: dict[Tag, int] = {}
    for position, tag in enumerate(tags):
        rank.setdefault(tag, position)
    allowed = set(package.hashes)
    usable = [f for f in files if allowed and (_listed_sha256(f) in allowed or _listed_sha256(f) is None)]
    scored = [(score, f) for f in usable if (score := _score(f, package, rank, allowed)) is not None]
    if not scored:
        raise BuildError(_no_wheel_line(files, package, tags, index_url), "build")
    return max(scored, key=lambda pair: pair[0])[1]  # max keeps the first of equals: the index's order


def expected_sha256(file: DistFile, package: LockedPackage) -> tuple[str, ...]:
    """The sha256 that the bytes of ``file`` (picked by :func:`pick_wheel` for ``package``) may have: the one the
    index lists for it, else any of the lock's (the lock does not say which of its hashes is which file's)."""
    listed = _listed_sha256(file)
    return (listed,) if listed is not None else tuple(package.hashes)


def _listed_sha256(file: DistFile) -> str | None:
    """The sha256 the index lists for ``file``; None when it lists none (an empty value counts as none)."""
    return file.hashes.get("sha256") or None


def _score(file: DistFile, package: LockedPackage, rank: Mapping[Tag, int],
           allowed: set[str]) -> tuple[int, int, tuple[Any, ...]] | None:
    """(listed with a lock's sha256, minus the rank of its best tag, its build tag) for a wheel of ``package`` that
    ``rank`` accepts, whose listed sha256 (if any) is well formed; None for any other file."""
    listed = _listed_sha256(file)
    if (listed is not None and not _SHA256.fullmatch(listed)) or "/" in file.filename or "\\" in file.filename:
        return None
    try:
        name, version, build, file_tags = parse_wheel_filename(file.filename)
        same = name == canonicalize_name(package.name) and version == Version(package.version)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    ranks = [rank[tag] for tag in file_tags if tag in rank]
    return (int(listed in allowed), -min(ranks), build) if same and ranks else None


def _no_wheel_line(files: tuple[DistFile, ...], package: LockedPackage, tags: Sequence[Tag], index_url: str) -> str:
    pin = f"{package.name}=={package.version}"
    where = f" on {redact(index_url, userinfo_secrets(index_url))}" if index_url else ""
    if not package.hashes:
        return f"{pin}: the lock gives no sha256 for it, so no file{where} can be matched"
    locked = sum(1 for f in files if _listed_sha256(f) in package.hashes)
    unhashed = sum(1 for f in files if _listed_sha256(f) is None and _is_release(f, package))
    if not locked and not unhashed:
        return (f"{pin}: none of the lock's {count_of(len(package.hashes), 'file')} is listed{where}: no file "
                f"there has the sha256 the lock names (expected sha256 {_digests_text(package.hashes)})")
    target = f"{tags[0].interpreter} {tags[0].platform}" if tags else "this interpreter"
    if not unhashed:
        which = f"the lock's {count_of(locked, 'file')}{where}"
    else:  # files listed without a sha256 could be the lock's: they count, and the line says they are there
        how_many = "" if not locked else f"{unhashed} "
        which = f"the {count_of(locked + unhashed, 'file')} of it{where} ({how_many}listed without a sha256)"
    return f"{pin}: none of {which} is a wheel for {target} (sdists are never installed)"


def _digests_text(digests: Sequence[str]) -> str:
    """Up to three sha256 of ``digests`` (sorted), then how many more: for a line that names what was expected."""
    shown = sorted(digests)[:3]
    more = len(digests) - len(shown)
    return " or ".join(shown) + (f" (or {more} more of the lock's)" if more else "")


def _is_release(file: DistFile, package: LockedPackage) -> bool:
    """Whether ``file`` is a wheel or an sdist of ``package``'s name and version (by its name); never raises."""
    try:
        if file.filename.endswith(".whl"):
            name, version = parse_wheel_filename(file.filename)[:2]
        else:
            name, version = parse_sdist_filename(file.filename)
        return name == canonicalize_name(package.name) and version == Version(package.version)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return False


# --- downloading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    """What one :func:`fetch_wheels` call shares with its threads (read-only but for the ``stop``)."""

    index_url: str
    tags: tuple[Tag, ...]
    cache_dir: Path
    settings: IndexSettings
    ca_bundle: Path | None
    say: Callable[[str], None]
    secrets: tuple[str, ...]
    stop: Stop = field(default_factory=Stop, compare=False)


@dataclass(frozen=True)
class _Got:
    """One verified wheel: where it lies, and how many bytes came over the network and from the cache."""

    path: Path
    downloaded: int = 0
    cached: int = 0


def fetch_wheels(  # noqa: PLR0913 - what to fetch and where from, then the keyword-only knobs of how
    packages: Iterable[LockedPackage],
    index_url: str,
    python: str,
    resolver_platform: str,
    cache_dir: Path,
    *,
    ca_bundle: Path | None = None,
    on_line: Callable[[str], None] = lambda line: None,
    jobs: int = 4,
    settings: IndexSettings = DEFAULT_SETTINGS,
    stop: Stop | None = None,
) -> dict[str, Path]:
    """Download the wheel of every locked package for CPython ``python`` on ``resolver_platform`` from the simple index
    ``index_url`` (credentials in it are used, never shown) into ``cache_dir``, up to ``jobs`` at a time; returns
    canonical name -> path of the verified file (``cache_dir/<sha256>/<file name>``), in the order of ``packages``.

    ``on_line`` gets one line per download as it starts (``downloading NAME (779.2 MB)``) and a last summary line,
    never two at once.  See the module docstring for the cache, the deadlines and ``ca_bundle``.  ``stop``: the
    operation's stop signal (set by the first failure here; when it is set elsewhere, the downloads stop).

    Raises:
        InputError: a bad Python version, platform, index URL, ``jobs`` below 1, a CA bundle that is not a file, or a
            package pinned at two versions.
        PackageIndexError: the index could not be read or a download failed (unreachable, an HTTP error, the deadline).
        BuildError: (step ``build``) no wheel of a package fits, a download does not match the lock's sha256, or the
            cache cannot be written.
        Stopped: ``stop`` was set by another part of the operation.
    """
    started = time.monotonic()
    tags = tuple(supported_tags(python, resolver_platform))
    _check_options(ca_bundle, jobs)
    job = _Job(index_url, tags, cache_dir, settings, ca_bundle, _one_at_a_time(on_line), userinfo_secrets(index_url),
               stop or Stop())
    got = _fetch_all(job, _by_name(packages), jobs)
    on_line(_summary(got.values(), time.monotonic() - started))
    return {name: one.path for name, one in got.items()}


def _check_options(ca_bundle: Path | None, jobs: int) -> None:
    """Raises InputError for a CA bundle that is not a file (or cannot be looked at) or ``jobs`` below 1."""
    if ca_bundle is not None and not paths.is_file(ca_bundle, what="the CA bundle"):
        raise InputError(f"CA bundle {ca_bundle}: no such file")
    if jobs < 1:
        raise InputError(f"wheel downloads: jobs must be at least 1, not {jobs}")


def _one_at_a_time(on_line: Callable[[str], None]) -> Callable[[str], None]:
    """``on_line`` for several threads: one line at a time."""
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            on_line(line)

    return say


def _by_name(packages: Iterable[LockedPackage]) -> dict[str, LockedPackage]:
    """canonical name -> package, each once; raises InputError for one name at two versions."""
    out: dict[str, LockedPackage] = {}
    for pkg in packages:
        name = canonicalize_name(pkg.name)
        if name in out and out[name].version != pkg.version:
            raise InputError(f"{name} is pinned twice: =={out[name].version} and =={pkg.version}")
        out.setdefault(name, pkg)
    return out


def _fetch_all(job: _Job, wanted: Mapping[str, LockedPackage], jobs: int) -> dict[str, _Got]:
    """Fetch every package on ``jobs`` threads; the first failure sets the stop, which ends the rest, and the first
    failure in ``wanted``'s order is raised (Stopped when the stop came from elsewhere); so is an interrupt, once the
    threads have stopped and removed their partial files."""
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="imagectl-wheels")
    futures: dict[str, Future[_Got]] = {name: pool.submit(_fetch_one, job, pkg) for name, pkg in wanted.items()}
    try:
        wait(futures.values(), return_when=FIRST_EXCEPTION)
    except BaseException as exc:  # an interrupt of the calling thread: the downloads stop too
        job.stop.set(exc)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    errors = [f.exception() for f in futures.values() if not f.cancelled() and f.exception() is not None]
    real = [e for e in errors if not isinstance(e, Stopped)]
    if real:
        raise real[0]
    job.stop.check()
    return {name: future.result() for name, future in futures.items()}


def _fetch_one(job: _Job, package: LockedPackage) -> _Got:
    """List ``package``'s project, pick its wheel, and take it from the cache or download it; every error one
    redacted line.  A failure sets the call's stop."""
    try:
        return _fetch_listed(job, package)
    except BaseException as exc:
        if not isinstance(exc, Stopped):
            job.stop.set(exc)
        raise


def _fetch_listed(job: _Job, package: LockedPackage) -> _Got:
    job.stop.check()
    try:
        with _session(job.settings, job.ca_bundle) as session:
            files = project_files(job.index_url, package.name, session, job.settings)
            file = pick_wheel(files, package, job.tags, index_url=job.index_url)
            return _cached_or_download(session, job, _Wanted(file, expected_sha256(file, package), package))
    except ImagectlError as exc:
        exc.args = (redact(str(exc), job.secrets),)
        raise exc from None
    except OSError as exc:  # the cache's own are BuildErrors by now: this one is requests' (a CA bundle it cannot read)
        raise index_error(redact(job.index_url, job.secrets), f"request failed: {exc}") from None


@contextmanager
def _session(settings: IndexSettings, ca_bundle: Path | None) -> Iterator[requests.Session]:
    """A session of the index reader (one per thread: sessions are not shared between threads), trusting only
    ``ca_bundle`` for HTTPS when one is given."""
    session = new_session(settings)
    if ca_bundle is not None:
        session.mount("https://", _TrustOnly(str(ca_bundle)))
    try:
        yield session
    finally:
        session.close()


class _TrustOnly(HTTPAdapter):
    """An adapter that verifies every HTTPS answer against one CA bundle: requests lets ``REQUESTS_CA_BUNDLE``
    override a session's ``verify``, an adapter's ``send`` has the last word."""

    def __init__(self, ca_bundle: str) -> None:
        super().__init__()
        self._ca_bundle = ca_bundle

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs["verify"] = self._ca_bundle
        return super().send(request, **kwargs)


@dataclass(frozen=True)
class _Wanted:
    """The file picked for a package, and the sha256 its bytes may have (:func:`expected_sha256`)."""

    file: DistFile
    sha256: tuple[str, ...]
    package: LockedPackage

    @property
    def pin(self) -> str:
        return f"{self.package.name}=={self.package.version}"


def _cached_or_download(session: requests.Session, job: _Job, wanted: _Wanted) -> _Got:
    """The cached copy of the file (``cache_dir/<sha256>/<file name>`` for a sha256 it may have) whose bytes still
    hash to its folder's name, else a fresh download."""
    for digest in wanted.sha256:
        path = job.cache_dir / digest / wanted.file.filename
        try:
            if path.is_file() and _sha256_of(path, job.stop) == digest:
                return _Got(path, cached=path.stat().st_size)
        except OSError as exc:
            raise _cache_error(path, exc) from None
    path, size = _download(session, job, wanted)
    return _Got(path, downloaded=size)


def _cache_error(path: Path, exc: OSError) -> BuildError:
    """The one-line BuildError for a cache file that cannot be read or written; never raises."""
    return BuildError(f"wheel cache {exc.filename or path}: {exc.strerror or exc}", "build")


def _sha256_of(path: Path, stop: Stop) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(1024 * 1024):
            stop.check()
            sha.update(chunk)
    return sha.hexdigest()


def _download(session: requests.Session, job: _Job, wanted: _Wanted) -> tuple[Path, int]:
    """Download the file into the cache (verified); returns where it lies and its size.  Raises PackageIndexError,
    BuildError."""
    file = wanted.file
    response = request(session, file.url, job.settings, {"Accept-Encoding": "identity"}, stream=True)
    with closing(response), job.stop.hook(functools.partial(_shut_down, response)):
        if not 200 <= response.status_code < 300:
            raise error_for_status(response)
        job.say(f"downloading {file.filename} ({_size_text(response)})")
        return _store(response, wanted, job)


def _shut_down(response: requests.Response) -> None:
    """End the connection of ``response`` at once: a socket read waiting in another thread returns (the stop).  Its
    socket is reached through its file descriptor (urllib3 lets go of the connection's socket object when the
    server will close it), duplicated: the shutdown ends the connection, closing the copy changes nothing."""
    with contextlib.suppress(OSError, ValueError), socket.fromfd(response.raw.fileno(), socket.AF_INET,
                                                                socket.SOCK_STREAM) as copy:
        copy.shutdown(socket.SHUT_RDWR)


def _size_text(response: requests.Response) -> str:
    length = response.headers.get("Content-Length", "")
    return human_bytes(int(length)) if length.isdigit() else "size unknown"


def _store(response: requests.Response, wanted: _Wanted, job: _Job) -> tuple[Path, int]:
    """Stream the body into a temporary file in the cache, hashed as it comes, and rename it to
    ``<sha256>/<file name>`` once that sha256 is one it may have; the temporary file is removed on any failure.
    Returns the file's place and size."""
    url, name = redact(wanted.file.url, job.secrets), wanted.file.filename
    try:
        job.cache_dir.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=job.cache_dir, prefix=partial_prefix(name), suffix=".part")
    except OSError as exc:
        raise _cache_error(job.cache_dir, exc) from None
    try:
        with os.fdopen(handle, "wb") as out:
            got, size = _stream(response, url, out, job)
        check_sha256(got, wanted.sha256, f"{wanted.pin}: {name} from {url}")
        path = job.cache_dir / got / name
        path.parent.mkdir(exist_ok=True)
        os.replace(temporary, path)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # writing the file (the network's errors are PackageIndexErrors by now)
            raise _cache_error(Path(temporary), exc) from None
        raise
    return path, size


def partial_prefix(name: str) -> str:
    """How a download's temporary file in the cache begins: ``.PID.START-HOST-NAME.`` (its process and host,
    :mod:`imagectl.owner`: the cache may be shared by hosts), so that the one a killed build left is found
    (:mod:`imagectl.images.sweep`)."""
    return f".{this_process().token}-{host_name()}-{name}."


def check_sha256(got: str, expected: Sequence[str], what: str) -> None:
    """Nothing when ``got`` (the sha256 of a download's bytes, hex) is one of ``expected``; else raises BuildError
    (step ``build``): ``what`` (the pin, the file and where it came from), what the lock expected and what came."""
    if got not in expected:
        raise BuildError(f"{what} does not match the lock: expected sha256 {_digests_text(expected)}, got sha256 "
                         f"{got}", "build")


def _stream(response: requests.Response, url: str, out: IO[bytes], job: _Job) -> tuple[str, int]:
    """Copy the body to ``out``, each MiB within ``deadline_s`` of the last; returns (sha256 hex, size)."""
    sha, size, since_mark = hashlib.sha256(), 0, 0
    deadline = IndexDeadline.after(job.settings.deadline_s, url, "GET")
    while chunk := _read_chunk(response, url, deadline, job):
        out.write(chunk)
        sha.update(chunk)
        size += len(chunk)
        since_mark += len(chunk)
        if since_mark >= PROGRESS_BYTES:
            since_mark %= PROGRESS_BYTES
            deadline = IndexDeadline.after(job.settings.deadline_s, url, "GET")
    return sha.hexdigest(), size


def _read_chunk(response: requests.Response, url: str, deadline: IndexDeadline, job: _Job) -> bytes:
    """One socket read of the body (b"" at its end).  Raises PackageIndexError, or Stopped once told to stop (also
    when the stop ended the read: its connection shut down)."""
    job.stop.check()
    try:
        chunk = read_some(response.raw, _READ_BYTES, deadline, decode=False, stall_s=job.settings.timeout, late=_LATE)
    except requests.Timeout:
        job.stop.check()
        raise index_error(url, f"the download stalled: no data for {job.settings.timeout:g} s") from None
    except (requests.RequestException, ImagectlError) as exc:
        job.stop.check()
        if isinstance(exc, ImagectlError):
            raise
        raise index_error(url, f"the download broke off: {type(exc).__name__}") from None
    job.stop.check()
    return chunk


def _summary(got: Iterable[_Got], seconds: float) -> str:
    got = list(got)
    downloaded, cached = sum(g.downloaded for g in got), sum(g.cached for g in got)
    return (f"wheels: {count_of(len(got), 'file')}, {human_bytes(downloaded)} downloaded in {seconds:.0f} s, "
            f"{human_bytes(cached)} from the cache")


__all__ = ["check_sha256", "expected_sha256", "fetch_wheels", "linux_platforms", "pick_wheel", "supported_tags"]
