"""Core metadata of a distribution file: fetch it (PEP 658, else Range reads of the wheel) and read it.

:func:`wheel_metadata` first tries ``<file url>.metadata`` even when the index does not advertise it (some
indexes serve it for only some files); on 404 it reads ``*.dist-info/METADATA`` out of the wheel with HTTP
Range requests.  :func:`parse_metadata` turns the bytes into a frozen :class:`WheelMetadata`, and
:func:`exact_pins` / :func:`loose_requirements` evaluate its ``Requires-Dist`` for one target environment.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from typing import Literal

import requests
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from imagectl.errors import PackageIndexError
from imagectl.pypi.rangezip import read_wheel_metadata
from imagectl.pypi.simple import DistFile
from imagectl.pypi.transport import (
    DEFAULT_SETTINGS,
    IndexSettings,
    error_for_status,
    index_error,
    request,
    session_scope,
)
from imagectl.pypi.wheels import is_wheel, parse_wheel

_SYS_PLATFORM = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}


@dataclass(frozen=True)
class MetadataDocument:
    """The raw core-metadata bytes of a file, where they came from and how (``pep658`` or ``range``)."""

    url: str
    via: Literal["pep658", "range"]
    content: bytes


@dataclass(frozen=True)
class WheelMetadata:
    """The fields of a core-metadata file that imagectl uses.

    ``requires_python`` is the verbatim ``Requires-Python`` value (validated), ``requires_dist`` the parsed
    ``Requires-Dist`` entries and ``requires_dist_lines`` the same entries verbatim, in file order.
    """

    name: str
    version: Version
    requires_python: str | None
    requires_dist: tuple[Requirement, ...]
    requires_dist_lines: tuple[str, ...] = ()


# --- fetching -----------------------------------------------------------------------------------


def verify_hashes(url: str, content: bytes, hashes: Mapping[str, str]) -> None:
    """Check ``content`` against the strongest known hash in ``hashes`` (sha256 first); none known: no check.

    Raises:
        PackageIndexError: the digest differs from the one the index gave.
    """
    known = sorted(name for name in hashes if name in hashlib.algorithms_available)
    if not known:
        return
    name = "sha256" if "sha256" in known else known[0]
    actual = hashlib.new(name, content).hexdigest()
    if actual != hashes[name].lower():
        raise index_error(url, f"{name} mismatch: the index says {hashes[name]}, the file has {actual}")


def fetch_metadata(
    file: DistFile,
    session: requests.Session | None = None,
    settings: IndexSettings = DEFAULT_SETTINGS,
) -> MetadataDocument:
    """Fetch ``file``'s core metadata: ``url + ".metadata"``, else (404) a Range read of the wheel.

    The ``.metadata`` file is tried whether or not the index advertised it; its hash is verified when
    the index gave one.  The wheel itself is never downloaded whole.

    Raises:
        PackageIndexError: unreachable, a hash mismatch, no ``.metadata`` for a non-wheel, a wheel that
            cannot be range-read (missing, server ignores Range, not a zip, no METADATA member).
    """
    with session_scope(session, settings) as live:
        response = request(live, file.metadata_url, settings)
        if response.status_code in (404, 410):
            if not is_wheel(file):
                raise index_error(file.metadata_url, "not found, and the file is not a wheel to read it from")
            project = parse_wheel(file.filename).name
            document = MetadataDocument(file.url, "range", read_wheel_metadata(live, file.url, project, settings))
        elif 200 <= response.status_code < 300:
            document = MetadataDocument(response.url, "pep658", response.content)
        else:
            raise error_for_status(response)
    verify_hashes(document.url, document.content, file.metadata_hint or {})
    return document


def wheel_metadata(
    file: DistFile,
    session: requests.Session | None = None,
    settings: IndexSettings = DEFAULT_SETTINGS,
) -> WheelMetadata:
    """Fetch and parse ``file``'s core metadata; for a wheel, check it names the wheel's project/version.

    Raises:
        PackageIndexError: as :func:`fetch_metadata`, malformed metadata, or metadata of another release.
    """
    document = fetch_metadata(file, session, settings)
    metadata = parse_metadata(document.content, document.url)
    if is_wheel(file):
        wheel = parse_wheel(file.filename)
        if canonicalize_name(metadata.name) != wheel.name or metadata.version != wheel.version:
            raise index_error(
                document.url, f"metadata is for {metadata.name} {metadata.version}, not {wheel.name} {wheel.version}"
            )
    return metadata


# --- parsing ------------------------------------------------------------------------------------


def parse_metadata(content: bytes | str, source: str) -> WheelMetadata:
    """Parse core metadata (RFC 822 headers) into :class:`WheelMetadata`; ``source`` names it in errors.

    Raises:
        PackageIndexError: not UTF-8, no Metadata-Version/Name/Version, or an invalid version,
            Requires-Python or Requires-Dist.
    """
    message = _headers(content, source)
    name, version = _single(message, "Name", source), _single(message, "Version", source)
    _single(message, "Metadata-Version", source)
    lines = tuple(" ".join(line.split()) for line in message.get_all("Requires-Dist") or [])
    return WheelMetadata(
        name=name,
        version=_version(version, source),
        requires_python=_requires_python(message, source),
        requires_dist=tuple(_requirement(line, source) for line in lines),
        requires_dist_lines=lines,
    )


def _headers(content: bytes | str, source: str) -> Message:
    try:
        text = content.decode("utf-8") if isinstance(content, bytes) else content
    except UnicodeDecodeError as exc:
        raise index_error(source, f"malformed metadata: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    return HeaderParser().parsestr(text)


def _single(message: Message, header: str, source: str) -> str:
    values = message.get_all(header) or []
    if len(values) != 1 or not str(values[0]).strip():
        raise index_error(source, f"malformed metadata: expected one {header} field, found {len(values)}")
    return str(values[0]).strip()


def _version(text: str, source: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion as exc:
        raise index_error(source, f"malformed metadata: invalid Version {text!r}") from exc


def _requires_python(message: Message, source: str) -> str | None:
    value = message.get("Requires-Python")
    if value is None or not str(value).strip():
        return None
    try:
        SpecifierSet(str(value).strip())
    except InvalidSpecifier as exc:
        raise index_error(source, f"malformed metadata: invalid Requires-Python {str(value)!r}") from exc
    return str(value).strip()


def _requirement(line: str, source: str) -> Requirement:
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise index_error(source, f"malformed metadata: invalid Requires-Dist {line!r}") from exc


# --- evaluating ---------------------------------------------------------------------------------


def marker_environment(
    python: str = "3.11", platform_system: str = "Linux", platform_machine: str = "x86_64"
) -> dict[str, str]:
    """Return a PEP 508 marker environment for CPython ``python`` on that platform, with no extra.

    ``python`` is ``"3.11"`` or a full ``"3.11.4"`` (a bare ``X.Y`` stands for ``X.Y.0``).
    """
    parts = python.split(".")
    full = python if len(parts) >= 3 else f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}.0"
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "nt" if platform_system == "Windows" else "posix",
        "platform_machine": platform_machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": platform_system,
        "platform_version": "",
        "python_full_version": full,
        "python_version": ".".join(full.split(".")[:2]),
        "sys_platform": _SYS_PLATFORM.get(platform_system, platform_system.lower()),
        "extra": "",
    }


def applicable_requirements(
    metadata: WheelMetadata, python: str = "3.11", platform_system: str = "Linux", platform_machine: str = "x86_64"
) -> tuple[Requirement, ...]:
    """Return the ``Requires-Dist`` entries whose marker holds there (no extras selected), in file order."""
    environment = marker_environment(python, platform_system, platform_machine)
    return tuple(r for r in metadata.requires_dist if r.marker is None or r.marker.evaluate(environment))


def pinned_version(requirement: Requirement) -> str | None:
    """Return the version a requirement pins with ``==`` (no wildcard) or ``===``, else ``None``."""
    for spec in requirement.specifier:
        if spec.operator == "===" or (spec.operator == "==" and not spec.version.endswith(".*")):
            return spec.version
    return None


def exact_pins(
    metadata: WheelMetadata, python: str = "3.11", platform_system: str = "Linux", platform_machine: str = "x86_64"
) -> dict[str, str]:
    """Return ``{normalised name: version}`` for every applicable ``==``/``===`` requirement.

    Raises:
        PackageIndexError: two applicable requirements pin the same project to different versions.
    """
    pins: dict[str, str] = {}
    for requirement in applicable_requirements(metadata, python, platform_system, platform_machine):
        version, key = pinned_version(requirement), canonicalize_name(requirement.name)
        if version is None:
            continue
        if pins.setdefault(key, version) != version:
            raise PackageIndexError(
                f"metadata of {metadata.name} {metadata.version} pins {key} to both {pins[key]} and {version}"
            )
    return pins


def loose_requirements(
    metadata: WheelMetadata, python: str = "3.11", platform_system: str = "Linux", platform_machine: str = "x86_64"
) -> dict[str, str]:
    """Return ``{normalised name: specifier}`` for applicable requirements that pin no exact version.

    The specifier is as packaging prints it (``~=3.8.0``; several clauses sorted), ``""`` for none, or
    ``@ <url>`` for a direct reference; several entries for one project are joined with ``,``.
    """
    loose: dict[str, list[str]] = {}
    for requirement in applicable_requirements(metadata, python, platform_system, platform_machine):
        if pinned_version(requirement) is None:
            text = f"@ {requirement.url}" if requirement.url else str(requirement.specifier)
            loose.setdefault(canonicalize_name(requirement.name), []).append(text)
    return {name: ",".join(t for t in texts if t) for name, texts in loose.items()}
