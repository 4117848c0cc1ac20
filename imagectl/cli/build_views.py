"""The views of what ``build`` returns: the summary table and the ``--json`` document, the plan as a table and as
JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..images.builder import BuildResult, PlanEntry
from ..redact import redact
from ..tags.naming import short_digest
from .size_views import report_dict, report_text
from .table import format_table


def summary_table(results: Sequence[BuildResult]) -> str:
    """The final table: profile, status (built, reused, failed), tag, digest, size, whether the engine that built
    it builds reproducibly (``yes``/``no (docker)``; ``-`` for nothing built), seconds."""
    rows = [{
        "profile": r.profile, "status": r.status, "tag": r.tag or "-", "digest": short_digest(r.digest),
        "size": f"{r.size / 1e6:.0f} MB" if r.size else "-", "seconds": f"{r.seconds:.1f}",
        "reproducible": "-" if r.reproducible is None else ("yes" if r.reproducible else f"no ({r.engine})"),
    } for r in results]
    return format_table(rows, ("profile", "status", "tag", "digest", "size", "reproducible", "seconds"))


def result_dict(r: BuildResult, secrets: Sequence[str] = ()) -> dict[str, Any]:
    """One result of ``build --json``: what is unknown is None; the error, notes and log tail are redacted;
    ``downloads`` lists the wheels pip downloaded (``name``, ``version``, ``bytes`` as pip printed the size,
    ``seconds``); ``engine`` and ``reproducible`` say what built it (None for a reused image), ``pushed_bytes``
    what its push sent (None when nothing was pushed); ``platforms`` each platform's image (an index has several):
    its digest, how its check ran (``native``, ``emulated by qemu-aarch64``; None: not run here) and its seconds."""
    out: dict[str, Any] = {
        "profile": r.profile, "status": r.status, "repository": r.repository or None, "tag": r.tag or None,
        "digest": r.digest or None, "image_id": r.image_id or None, "size": r.size or None, "seconds": r.seconds,
        "phases": dict(r.phases), "notes": [redact(n, secrets) for n in r.notes],
        "lock": {"sha256": r.lock_sha256, "origin": r.lock_origin} if r.lock_sha256 else None,
        "downloads": [{"name": d.name, "version": d.version, "bytes": d.bytes, "seconds": d.seconds}
                      for d in r.downloads],
        "engine": r.engine or None, "reproducible": r.reproducible, "pushed_bytes": r.pushed_bytes,
        "platforms": [{"platform": p.platform, "digest": p.digest or None, "image_id": p.image_id or None,
                       "check": p.check or None, "check_seconds": p.check_seconds} for p in r.platforms],
        "sizes": report_dict(r.sizes, secrets) if r.sizes else None,  # where a size budget applies
    }
    if r.status == "failed":
        out.update(step=r.step or None, error=redact(r.error, secrets),
                   log_tail=[redact(line, secrets) for line in r.log_tail])
    return out


def build_document(results: Sequence[BuildResult], secrets: Sequence[str] = ()) -> dict[str, Any]:
    """The document of ``build --json`` and ``--metadata-file``: ``{"results": [...]}``."""
    return {"results": [result_dict(r, secrets) for r in results]}


def plan_table(entries: Sequence[PlanEntry], secrets: Sequence[str] = ()) -> str:
    """``build --plan`` as text: profile, action (reuse, build, refused), and the tag, build key or reason (the
    reason redacted); then each image's expected size and the budget's verdict."""
    def detail(e: PlanEntry) -> str:
        return {"reuse": e.tag, "build": f"build key {e.key[:10]}"}.get(e.action, redact(e.reason, secrets))

    rows = [{"profile": e.profile, "action": e.action, "detail": detail(e)} for e in entries]
    sizes = [report_text(e.profile, report_dict(e.sizes, secrets)) for e in entries if e.sizes]
    return "\n\n".join([format_table(rows, ("profile", "action", "detail")), *sizes])


def plan_document(entries: Sequence[PlanEntry], secrets: Sequence[str] = ()) -> dict[str, Any]:
    """``build --plan --json``: ``{"plan": [...]}``, each with the fields its action has (the reason redacted) and
    its image's expected ``sizes`` (:func:`~.size_views.report_dict`)."""
    def entry(e: PlanEntry) -> dict[str, Any]:
        out: dict[str, Any] = {"profile": e.profile, "action": e.action}
        if e.sizes:
            out["sizes"] = report_dict(e.sizes, secrets)
        if e.action == "refused":
            return {**out, "reason": redact(e.reason, secrets)}
        out.update(repository=e.repository, key=e.key)
        return {**out, "tag": e.tag} if e.action == "reuse" else out

    return {"plan": [entry(e) for e in entries]}
