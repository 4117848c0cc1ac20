"""Views of what ``diff`` returns (:class:`imagectl.images.image_diff.ImageDiff`), as text and as JSON.  The text
shows what differs and names in one line what stayed; the JSON carries everything, the same facts too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from ..images.image_diff import SHOWN_LABELS, Change, ImageDiff, PackageChange, SizeChange
from ..images.image_facts import ImageFacts
from ..progress.units import human_bytes
from ..tags.naming import short_digest
from .printable import printable
from .table import format_table

_DIGEST_FACTS = ("digest", "base_digest")
_SHORT = {"build_key": 10, "lock_sha256": 12}  # hex digits shown of a long fact (the immutable tag's 10 of the key)
_HEADER_FACTS = ("digest", "created")  # said in the A/B lines
_EPOCH = "1970-01-01T00:00:00+00:00"  # what a reproducible build's config says (SOURCE_DATE_EPOCH): not shown


def _short(name: str, value: str) -> str:
    if name in _DIGEST_FACTS:
        return short_digest(value) if value else ""
    return value[:_SHORT[name]] if name in _SHORT else value


def _label(name: str) -> str:
    return name.replace("_", " ")


def _signed(count: int) -> str:
    return "0" if count == 0 else ("+" if count > 0 else "-") + human_bytes(abs(count))


def _header(diff: ImageDiff) -> list[str]:
    def line(mark: str, facts: ImageFacts) -> str:
        created = f"  created {facts.created}" if facts.created and facts.created != _EPOCH else ""
        return f"{mark}  {facts.reference}  {short_digest(facts.digest)}{created}"

    return [line("A", diff.a), line("B", diff.b)]


def _facts(facts: Sequence[Change]) -> list[str]:
    shown = [f for f in facts if f.name not in _HEADER_FACTS and (f.a or f.b)]
    rows = [{"fact": _label(f.name), "a": _short(f.name, f.a) or None, "b": _short(f.name, f.b) or None}
            for f in shown if not f.same]
    same = ", ".join(f"{_label(f.name)} {_short(f.name, f.a)}" for f in shown if f.same)
    out = [format_table(rows, ("fact", "a", "b"))] if rows else []
    return out + ([printable(f"same: {same}")] if same else [])


def _count(changes: Sequence[PackageChange], same: int) -> str:
    kinds = ("up", "down", "added", "removed", "changed")
    parts = [f"{sum(c.kind == k for c in changes)} {k}" for k in kinds if any(c.kind == k for c in changes)]
    return ", ".join([*parts, f"{same} the same"])


def _packages(title: str, changes: Sequence[PackageChange] | None, same: int) -> list[str]:
    if changes is None:
        return [f"{title}: unknown (an image without a readable SBOM)"]
    out = [f"{title}: {_count(changes, same)}"]
    rows = [{"change": c.kind, "package": c.name, "a": c.a, "b": c.b} for c in changes]
    return out + ([format_table(rows, ("change", "package", "a", "b"))] if rows else [])


def _sizes(diff: ImageDiff) -> list[str]:
    rows = [{"group": s.group, "a": _bytes(s.a, s.a_layers), "b": _bytes(s.b, s.b_layers),
             "change": _signed((s.b or 0) - (s.a or 0))} for s in diff.sizes]
    out = ["size per layer group (compressed, as the manifests say; layers in brackets)",
           format_table(rows, ("group", "a", "b", "change"))]
    adds = f"{diff.new_layers} layer{'s' if diff.new_layers != 1 else ''}, {human_bytes(diff.new_bytes)}"
    return [*out, f"B adds {adds} to a node that holds A"]


def _bytes(size: int | None, layers: int) -> str | None:
    return None if size is None else f"{human_bytes(size)} ({layers})"


def _advisories(diff: ImageDiff) -> list[str]:
    gained, fixed = diff.advisories_gained, diff.advisories_fixed
    out = [f"advisories: B gains {len(gained)}, fixes {len(fixed)} (of {len(diff.a.advisories)} in A, "
           f"{len(diff.b.advisories)} in B)"]
    return out + [printable(f"  gained  {f.line()}") for f in gained] + [printable(f"  fixed   {f.line()}")
                                                                        for f in fixed]


def _pairs(title: str, column: str, changes: Sequence[Change], none: str) -> list[str]:
    """``title`` and a table of the ``changes`` that differ; one line when none does (``none``: when there are
    no ``changes`` at all)."""
    differ = [c for c in changes if not c.same]
    if not changes:
        return [f"{title}: {none}"]
    if not differ:
        return [printable(f"{title}: the same (" + ", ".join(f"{c.name} {c.a}" for c in changes if c.a) + ")")]
    rows = [{column: c.name, "a": c.a or None, "b": c.b or None} for c in differ]
    return [title, format_table(rows, (column, "a", "b"))]


def format_diff(diff: ImageDiff) -> str:
    """``diff``'s text: the two images, then what differs (see the module docstring)."""
    if diff.same:
        return "\n".join([*_header(diff), f"A and B are the same image ({diff.a.digest})"])
    other = [c for c in diff.labels if c.name not in SHOWN_LABELS]
    blocks = [_header(diff), _facts(diff.facts), _packages("packages", diff.packages, diff.packages_same),
              _packages("os packages (SBOM)", diff.os_packages, diff.os_packages_same), _sizes(diff),
              _advisories(diff), _pairs("check report", "found", diff.check, "none in either image"),
              _pairs("other labels", "label", other, "the same")]
    problems = [f"note: {mark}: attestation: {p}" for mark, facts in (("A", diff.a), ("B", diff.b))
                for p in facts.attestation_problems]
    text = "\n\n".join("\n".join(block) for block in blocks if block)
    return text + "".join(f"\n{printable(line)}" for line in problems)


def _image_json(facts: ImageFacts) -> dict[str, Any]:
    data = asdict(facts)
    data.update(size=facts.size, advisories=[f.as_dict() for f in facts.advisories],
                check=asdict(facts.check) if facts.check else None)
    return data


def _change_json(changes: Sequence[Change]) -> dict[str, dict[str, Any]]:
    return {c.name: {"a": c.a, "b": c.b, "same": c.same} for c in changes}


def _package_json(changes: Sequence[PackageChange] | None) -> list[dict[str, Any]] | None:
    if changes is None:
        return None
    return [{"name": c.name, "a": c.a, "b": c.b, "change": c.kind, "cuda_part": c.cuda_part} for c in changes]


def _size_json(sizes: Sequence[SizeChange]) -> list[dict[str, Any]]:
    return [asdict(s) for s in sizes]


def diff_json(diff: ImageDiff) -> dict[str, Any]:
    """``diff --json``: both images' facts whole, and every comparison (the same facts too)."""
    return {
        "same": diff.same, "a": _image_json(diff.a), "b": _image_json(diff.b), "facts": _change_json(diff.facts),
        "packages": _package_json(diff.packages), "packages_same": diff.packages_same,
        "os_packages": _package_json(diff.os_packages), "os_packages_same": diff.os_packages_same,
        "sizes": _size_json(diff.sizes), "new_layers": diff.new_layers, "new_bytes": diff.new_bytes,
        "labels": _change_json(diff.labels), "check": _change_json(diff.check),
        "advisories": {"gained": [f.as_dict() for f in diff.advisories_gained],
                       "fixed": [f.as_dict() for f in diff.advisories_fixed]},
    }
