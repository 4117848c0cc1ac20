"""in-toto Statement v1 (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md): a predicate about
subjects named by digest.  Pure."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import OperationError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"  # the statement's media type, and the DSSE payloadType of one
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"  # the annotation that names an attestation artifact's predicate
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
CYCLONEDX_BOM = "https://cyclonedx.org/bom"
CHECK_REPORT = "https://imagectl.dev/attestation/check-report/v1"
PREDICATE_NAMES: Mapping[str, str] = {SLSA_PROVENANCE: "provenance", CYCLONEDX_BOM: "sbom",
                                      CHECK_REPORT: "check report"}


def statement(name: str, digest: str, predicate_type: str, predicate: Mapping[str, Any]) -> dict[str, Any]:
    """The statement that ``predicate`` (of ``predicate_type``) holds for the manifest ``digest`` (``sha256:HEX``)
    of image ``name``."""
    algorithm, _, hex_part = digest.partition(":")
    return {"_type": STATEMENT_TYPE, "subject": [{"name": name, "digest": {algorithm: hex_part}}],
            "predicateType": predicate_type, "predicate": dict(predicate)}


def to_bytes(document: Mapping[str, Any]) -> bytes:
    """A JSON document as canonical bytes (sorted keys, no spaces): the same statement gives the same blob."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def parse_statement(data: bytes, what: str) -> dict[str, Any]:
    """A statement from its bytes; raises OperationError naming ``what`` when it is no in-toto v1 statement."""
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise OperationError(f"{what}: not JSON") from None
    if not isinstance(document, dict) or document.get("_type") != STATEMENT_TYPE:
        raise OperationError(f"{what}: not an in-toto v1 statement")
    if not isinstance(document.get("subject"), list) or not isinstance(document.get("predicate"), dict):
        raise OperationError(f"{what}: a statement without subject or predicate")
    return document


def subject_digests(document: Mapping[str, Any]) -> list[str]:
    """Every subject digest of a statement as ``ALGORITHM:HEX``."""
    out = []
    for subject in document.get("subject") or []:
        digests = subject.get("digest") if isinstance(subject, dict) else None
        if isinstance(digests, dict):
            out += [f"{algorithm}:{value}" for algorithm, value in sorted(digests.items()) if isinstance(value, str)]
    return out
