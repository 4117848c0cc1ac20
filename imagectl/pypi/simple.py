"""Read one project's file list from a simple repository index (PEP 691 JSON, PEP 503 HTML fallback).

:func:`project_files` asks for JSON and accepts HTML, follows redirects and ``Link: <...>; rel="next"``
pagination, and returns frozen :class:`DistFile` records with absolute URLs (relative ones are resolved
against the page's URL *after* redirects).  The parsers :func:`parse_json_page` and
:func:`parse_html_page` are pure and can be used on recorded pages.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from types import MappingProxyType
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import requests
from packaging.utils import canonicalize_name

from imagectl.errors import InputError
from imagectl.pypi.transport import DEFAULT_SETTINGS, IndexSettings, get_ok, index_error, session_scope

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
MAX_PAGES = 100

_PROJECT_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_HEX = re.compile(r"^[0-9a-fA-F]+$")


@dataclass(frozen=True)
class DistFile:
    """One file of a project as the index lists it.

    ``hashes`` maps a hash name (``sha256``) to its hex digest.  ``metadata_hint`` says what the index
    advertised about a PEP 658 ``.metadata`` file: ``None`` when nothing, otherwise the (possibly empty)
    hashes of that file.  ``yanked_reason`` is the PEP 592 reason, ``None`` when none was given.
    """

    filename: str
    url: str
    hashes: Mapping[str, str] = field(default_factory=dict, hash=False)
    requires_python: str | None = None
    yanked: bool = False
    metadata_hint: Mapping[str, str] | None = field(default=None, hash=False)
    yanked_reason: str | None = None
    upload_time: str | None = None  # PEP 700 (JSON pages only): ISO 8601 UTC, e.g. 2024-06-05T16:25:38.123Z
    size: int | None = None  # PEP 700 (JSON pages only): the file's bytes; None when the page says none (or no count)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hashes", MappingProxyType(dict(self.hashes)))
        if self.metadata_hint is not None:
            object.__setattr__(self, "metadata_hint", MappingProxyType(dict(self.metadata_hint)))

    @property
    def metadata_url(self) -> str:
        """The PEP 658 URL of this file's core metadata (``url + ".metadata"``)."""
        return self.url + ".metadata"


def normalize_project_name(name: str) -> str:
    """Return the PEP 503 normalised form of ``name`` (``Foo_Bar`` -> ``foo-bar``).

    Raises:
        InputError: ``name`` is not a valid project name.
    """
    if not _PROJECT_NAME.match(name):
        raise InputError(f"not a valid Python project name: {name!r}")
    return canonicalize_name(name)


def project_url(index_url: str, name: str) -> str:
    """Return the URL of project ``name``'s page under the simple index ``index_url``.

    Raises:
        InputError: ``index_url`` is not an http(s) URL, or ``name`` is not a valid project name.
    """
    if urlsplit(index_url).scheme not in ("http", "https") or not urlsplit(index_url).netloc:
        raise InputError(f"not an http(s) index URL: {index_url!r}")
    return f"{index_url.rstrip('/')}/{normalize_project_name(name)}/"


def project_files(
    index_url: str,
    name: str,
    session: requests.Session | None = None,
    settings: IndexSettings = DEFAULT_SETTINGS,
) -> tuple[DistFile, ...]:
    """Return every file the index lists for project ``name``, over all pages, in index order.

    Raises:
        InputError: a bad index URL or project name.
        PackageIndexError: the page is missing (404), unreachable, malformed, or pagination loops.
    """
    url: str | None = project_url(index_url, name)
    seen: set[str] = set()
    files: list[DistFile] = []
    with session_scope(session, settings) as live:
        while url is not None:
            if url in seen or len(seen) >= MAX_PAGES:
                raise index_error(url, f"pagination loops or exceeds {MAX_PAGES} pages")
            seen.add(url)
            response = get_ok(live, url, settings, {"Accept": ACCEPT})
            files.extend(parse_page(response.url, response.headers.get("Content-Type", ""), response.content))
            url = next_page_url(response)
    return tuple(files)


def next_page_url(response: requests.Response) -> str | None:
    """Return the absolute URL of the ``Link: <...>; rel="next"`` page, or ``None``; never raises."""
    target = response.links.get("next", {}).get("url")
    return urljoin(response.url, target) if target else None


def parse_page(page_url: str, content_type: str, body: bytes) -> tuple[DistFile, ...]:
    """Parse a simple-index page by its ``Content-Type`` (JSON or HTML).

    Raises:
        PackageIndexError: an unknown content type, or a malformed page.
    """
    kind = content_type.split(";")[0].strip().lower()
    if kind in ("application/json", JSON_TYPE) or kind.startswith("application/vnd.pypi.simple.latest+json"):
        return parse_json_page(page_url, body)
    if kind in ("text/html", "application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.latest+html"):
        return parse_html_page(page_url, _decode(page_url, body, content_type))
    raise index_error(page_url, f"not a simple index page (Content-Type {content_type or 'missing'!r})")


def _decode(page_url: str, body: bytes, content_type: str) -> str:
    match = re.search(r"charset=([\w.-]+)", content_type, re.IGNORECASE)
    try:
        return body.decode(match.group(1) if match else "utf-8")
    except (LookupError, UnicodeDecodeError) as exc:
        raise index_error(page_url, f"page is not valid text: {exc}") from exc


# --- PEP 691 JSON -------------------------------------------------------------------------------


def parse_json_page(page_url: str, body: bytes | str) -> tuple[DistFile, ...]:
    """Parse a PEP 691 JSON project page; relative file URLs are resolved against ``page_url``.

    Raises:
        PackageIndexError: invalid JSON, an unsupported ``api-version``, or a file entry of the wrong shape.
    """
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise index_error(page_url, f"malformed JSON index page: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("files"), list):
        raise index_error(page_url, "malformed JSON index page: no 'files' list")
    _check_api_version(page_url, document.get("meta"))
    return tuple(_json_file(page_url, entry) for entry in document["files"])


def _check_api_version(page_url: str, meta: Any) -> None:
    version = meta.get("api-version") if isinstance(meta, dict) else None
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise index_error(page_url, f"unsupported simple API version {version!r} (expected 1.x)")


def _json_file(page_url: str, entry: Any) -> DistFile:
    if not isinstance(entry, dict):
        raise index_error(page_url, f"malformed JSON index page: file entry {entry!r} is not an object")
    filename, url = entry.get("filename"), entry.get("url")
    if not isinstance(filename, str) or not filename or not isinstance(url, str) or not url:
        raise index_error(page_url, f"malformed JSON index page: file entry without filename/url: {entry!r}")
    hashes = _json_hashes(page_url, filename, entry.get("hashes", {}))
    requires_python = entry.get("requires-python")
    if requires_python is not None and not isinstance(requires_python, str):
        raise index_error(page_url, f"malformed JSON index page: requires-python of {filename} is not a string")
    yanked = entry.get("yanked", False)
    if not isinstance(yanked, (bool, str)):
        raise index_error(page_url, f"malformed JSON index page: yanked of {filename} is {yanked!r}")
    hint = entry.get("core-metadata", entry.get("dist-info-metadata"))
    uploaded = entry.get("upload-time")
    if uploaded is not None and not isinstance(uploaded, str):
        raise index_error(page_url, f"malformed JSON index page: upload-time of {filename} is not a string")
    size = entry.get("size")  # only ever an estimate's input (imagectl.images.size): one that is no count is unsaid
    size = size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None
    return DistFile(
        filename=filename,
        url=urljoin(page_url, url),
        hashes=hashes,
        requires_python=requires_python or None,
        yanked=yanked is not False,
        metadata_hint=_json_metadata_hint(page_url, filename, hint),
        yanked_reason=yanked if isinstance(yanked, str) and yanked else None,
        upload_time=uploaded or None,
        size=size,
    )


def _json_hashes(page_url: str, filename: str, hashes: Any) -> dict[str, str]:
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise index_error(page_url, f"malformed JSON index page: hashes of {filename} are {hashes!r}")
    return {str(k).lower(): v.lower() for k, v in hashes.items()}


def _json_metadata_hint(page_url: str, filename: str, hint: Any) -> dict[str, str] | None:
    if hint is None or hint is False:
        return None
    if hint is True:
        return {}
    return _json_hashes(page_url, filename, hint)


# --- PEP 503 HTML -------------------------------------------------------------------------------


class _AnchorCollector(HTMLParser):
    """Collects ``<a>`` attributes and text and the first ``<base href>``; attributes come unescaped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self.base: str | None = None
        self._open: tuple[dict[str, str | None], list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self._close_anchor()
            self._open = (dict(attrs), [])

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._close_anchor()

    def close(self) -> None:
        super().close()
        self._close_anchor()

    def _close_anchor(self) -> None:
        if self._open is not None:
            self.anchors.append((self._open[0], "".join(self._open[1]).strip()))
            self._open = None


def parse_html_page(page_url: str, text: str) -> tuple[DistFile, ...]:
    """Parse a PEP 503 HTML project page; relative hrefs resolve against ``<base href>`` or ``page_url``.

    Raises:
        PackageIndexError: an anchor without ``href``, or a malformed hash fragment or metadata attribute.
    """
    collector = _AnchorCollector()
    collector.feed(text)
    collector.close()
    base = urljoin(page_url, collector.base) if collector.base else page_url
    return tuple(_html_file(page_url, base, attrs, label) for attrs, label in collector.anchors)


def _html_file(page_url: str, base: str, attrs: dict[str, str | None], label: str) -> DistFile:
    href = attrs.get("href")
    if not href:
        raise index_error(page_url, f"malformed HTML index page: <a> without href (text {label!r})")
    url, fragment = urldefrag(urljoin(base, href))
    filename = label or unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if not filename:
        raise index_error(page_url, f"malformed HTML index page: no filename for {href!r}")
    yanked = attrs.get("data-yanked", False)
    hint = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
    return DistFile(
        filename=filename,
        url=url,
        hashes=_fragment_hashes(page_url, fragment),
        requires_python=attrs.get("data-requires-python") or None,
        yanked="data-yanked" in attrs,
        metadata_hint=_html_metadata_hint(page_url, filename, hint),
        yanked_reason=(yanked or None) if isinstance(yanked, str) else None,
    )


def _fragment_hashes(page_url: str, fragment: str) -> dict[str, str]:
    """Return ``{name: digest}`` from a ``sha256=<hex>`` fragment; other fragments mean no hash."""
    name, sep, digest = fragment.partition("=")
    if not sep or name.lower() not in hashlib.algorithms_available:
        return {}
    return {name.lower(): _hex_digest(page_url, fragment, digest)}


def _hex_digest(page_url: str, text: str, digest: str) -> str:
    if not _HEX.match(digest):
        raise index_error(page_url, f"malformed HTML index page: bad hash {text!r}")
    return digest.lower()


def _html_metadata_hint(page_url: str, filename: str, hint: str | None) -> dict[str, str] | None:
    if hint is None or hint.strip().lower() == "false":
        return None
    if hint.strip().lower() in ("", "true"):
        return {}
    name, sep, digest = hint.strip().partition("=")
    if not sep:
        raise index_error(page_url, f"malformed HTML index page: metadata attribute {hint!r} of {filename}")
    return {name.lower(): _hex_digest(page_url, hint, digest)}


__all__ = [
    "ACCEPT",
    "DistFile",
    "next_page_url",
    "normalize_project_name",
    "parse_html_page",
    "parse_json_page",
    "parse_page",
    "project_files",
    "project_url",
]
