"""The SBOM of an image: CycloneDX 1.6 JSON, written with ``cyclonedx-python-lib`` and validated against the
CycloneDX schema before it is attached.

It lists every Python distribution of the image's environment (the lock's and the extras' packages, with the
sha256 of every file the lock allows for each, and any other distribution the in-image check's inventory found:
the venv's own pip, setuptools and wheel) and every OS package dpkg has installed, each with its version and
purl (``pkg:pypi/NAME@VERSION``, ``pkg:deb/ID/NAME@VERSION?arch=ARCH&distro=ID-VERSION_ID``).

Its Python set (:func:`python_set`) is what ``build`` and ``verify`` compare with the lock and the extras
(:func:`python_problems`): the same distributions at the same versions, the venv's tooling exempt unless locked,
as the in-image check does.  Everything but :func:`make_sbom` and :func:`check_schema` is pure and reads no
library.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from packaging.version import InvalidVersion, Version

from ..errors import OperationError
from ..imagecheck.compare import VENV_TOOLING
from ..lock.lockfile import LockedPackage, canonical_name

SOURCE_PROPERTY = "imagectl:source"  # lock, extras, image (the check's inventory only) or dpkg
LOCK_PROPERTY = "imagectl:lock.sha256"
DPKG_PROPERTY = "imagectl:dpkg"  # what was read of the OS packages: "status" or why none
_NAMESPACE = uuid.UUID("6f1e4a5e-3c8e-4d55-9d0a-1c0a7b0e5e21")  # serial numbers: uuid5 of the image digest


@dataclass(frozen=True)
class DebPackage:
    """One installed dpkg package."""

    name: str
    version: str
    arch: str
    source: str = ""


@dataclass(frozen=True)
class OsRelease:
    """``ID`` and ``VERSION_ID`` of /etc/os-release (debian 12, ubuntu 22.04)."""

    id: str = ""
    version_id: str = ""


@dataclass(frozen=True)
class SbomInputs:
    """What an SBOM is made of: the image (repository name and manifest digest), the lock's and the extras'
    packages, the check's inventory (name -> version), the OS packages and release, the lock's sha256 and when."""

    name: str
    digest: str
    locked: Sequence[LockedPackage]
    extras: Sequence[LockedPackage]
    inventory: Mapping[str, str]
    debs: Sequence[DebPackage]
    os_release: OsRelease
    lock_sha256: str = ""
    dpkg: str = "status"
    when: datetime | None = None
    tools: Sequence[tuple[str, str]] = field(default_factory=tuple)


def parse_dpkg_status(text: str) -> list[DebPackage]:
    """The installed packages (``Status: install ok installed``) of a /var/lib/dpkg/status file, sorted (pure)."""
    out = []
    for stanza in text.split("\n\n"):
        fields = _stanza(stanza)
        if fields.get("Package") and fields.get("Version") and fields.get("Status", "").endswith(" installed"):
            source = fields.get("Source", "").split(" ")[0]
            out.append(DebPackage(fields["Package"], fields["Version"], fields.get("Architecture", ""), source))
    return sorted(set(out), key=lambda p: (p.name, p.arch, p.version))


def _stanza(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if line[:1] in (" ", "\t") or ":" not in line:
            continue  # a continuation line (descriptions, conffiles)
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def parse_os_release(text: str) -> OsRelease:
    """``ID`` and ``VERSION_ID`` of an os-release file (pure)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("\"'")
    return OsRelease(values.get("ID", "").lower(), values.get("VERSION_ID", ""))


def deb_purl(package: DebPackage, release: OsRelease) -> str:
    """``pkg:deb/ID/NAME@VERSION?arch=ARCH&distro=ID-VERSION_ID`` (pure; ``debian`` when the ID is unknown)."""
    from packageurl import PackageURL

    vendor = release.id or "debian"
    qualifiers = {"arch": package.arch} if package.arch else {}
    if release.version_id:
        qualifiers["distro"] = f"{vendor}-{release.version_id}"
    return str(PackageURL("deb", vendor, package.name, package.version, qualifiers))


def pypi_purl(name: str, version: str) -> str:
    """``pkg:pypi/NAME@VERSION`` of a canonical name."""
    from packageurl import PackageURL

    return str(PackageURL("pypi", None, canonical_name(name), version))


def python_rows(inputs: SbomInputs) -> list[tuple[str, str, tuple[str, ...], str]]:
    """(name, version, sha256 hashes, source) of every Python distribution: the lock's and extras' (at the version
    the inventory found when it has one), then the inventory's others; sorted by name (pure)."""
    inventory = {canonical_name(k): str(v) for k, v in inputs.inventory.items()}
    rows: dict[str, tuple[str, str, tuple[str, ...], str]] = {}
    for source, packages in (("lock", inputs.locked), ("extras", inputs.extras)):
        for p in packages:
            rows[p.name] = (p.name, inventory.get(p.name, p.version), tuple(p.hashes), source)
    for name, version in inventory.items():
        rows.setdefault(name, (name, version, (), "image"))
    return [rows[name] for name in sorted(rows)]


def make_sbom(inputs: SbomInputs) -> bytes:
    """The CycloneDX 1.6 JSON of ``inputs`` (see the module docstring), validated against the schema.

    Deterministic for the same inputs: the serial number is derived from the image digest.  Raises
    OperationError when the document does not validate.
    """
    import warnings

    from cyclonedx.model.bom import Bom
    from cyclonedx.output.json import JsonV1Dot6

    bom = Bom(serial_number=uuid.uuid5(_NAMESPACE, inputs.digest))
    root = _root_component(inputs)
    bom.metadata.component = root
    if inputs.when is not None:
        bom.metadata.timestamp = inputs.when
    bom.metadata.properties.update(_properties(inputs))
    components = [*_python_components(inputs), *_deb_components(inputs)]
    bom.components.update(components)
    bom.register_dependency(root, components)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = JsonV1Dot6(bom).output_as_string(indent=None)
    check_schema(text)
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")).encode()


def check_schema(text: str) -> None:
    """Raise OperationError when ``text`` is not CycloneDX 1.6 JSON by the schema."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise OperationError(f"the SBOM does not follow the CycloneDX 1.6 schema: {str(error)[:300]}")


def _root_component(inputs: SbomInputs) -> Any:
    from cyclonedx.model.component import Component, ComponentType

    return Component(name=inputs.name, version=inputs.digest, type=ComponentType.CONTAINER,
                     bom_ref=f"image:{inputs.digest}")


def _properties(inputs: SbomInputs) -> list[Any]:
    from cyclonedx.model import Property

    found = [Property(name=DPKG_PROPERTY, value=inputs.dpkg)]
    if inputs.lock_sha256:
        found.append(Property(name=LOCK_PROPERTY, value=inputs.lock_sha256))
    return found


def _python_components(inputs: SbomInputs) -> list[Any]:
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.component import Component, ComponentType

    out = []
    for name, version, hashes, source in python_rows(inputs):
        purl = pypi_purl(name, version)
        out.append(Component(
            name=name, version=version, type=ComponentType.LIBRARY, bom_ref=purl, purl=_purl(purl),
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=h) for h in hashes],
            properties=[Property(name=SOURCE_PROPERTY, value=source)],
        ))
    return out


def _deb_components(inputs: SbomInputs) -> list[Any]:
    from cyclonedx.model import Property
    from cyclonedx.model.component import Component, ComponentType

    out = []
    for package in inputs.debs:
        purl = deb_purl(package, inputs.os_release)
        props = [Property(name=SOURCE_PROPERTY, value="dpkg")]
        if package.source:
            props.append(Property(name="imagectl:deb.source", value=package.source))
        out.append(Component(name=package.name, version=package.version, type=ComponentType.LIBRARY, bom_ref=purl,
                             purl=_purl(purl), properties=props))
    return out


def _purl(text: str) -> Any:
    from packageurl import PackageURL

    return PackageURL.from_string(text)


# --------------------------------------------------------------------------------------------- reading back


def parse_sbom(data: bytes, what: str = "SBOM") -> dict[str, Any]:
    """A CycloneDX JSON document; raises OperationError when it is none."""
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise OperationError(f"{what}: not JSON") from None
    if not isinstance(document, dict) or document.get("bomFormat") != "CycloneDX":
        raise OperationError(f"{what}: not a CycloneDX document")
    return document


def python_set(document: Mapping[str, Any]) -> dict[str, str]:
    """name -> version of every ``pkg:pypi`` component of a CycloneDX document (pure; read from the purl, which is
    what a scanner reads)."""
    out = {}
    for component in document.get("components") or []:
        purl = component.get("purl") if isinstance(component, dict) else None
        if isinstance(purl, str) and purl.startswith("pkg:pypi/"):
            name, _, version = purl[len("pkg:pypi/"):].split("?")[0].partition("@")
            out[canonical_name(unquote(name))] = unquote(version)
    return out


def os_package_count(document: Mapping[str, Any]) -> int:
    """How many ``pkg:deb`` components a CycloneDX document lists (pure)."""
    return sum(1 for c in document.get("components") or []
               if isinstance(c, dict) and str(c.get("purl") or "").startswith("pkg:deb/"))


def sbom_property(document: Mapping[str, Any], name: str) -> str | None:
    """The value of metadata property ``name``, or None (pure)."""
    for item in (document.get("metadata") or {}).get("properties") or []:
        if isinstance(item, dict) and item.get("name") == name:
            return str(item.get("value"))
    return None


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def python_problems(found: Mapping[str, str], lock: Mapping[str, str] | None, extras: Mapping[str, str]) -> list[str]:
    """What is wrong with an SBOM's Python set ``found`` against ``lock`` plus ``extras`` (pure): [] when they are
    the same distributions at the same versions (the venv's tooling exempt unless locked).  Without a lock (an
    image on a user's base) only the extras must be there, at their versions."""
    want = {canonical_name(k): v for k, v in {**(lock or {}), **extras}.items()}
    have = {canonical_name(k): v for k, v in found.items()}
    missing = sorted(f"{n}=={v}" for n, v in want.items() if n not in have)
    differs = sorted(f"{n} {v} != {have[n]}" for n, v in want.items() if n in have and not _same(v, have[n]))
    extra = [] if lock is None else sorted(
        f"{n}=={v}" for n, v in have.items() if n not in want and n not in VENV_TOOLING)
    parts = [f"{label}: {', '.join(items)}" for label, items in
             (("missing", missing), ("not in the lock", extra), ("differs", differs)) if items]
    return ["; ".join(parts)] if parts else []
