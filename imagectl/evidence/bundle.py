"""Sigstore bundles (v0.3): the layout in which cosign, Kyverno and Sigstore's own verifiers look for attestations.

A signed statement is attached as cosign ``attest --new-bundle-format`` attaches one: an OCI 1.1 artifact about the
image (``subject``) whose ``artifactType`` and one layer's media type are :data:`BUNDLE_MEDIA_TYPE`, the layer holding
the bundle's JSON, annotated ``dev.sigstore.bundle.content: dsse-envelope`` and ``dev.sigstore.bundle.predicateType``
(:func:`bundle_annotations`).  The bundle is::

    {"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
     "verificationMaterial": {"publicKey": {"hint": H}, "tlogEntries": []},
     "dsseEnvelope": {"payloadType": "application/vnd.in-toto+json", "payload": ..., "signatures": [{"keyid": H, ...}]}}

``H`` is the sha256 of the key's DER SubjectPublicKeyInfo in standard base64 (the RFC 6962 key id the spec recommends,
written as cosign and sigstore-go write it), the same in the verification material and in the envelope's one
signature, as the bundle spec requires.  The key is the ``[attest]`` Ed25519 key and no more: no Fulcio certificate and
no Rekor entry, so a verifier must be given the public key and told not to look for a transparency log (cosign:
``verify-attestation --key attest.pub --insecure-ignore-tlog=true``; ``--private-infrastructure`` is its deprecated
name).  An unsigned statement has no bundle (a bundle is a signature and its key material); it stays a plain
statement artifact, which no standard verifier accepts anyway.

:func:`open_layer` reads an attestation in any of the layouts imagectl ever attached: a bundle; a DSSE envelope
artifact (imagectl before this layout, annotated ``dev.imagectl.signature``); a plain statement (unsigned).

Read for this (learned from, not copied): sigstore/protobuf-specs ``protos/sigstore_bundle.proto`` (Bundle,
VerificationMaterial: the hint rule, one signature per envelope), ``protos/sigstore_common.proto``
(PublicKeyIdentifier), ``protos/envelope.proto``; cosign ``pkg/oci/remote/write.go`` (WriteAttestationNewBundleFormat,
WriteReferrer: the artifact), ``pkg/oci/remote/signatures.go`` (Bundle: one layer, a media type starting
``application/vnd.dev.sigstore.bundle``, v0.3 or later) and ``pkg/cosign/verify.go`` (GetBundles: found through the
referrers API, else go-containerregistry's ``sha256-<hex>`` tag-schema index, which :mod:`imagectl.registry.referrers`
keeps where a registry has no referrers API); cosign ``specs/SIGNATURE_SPEC.md`` and ``specs/ATTESTATION_SPEC.md``.
Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import dsse
from .statement import PAYLOAD_TYPE, PREDICATE_ANNOTATION

BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
BUNDLE_PREFIX = "application/vnd.dev.sigstore.bundle"  # what cosign takes for a bundle layer
# the bundle media types the spec says a client must accept (0.3 written, all read)
READ_MEDIA_TYPES = (BUNDLE_MEDIA_TYPE, "application/vnd.dev.sigstore.bundle+json;version=0.3",
                    "application/vnd.dev.sigstore.bundle+json;version=0.2",
                    "application/vnd.dev.sigstore.bundle+json;version=0.1")
CONTENT_ANNOTATION = "dev.sigstore.bundle.content"
BUNDLE_PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
DSSE_CONTENT = "dsse-envelope"

# the layouts an attestation may be in (verify --json's ``layout``)
BUNDLE_LAYOUT = "sigstore-bundle"
DSSE_LAYOUT = "dsse"  # imagectl's own, before bundles
STATEMENT_LAYOUT = "statement"  # unsigned


def make_bundle(payload: bytes, signing: dsse.SigningKey) -> dict[str, Any]:
    """The v0.3 bundle of in-toto statement ``payload`` signed by ``signing`` (see the module docstring)."""
    hint = dsse.sigstore_hint(signing.keyid)
    return {"mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": hint}, "tlogEntries": []},
            "dsseEnvelope": dsse.sign(PAYLOAD_TYPE, payload, signing, keyid=hint)}


def bundle_annotations(predicate_type: str) -> dict[str, str]:
    """The annotations of a bundle artifact about a statement of ``predicate_type``: cosign's two, and
    ``in-toto.io/predicate-type``, which other OCI tools filter on."""
    return {CONTENT_ANNOTATION: DSSE_CONTENT, BUNDLE_PREDICATE_ANNOTATION: predicate_type,
            PREDICATE_ANNOTATION: predicate_type}


def announced_predicate(annotations: Mapping[str, str]) -> str:
    """The predicate type an artifact's annotations announce ("" when none)."""
    return str(annotations.get(PREDICATE_ANNOTATION) or annotations.get(BUNDLE_PREDICATE_ANNOTATION) or "")


def is_bundle_type(media_type: str) -> bool:
    """Whether a layer of ``media_type`` holds a Sigstore bundle (cosign's test: the prefix)."""
    return media_type.startswith(BUNDLE_PREFIX)


def bundle_envelope(data: bytes) -> dict[str, Any]:
    """The DSSE envelope of bundle ``data``, its structure checked: a known bundle media type, key material that is
    a public key hint, an envelope with exactly one signature whose keyid is that hint.  The signature itself is not
    checked here (:func:`imagectl.evidence.dsse.verify`).  Raises SignatureError, one line saying what is wrong."""
    bundle = _json_object(data, "its Sigstore bundle")
    kind = bundle.get("mediaType")
    if kind not in READ_MEDIA_TYPES:
        raise dsse.SignatureError(f"its Sigstore bundle's mediaType is {str(kind)[:80]!r}, not a bundle's")
    material = bundle.get("verificationMaterial")
    material = material if isinstance(material, dict) else {}
    key = material.get("publicKey")
    if not isinstance(key, dict):
        has = "a certificate (keyless)" if material.get("certificate") or material.get("x509CertificateChain") else \
            "no public key"
        raise dsse.SignatureError(f"its Sigstore bundle carries {has}; imagectl checks bundles signed by a key")
    envelope = bundle.get("dsseEnvelope")
    if not isinstance(envelope, dict):
        raise dsse.SignatureError("its Sigstore bundle holds no dsseEnvelope")
    signatures = envelope.get("signatures")
    if not isinstance(signatures, list) or len(signatures) != 1 or not isinstance(signatures[0], dict):
        raise dsse.SignatureError("its Sigstore bundle's envelope must carry exactly one signature")
    if signatures[0].get("keyid", "") != key.get("hint", ""):
        raise dsse.SignatureError("its Sigstore bundle's key hint and its envelope's keyid differ")
    return envelope


@dataclass(frozen=True)
class Layer:
    """An attestation layer read: its layout, and its DSSE envelope (None for a plain statement, whose bytes are
    ``statement``)."""

    layout: str
    envelope: dict[str, Any] | None
    statement: bytes = b""


def open_layer(media_type: str, data: bytes) -> Layer:
    """The layer of an attestation artifact in any layout imagectl attached (see the module docstring).  Raises
    SignatureError, one line, for a layer that is none of them or is malformed."""
    if media_type == PAYLOAD_TYPE:
        return Layer(STATEMENT_LAYOUT, None, data)
    if is_bundle_type(media_type):
        return Layer(BUNDLE_LAYOUT, bundle_envelope(data))
    if media_type == dsse.ENVELOPE_TYPE:
        return Layer(DSSE_LAYOUT, _json_object(data, "its DSSE envelope"))
    raise dsse.SignatureError(f"its layer is {media_type[:80]}, neither a statement, a DSSE envelope nor a Sigstore "
                              "bundle")


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        document = None
    if not isinstance(document, dict):
        raise dsse.SignatureError(f"{what} is not a JSON object")
    return document
