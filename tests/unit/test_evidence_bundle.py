"""Sigstore bundles (imagectl/evidence/bundle.py): what build attaches for a signed statement, checked against the
bundle model sigstore-python parses bundles with (sigstore-models: the protobuf-specs schema, strict, no unknown
field) and securesystemslib's DSSE verification; and verify reading every layout imagectl ever attached."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from imagectl.evidence import dsse
from imagectl.evidence.attach import _artifact, _wrap
from imagectl.evidence.bundle import (
    BUNDLE_MEDIA_TYPE,
    bundle_envelope,
    make_bundle,
    open_layer,
)
from imagectl.evidence.statement import CHECK_REPORT, PAYLOAD_TYPE, statement, to_bytes
from imagectl.evidence.verify import _unwrap
from imagectl.registry.manifest import OCI_MANIFEST, Descriptor, sha256_digest
from imagectl.registry.referrers import EMPTY_DIGEST, EMPTY_MEDIA_TYPE, artifact_manifest

DIGEST = "sha256:" + "ab" * 32
STATEMENT = to_bytes(statement("reg/ml/torch", DIGEST, CHECK_REPORT, {"result": "pass"}))


def signing_key() -> dsse.SigningKey:
    key = Ed25519PrivateKey.generate()
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return dsse.SigningKey(key, hashlib.sha256(der).hexdigest())


def spki_hint(signing: dsse.SigningKey) -> str:
    """The hint as cosign and sigstore-go compute it: base64 of the sha256 of the DER SubjectPublicKeyInfo."""
    der = signing.key.public_key().public_bytes(serialization.Encoding.DER,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def test_a_bundle_parses_as_sigstore_models_bundle_and_securesystemslib_verifies_it():
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey
    from sigstore_models.bundle.v1 import Bundle

    signing = signing_key()
    data = to_bytes(make_bundle(STATEMENT, signing))
    parsed = Bundle.from_json(data)  # strict: an unknown or mistyped field fails here
    assert parsed.media_type == BUNDLE_MEDIA_TYPE == "application/vnd.dev.sigstore.bundle.v0.3+json"
    hint = parsed.verification_material.public_key.hint
    assert hint == spki_hint(signing) and parsed.verification_material.tlog_entries == []
    assert parsed.verification_material.certificate is None and parsed.message_signature is None
    envelope = json.loads(data)["dsseEnvelope"]
    assert [s["keyid"] for s in envelope["signatures"]] == [hint]  # the spec: the same hint in both places
    key = SSlibKey.from_crypto(signing.key.public_key(), keyid=hint)
    Envelope.from_dict(envelope).verify([key], 1)  # raises VerificationError when it does not hold
    assert parsed.dsse_envelope.payload == STATEMENT and parsed.dsse_envelope.payload_type == PAYLOAD_TYPE


def test_a_tampered_bundle_fails_securesystemslib():
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    signing = signing_key()
    envelope = make_bundle(STATEMENT, signing)["dsseEnvelope"]
    envelope["payload"] = base64.b64encode(STATEMENT.replace(b'"pass"', b'"fail"')).decode()
    key = SSlibKey.from_crypto(signing.key.public_key(), keyid=spki_hint(signing))
    with pytest.raises(VerificationError):
        Envelope.from_dict(envelope).verify([key], 1)


def test_the_artifact_is_laid_out_as_cosign_attaches_a_bundle():
    signing = signing_key()
    artifact = _artifact(_wrap(CHECK_REPORT, STATEMENT, signing), "2024-01-01T00:00:00Z")
    assert artifact.artifact_type == artifact.media_type == BUNDLE_MEDIA_TYPE
    assert artifact.annotations == {"dev.sigstore.bundle.content": "dsse-envelope",
                                    "dev.sigstore.bundle.predicateType": CHECK_REPORT,
                                    "in-toto.io/predicate-type": CHECK_REPORT,
                                    "org.opencontainers.image.created": "2024-01-01T00:00:00Z"}
    layer = Descriptor(artifact.media_type, sha256_digest(artifact.data), len(artifact.data))
    body = artifact_manifest(Descriptor(OCI_MANIFEST, DIGEST, 10), artifact.artifact_type, layer,
                             artifact.annotations).json()
    assert body["mediaType"] == OCI_MANIFEST and body["artifactType"] == BUNDLE_MEDIA_TYPE
    assert body["config"]["mediaType"] == EMPTY_MEDIA_TYPE and body["config"]["digest"] == EMPTY_DIGEST
    assert [x["mediaType"] for x in body["layers"]] == [BUNDLE_MEDIA_TYPE] and body["subject"]["digest"] == DIGEST


def test_an_unsigned_statement_stays_a_plain_statement_artifact():
    artifact = _artifact(_wrap(CHECK_REPORT, STATEMENT, None), "2024-01-01T00:00:00Z")
    assert artifact.artifact_type == artifact.media_type == PAYLOAD_TYPE and artifact.data == STATEMENT
    assert artifact.annotations["dev.imagectl.signature"] == "unsigned"


def test_the_sigstore_hint_is_the_hex_key_id_in_base64():
    signing = signing_key()
    assert dsse.sigstore_hint(signing.keyid) == spki_hint(signing)
    public = dsse.public_half(signing)
    assert dsse.names_key(signing.keyid, public) and dsse.names_key(spki_hint(signing), public)
    assert not dsse.names_key(spki_hint(signing_key()), public)
    assert dsse.hex_keyid(spki_hint(signing)) == dsse.hex_keyid(signing.keyid) == signing.keyid  # shown in hex
    assert dsse.hex_keyid("?") == "?" and dsse.hex_keyid("team-key") == "team-key"


def _bundle(**change) -> bytes:
    bundle = make_bundle(STATEMENT, signing_key())
    for path, value in change.items():
        *parents, last = path.split("__")
        node = bundle
        for part in parents:
            node = node[part]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return json.dumps(bundle).encode()


@pytest.mark.parametrize(("data", "expected"), [
    (b"[1]", "its Sigstore bundle is not a JSON object"),
    (b"{", "its Sigstore bundle is not a JSON object"),
    (_bundle(mediaType="application/json"), "mediaType is 'application/json', not a bundle's"),
    (_bundle(verificationMaterial={"certificate": {"rawBytes": "AA=="}, "tlogEntries": []}),
     "carries a certificate (keyless); imagectl checks bundles signed by a key"),
    (_bundle(verificationMaterial={"tlogEntries": []}), "carries no public key"),
    (_bundle(dsseEnvelope=None), "holds no dsseEnvelope"),
    (_bundle(dsseEnvelope__signatures=[]), "exactly one signature"),
    (_bundle(verificationMaterial__publicKey={"hint": "another"}), "key hint and its envelope's keyid differ"),
], ids=["array", "truncated", "media-type", "certificate", "no-key", "no-envelope", "no-signature", "hint-differs"])
def test_a_malformed_bundle_is_one_line_saying_what(data, expected):
    with pytest.raises(dsse.SignatureError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        bundle_envelope(data)


def test_two_signatures_are_refused():
    bundle = make_bundle(STATEMENT, signing_key())
    bundle["dsseEnvelope"]["signatures"] *= 2
    with pytest.raises(dsse.SignatureError, match="exactly one signature"):
        bundle_envelope(json.dumps(bundle).encode())


def test_an_older_bundle_media_type_is_read():
    bundle = make_bundle(STATEMENT, signing_key())
    bundle["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.3"
    assert bundle_envelope(json.dumps(bundle).encode())["payloadType"] == PAYLOAD_TYPE


def _layers(signing: dsse.SigningKey) -> dict[str, tuple[str, bytes]]:
    """The same statement in each layout imagectl attached: now (bundle), before (DSSE), unsigned."""
    return {"sigstore-bundle": (BUNDLE_MEDIA_TYPE, to_bytes(make_bundle(STATEMENT, signing))),
            "dsse": (dsse.ENVELOPE_TYPE, to_bytes(dsse.sign(PAYLOAD_TYPE, STATEMENT, signing))),
            "statement": (PAYLOAD_TYPE, STATEMENT)}


@pytest.mark.parametrize("layout", ["sigstore-bundle", "dsse"])
def test_verify_reads_the_new_layout_and_the_old_one(layout):
    signing = signing_key()
    media_type, data = _layers(signing)[layout]
    assert open_layer(media_type, data).layout == layout
    problems: list[str] = []
    payload, state, read = _unwrap(media_type, data, dsse.public_half(signing), problems)
    assert (payload, problems, read) == (STATEMENT, [], layout)
    assert state == f"verified ed25519:{signing.keyid[:16]}"
    assert _unwrap(media_type, data, None, problems)[:3] == (STATEMENT, "not checked", layout) and not problems
    other = dsse.public_half(signing_key())
    assert _unwrap(media_type, data, other, problems)[:2] == (None, "invalid")
    assert problems == [f"signature: no valid signature by key {other.keyid[:16]}"]


def test_verify_of_an_unsigned_statement_or_an_unknown_layer():
    signing = signing_key()
    problems: list[str] = []
    media_type, data = _layers(signing)["statement"]
    assert _unwrap(media_type, data, None, problems) == (STATEMENT, "unsigned", "statement") and not problems
    _unwrap(media_type, data, dsse.public_half(signing), problems)
    assert problems == ["unsigned, but a key is configured: every attestation must be signed by it"]
    problems.clear()
    assert _unwrap("text/plain", b"x", None, problems) == (None, "unsigned", "")
    assert problems == ["its layer is text/plain, neither a statement, a DSSE envelope nor a Sigstore bundle"]
    problems.clear()
    assert _unwrap(BUNDLE_MEDIA_TYPE, b"x", None, problems) == (None, "invalid", "")
    assert problems == ["its Sigstore bundle is not a JSON object"]
