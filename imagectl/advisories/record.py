"""One OSV record: what imagectl reads of it, checked field by field.

An OSV record (https://ossf.github.io/osv-schema/) names a vulnerability (``id``, ``aliases``), the packages it affects
(``affected[].package``) and which of their versions (``affected[].ranges`` of type ECOSYSTEM with ``introduced``,
``fixed`` and ``last_affected`` events, and ``affected[].versions``).  Only PyPI packages are kept; ranges of
other types (GIT, SEMVER) are left out: PyPI versions are PEP 440 versions.  The severity is GitHub's label
(``database_specific.severity``: LOW, MODERATE, HIGH, CRITICAL) where the record has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from ..config import ADVISORY_SEVERITIES
from ..errors import MatrixError
from ..lock.lockfile import canonical_name

Severity = Literal["low", "moderate", "high", "critical"]
SEVERITIES: tuple[str, ...] = ADVISORY_SEVERITIES  # in rising order
_LABELS: dict[str, Severity] = {"LOW": "low", "MODERATE": "moderate", "MEDIUM": "moderate", "HIGH": "high",
                                "CRITICAL": "critical"}
EVENT_KINDS = ("introduced", "fixed", "last_affected", "limit")


@dataclass(frozen=True)
class Event:
    """One event of an ECOSYSTEM range: ``introduced`` (``0``: from the first version), ``fixed``,
    ``last_affected`` or ``limit`` (ignored when matching, as OSV says for ecosystem ranges)."""

    kind: str
    version: Version | None  # None: introduced "0"


@dataclass(frozen=True)
class Affected:
    """The part of a record that concerns one PyPI package."""

    package: str  # canonical (PEP 503) name
    ranges: tuple[tuple[Event, ...], ...]  # each range's events, in the record's order
    versions: tuple[str, ...]  # the affected versions the record lists


@dataclass(frozen=True)
class Advisory:
    """An OSV record as imagectl reads it, with the file it came from and its upstream source."""

    id: str
    aliases: tuple[str, ...]
    summary: str
    severity: Severity | None
    affected: tuple[Affected, ...]
    where: str  # the file it was read from
    source: str = ""  # where upstream it was read ("REPOSITORY PATH @ COMMIT"), "" when the record does not say

    @property
    def ids(self) -> tuple[str, ...]:
        """Its id and its aliases."""
        return (self.id, *self.aliases)


def parse_record(data: Any, where: str) -> Advisory | None:
    """The advisory of the OSV record ``data`` read from ``where``, or None for a withdrawn record or one that
    affects no PyPI package; raises MatrixError naming ``where`` and the field for a record that does not follow
    the OSV schema (also for a version that is not PEP 440)."""
    if not isinstance(data, dict):
        raise MatrixError(f"{where}: not an OSV record (expected a JSON object)")
    ident = data.get("id")
    if not isinstance(ident, str) or not ident.strip() or len(ident) > 100:
        raise MatrixError(f"{where}: the OSV record has no id")
    aliases = _strings(data.get("aliases", []), where, "aliases")
    affected = tuple(a for a in (_affected(item, where, i) for i, item in enumerate(_list(data, "affected", where)))
                     if a is not None)
    if data.get("withdrawn") or not affected:
        return None
    return Advisory(ident, aliases, _summary(data), _severity(data), affected, where, _source(data))


def _summary(data: dict[str, Any]) -> str:
    """The record's summary, else the first sentence of its details (PyPA's records have no summary), one line of
    at most 120 characters."""
    text = str(data.get("summary") or data.get("details") or "").strip()
    first = " ".join(text.split(". ", 1)[0].split())
    return first if len(first) <= 120 else first[:117] + "..."


def _list(data: dict[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise MatrixError(f"{where}: {key} must be a list")
    return value


def _strings(value: Any, where: str, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MatrixError(f"{where}: {what} must be a list of strings")
    return tuple(value)


def _affected(item: Any, where: str, index: int) -> Affected | None:
    """``affected[index]``, or None when it is not a PyPI package."""
    at = f"affected[{index}]"
    package = item.get("package") if isinstance(item, dict) else None
    if not isinstance(package, dict) or not isinstance(package.get("name"), str):
        raise MatrixError(f"{where}: {at}.package must be an object with a name")
    if package.get("ecosystem") != "PyPI":
        return None
    ranges = tuple(_events(r, where, f"{at}.ranges[{i}]") for i, r in enumerate(_list(item, "ranges", where))
                   if isinstance(r, dict) and r.get("type") == "ECOSYSTEM")
    return Affected(canonical_name(package["name"]), ranges, _strings(item.get("versions", []), where,
                                                                        f"{at}.versions"))


def _events(rng: dict[str, Any], where: str, at: str) -> tuple[Event, ...]:
    events = rng.get("events")
    if not isinstance(events, list) or not events:
        raise MatrixError(f"{where}: {at}.events must be a non-empty list")
    out = []
    for event in events:
        if not isinstance(event, dict) or len(event) != 1 or next(iter(event)) not in EVENT_KINDS:
            raise MatrixError(f"{where}: {at}: each event must be one of {', '.join(EVENT_KINDS)}, got {event!r:.60}")
        kind, text = next(iter(event.items()))
        out.append(Event(kind, None if (kind, text) == ("introduced", "0") else _version(text, where, at)))
    return tuple(out)


def _version(text: Any, where: str, at: str) -> Version:
    try:
        return Version(str(text))
    except InvalidVersion:
        raise MatrixError(f"{where}: {at}: {str(text)[:40]!r} is not a PEP 440 version") from None


def _severity(data: dict[str, Any]) -> Severity | None:
    specific = data.get("database_specific")
    label = specific.get("severity") if isinstance(specific, dict) else None
    return _LABELS.get(label.upper()) if isinstance(label, str) else None


def _source(data: dict[str, Any]) -> str:
    source = data.get("source")
    if not isinstance(source, dict):
        return ""
    return " ".join(str(source[k]) for k in ("repository", "path", "commit") if source.get(k))
