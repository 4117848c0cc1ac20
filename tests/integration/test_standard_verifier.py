"""Attestations a verifier not written here accepts (issue 37 item 2), against a real registry (distribution 2.8: no
referrers API, so the ``sha256-<hex>`` tag-schema index, where cosign's lookup goes then).

A small image is pushed through the registry client (no build: what is tested is the attaching) and its statements
attached as ``build`` attaches them (:func:`imagectl.evidence.attach.attach_statements`).  Then a client that knows
nothing of imagectl finds them as the OCI distribution spec says (``GET /v2/<name>/referrers/<digest>``, else the
tag-schema index), keeps the artifacts whose ``artifactType`` is a Sigstore bundle (as cosign's GetBundles does),
reads each one layer, parses it with the bundle model sigstore-python parses with (``sigstore_models``: strict, no
unknown field), verifies its DSSE signature with securesystemslib and the public key (key id computed here, as
sigstore-go computes a hint), and checks that the statement's subject is the image's digest.

``imagectl verify``'s reading is checked on the same registry for the new layout and the old (images pushed before
bundles carry imagectl's own DSSE artifacts).
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timezone

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from imagectl.evidence import dsse
from imagectl.evidence.attach import attach_statements
from imagectl.evidence.statement import CHECK_REPORT, PAYLOAD_TYPE, SLSA_PROVENANCE, statement, to_bytes
from imagectl.evidence.verify import verify_image
from imagectl.reference import parse_reference
from imagectl.registry import Descriptor, RegistryClient
from imagectl.registry.referrers import Artifact, attach
from tests.integration.support.registry import make_sample_image, push_sample_image

pytestmark = pytest.mark.integration

BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
PREDICATES = {CHECK_REPORT: {"result": "pass"}, SLSA_PROVENANCE: {"buildDefinition": {}}}


def new_key() -> tuple[dsse.SigningKey, bytes]:
    """A fresh Ed25519 key as imagectl holds it, and its public half as the PEM a verifier is given."""
    key = Ed25519PrivateKey.generate()
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return dsse.SigningKey(key, hashlib.sha256(der).hexdigest()), pem


def push_image(client: RegistryClient, repository: str) -> Descriptor:
    digest = push_sample_image(client, repository, "latest", make_sample_image({"a.txt": repository.encode()}))
    manifest = client.get_manifest(repository, digest)
    return Descriptor(manifest.media_type, digest, len(manifest.raw))


def statements(name: str, digest: str) -> list[tuple[str, dict]]:
    return [(kind, statement(name, digest, kind, predicate)) for kind, predicate in PREDICATES.items()]


# ------------------------------------------------------------------ a client that knows nothing of imagectl


def fetch(url: str, accept: str | None = None) -> requests.Response:
    return requests.get(url, headers={"Accept": accept} if accept else {}, timeout=30)


def referrers(base: str, repository: str, digest: str) -> list[dict]:
    """The referrers index of ``digest`` as the distribution spec says to find it: the API, else the tag schema."""
    answer = fetch(f"{base}/v2/{repository}/referrers/{digest}", OCI_INDEX)
    if answer.status_code == 200 and answer.headers.get("Content-Type") == OCI_INDEX:
        return answer.json()["manifests"]
    assert answer.status_code == 404, answer.status_code  # distribution 2.8: no API
    index = fetch(f"{base}/v2/{repository}/manifests/{digest.replace(':', '-')}", OCI_INDEX)
    assert index.status_code == 200 and index.headers["Content-Type"] == OCI_INDEX, index.status_code
    return index.json()["manifests"]


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def bundles(base: str, repository: str, digest: str) -> list[tuple[dict, bytes]]:
    """(artifact manifest, bundle bytes) of every Sigstore bundle referring to ``digest``, each blob checked against
    its digest."""
    out = []
    for entry in referrers(base, repository, digest):
        if entry.get("artifactType") != BUNDLE:
            continue
        body = fetch(f"{base}/v2/{repository}/manifests/{entry['digest']}", OCI_MANIFEST).content
        assert sha256_of(body) == entry["digest"]
        manifest = json.loads(body)
        assert manifest["subject"]["digest"] == digest and len(manifest["layers"]) == 1
        layer = manifest["layers"][0]
        assert layer["mediaType"].startswith("application/vnd.dev.sigstore.bundle")  # cosign's test
        blob = fetch(f"{base}/v2/{repository}/blobs/{layer['digest']}").content
        assert sha256_of(blob) == layer["digest"]
        out.append((manifest, blob))
    return out


def standard_verify(bundle_bytes: bytes, public_pem: bytes, digest: str) -> dict:
    """The statement of a bundle that sigstore_models parses, whose DSSE signature securesystemslib verifies with
    ``public_pem``, and whose subject is ``digest``; raises (pydantic ValidationError, VerificationError,
    AssertionError) otherwise."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey
    from sigstore_models.bundle.v1 import Bundle

    parsed = Bundle.from_json(bundle_bytes)
    assert parsed.media_type == BUNDLE and parsed.dsse_envelope is not None
    assert parsed.verification_material.public_key is not None  # key-signed: no certificate, no tlog entry
    public = serialization.load_pem_public_key(public_pem)
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    keyid = base64.b64encode(hashlib.sha256(der).digest()).decode()  # the RFC 6962 key id, as sigstore-go writes it
    assert parsed.verification_material.public_key.hint == keyid
    envelope = Envelope.from_dict(json.loads(bundle_bytes)["dsseEnvelope"])
    envelope.verify([SSlibKey.from_crypto(public, keyid=keyid)], 1)
    assert envelope.payload_type == "application/vnd.in-toto+json"
    document = json.loads(envelope.payload)
    assert document["_type"] == "https://in-toto.io/Statement/v1"
    algorithm, _, hex_part = digest.partition(":")
    assert any(s["digest"].get(algorithm) == hex_part for s in document["subject"]), document["subject"]
    return document


# ------------------------------------------------------------------ tests


def test_a_verifier_not_written_here_accepts_the_attached_bundles(registry):
    client = RegistryClient(registry.host, insecure=True)
    repository = "standard/bundles"
    image = push_image(client, repository)
    signing, public_pem = new_key()
    attach_statements(client, repository, image, statements(f"{registry.host}/{repository}", image.digest), signing,
                      datetime.now(timezone.utc))

    found = bundles(registry.url, repository, image.digest)
    assert len(found) == len(PREDICATES)
    seen = set()
    for manifest, blob in found:
        document = standard_verify(blob, public_pem, image.digest)
        notes = manifest["annotations"]
        assert notes["dev.sigstore.bundle.content"] == "dsse-envelope"
        assert notes["dev.sigstore.bundle.predicateType"] == document["predicateType"]
        assert manifest["artifactType"] == BUNDLE
        assert manifest["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
        seen.add(document["predicateType"])
    assert seen == set(PREDICATES)

    # and the same verifier refuses: another key, and a bundle whose statement was changed after signing
    from securesystemslib.exceptions import VerificationError

    with pytest.raises(AssertionError):
        standard_verify(found[0][1], new_key()[1], image.digest)  # the hint names another key
    forged = json.loads(found[0][1])
    statement_bytes = base64.b64decode(forged["dsseEnvelope"]["payload"]).replace(b'"pass"', b'"fail"')
    forged["dsseEnvelope"]["payload"] = base64.b64encode(statement_bytes).decode()
    with pytest.raises(VerificationError):
        standard_verify(json.dumps(forged).encode(), public_pem, image.digest)
    other = push_image(client, "standard/other")
    with pytest.raises(AssertionError):
        standard_verify(found[0][1], public_pem, other.digest)  # about another image


def old_layout(client: RegistryClient, repository: str, image: Descriptor, signing: dsse.SigningKey) -> None:
    """Attach the statements as imagectl attached them before bundles: a DSSE envelope artifact each."""
    for kind, document in statements(repository, image.digest):
        envelope = to_bytes(dsse.sign(PAYLOAD_TYPE, to_bytes(document), signing))
        attach(client, repository, image, Artifact(PAYLOAD_TYPE, dsse.ENVELOPE_TYPE, envelope, {
            "in-toto.io/predicate-type": kind, "dev.imagectl.signature": f"ed25519:{signing.keyid}"}))


@pytest.mark.parametrize("layout", ["sigstore-bundle", "dsse"])
def test_imagectl_verify_reads_the_new_layout_and_the_old_one(registry, layout):
    client = RegistryClient(registry.host, insecure=True)
    repository = f"standard/read-{layout}"
    image = push_image(client, repository)
    signing, _ = new_key()
    if layout == "dsse":
        old_layout(client, repository, image, signing)
    else:
        attach_statements(client, repository, image, statements(repository, image.digest), signing,
                          datetime.now(timezone.utc))
    ref = parse_reference(f"{registry.host}/{repository}@{image.digest}")

    report = verify_image(client, ref, dsse.public_half(signing))
    read = {a.predicate_type: a for a in report.attestations}
    assert set(read) == set(PREDICATES)
    for item in read.values():
        assert (item.ok, item.layout, item.signature) == (True, layout, f"verified ed25519:{signing.keyid[:16]}")
    assert report.problems == ["missing sbom: no attestation of https://cyclonedx.org/bom refers to the image"]
    assert report.as_dict()["attestations"][0]["layout"] == layout

    stranger = dsse.public_half(new_key()[0])
    refused = verify_image(client, ref, stranger)
    assert {a.signature for a in refused.attestations} == {"invalid"}
    assert sum("signature: no valid signature by key" in p for p in refused.problems) == len(PREDICATES)
    # a client that looks for bundles only finds the new layout's
    assert len(bundles(registry.url, repository, image.digest)) == (len(PREDICATES) if layout != "dsse" else 0)
