"""Read one member of a remote zip (a wheel) with HTTP Range requests, never the whole file.

:class:`RangeReader` is a read-only, seekable file object over a URL.  It learns the size from a first
suffix request (``Range: bytes=-N``, which also holds the end-of-central-directory record), then fetches
only the spans :mod:`zipfile` asks for: the central directory, then the local header and data of the one
member.  A server that answers a Range request with ``200`` and the full body is refused, and the total
number of bytes fetched is capped by :attr:`IndexSettings.max_range_bytes`.
"""

from __future__ import annotations

import io
import re
import zipfile

import requests

from imagectl.pypi.transport import (
    DEFAULT_SETTINGS,
    IndexSettings,
    error_for_status,
    index_error,
    read_streamed,
    request,
)

TAIL_BYTES = 64 * 1024 + 22  # the end-of-central-directory record plus the longest zip comment
MIN_FETCH = 64 * 1024
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")


def parse_content_range(url: str, header: str) -> tuple[int, int, int]:
    """Return ``(first, last, total)`` from a ``Content-Range: bytes a-b/n`` header.

    Raises:
        PackageIndexError: the header is missing or not of that form.
    """
    match = _CONTENT_RANGE.match(header.strip())
    if not match:
        raise index_error(url, f"bad or missing Content-Range {header!r} in a 206 answer")
    first, last, total = (int(g) for g in match.groups())
    if not first <= last < total:
        raise index_error(url, f"inconsistent Content-Range {header!r}")
    return first, last, total


def read_body(url: str, response: requests.Response, expected: int,
              settings: IndexSettings = DEFAULT_SETTINGS) -> bytes:
    """Read exactly ``expected`` bytes of a streamed response, refusing to read more, within the ``[pip] timeout``.

    Raises:
        PackageIndexError: the body is shorter or longer than ``expected``, or does not come in time.
    """
    data = read_streamed(response, expected, settings)
    if len(data) != expected:
        shown = f"more than {expected}" if len(data) > expected else str(len(data))
        raise index_error(url, f"range answer has {shown} bytes, expected {expected}")
    return data


def fetch_range(
    session: requests.Session, url: str, spec: str, settings: IndexSettings = DEFAULT_SETTINGS
) -> tuple[int, int, bytes]:
    """GET ``Range: bytes=<spec>`` of ``url``; return ``(first offset, total size, data)``.

    Raises:
        PackageIndexError: the server ignored the Range (200), refused it, or sent an inconsistent answer.
    """
    response = request(session, url, settings, {"Range": f"bytes={spec}", "Accept-Encoding": "identity"}, stream=True)
    with response:
        if response.status_code == 200:
            raise index_error(
                url, "server ignores HTTP Range requests (answered 200); refusing to download the whole file"
            )
        if response.status_code != 206:
            raise error_for_status(response)
        first, last, total = parse_content_range(url, response.headers.get("Content-Range", ""))
        return first, total, read_body(url, response, last - first + 1, settings)


class RangeReader(io.RawIOBase):
    """A read-only seekable file over ``url`` that fetches only the byte spans that are read.

    Raises (from its methods):
        PackageIndexError: any failed range request, or more than ``settings.max_range_bytes`` fetched.
    """

    def __init__(self, session: requests.Session, url: str, settings: IndexSettings = DEFAULT_SETTINGS) -> None:
        super().__init__()
        self._session, self.url, self._settings = session, url, settings
        first, self.size, data = fetch_range(session, url, f"-{TAIL_BYTES}", settings)
        self._spans: list[tuple[int, bytes]] = [(first, data)]
        self.fetched = len(data)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        wanted = min(len(buffer), self.size - self._pos)
        if wanted <= 0:
            return 0
        data = self._cached(self._pos, wanted) or self._fetch(self._pos, wanted)
        buffer[:wanted] = data
        self._pos += wanted
        return wanted

    def _cached(self, start: int, length: int) -> bytes | None:
        for first, data in self._spans:
            if first <= start and start + length <= first + len(data):
                return data[start - first : start - first + length]
        return None

    def _fetch(self, start: int, length: int) -> bytes:
        end = min(self.size, start + max(length, MIN_FETCH)) - 1
        if self.fetched + end - start + 1 > self._settings.max_range_bytes:
            raise index_error(self.url, f"would read more than {self._settings.max_range_bytes} bytes of the file")
        first, _, data = fetch_range(self._session, self.url, f"{start}-{end}", self._settings)
        if first != start:
            raise index_error(self.url, f"asked for bytes from {start}, got bytes from {first}")
        self._spans.append((first, data))
        self.fetched += len(data)
        return data[:length]


def dist_info_metadata_member(url: str, names: list[str], project: str) -> str:
    """Pick ``<project>-<version>.dist-info/METADATA`` among a wheel's member ``names``.

    ``project`` is the normalised project name; when several top-level ``*.dist-info/METADATA`` exist,
    the one whose directory names ``project`` wins.

    Raises:
        PackageIndexError: no such member, or several candidates and none names ``project``.
    """
    candidates = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(candidates) > 1:
        wanted = project.replace("-", "_")
        candidates = [n for n in candidates if n.split("-")[0].lower().replace(".", "_") == wanted] or candidates
    if len(candidates) != 1:
        raise index_error(url, f"wheel has {len(candidates)} candidate *.dist-info/METADATA members, expected 1")
    return candidates[0]


def read_wheel_metadata(
    session: requests.Session, url: str, project: str, settings: IndexSettings = DEFAULT_SETTINGS
) -> bytes:
    """Return the ``*.dist-info/METADATA`` member of the remote wheel at ``url``, via Range requests only.

    Raises:
        PackageIndexError: the server ignores Range, the file is missing or not a zip, or has no METADATA.
    """
    reader = RangeReader(session, url, settings)
    try:
        with zipfile.ZipFile(reader) as archive:
            member = dist_info_metadata_member(url, archive.namelist(), project)
            return archive.read(member)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise index_error(url, f"not a readable wheel (zip): {exc}") from exc
