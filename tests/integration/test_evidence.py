"""Attestations end to end: images built by ``imagectl build`` against a real registry 2.8 (no referrers API: the
tag-schema fallback), signed with an Ed25519 key; ``verify``, promote, rollback, import, prune, and three kinds of
tampering, each its own line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from imagectl.cli import main
from imagectl.evidence.statement import CYCLONEDX_BOM, SLSA_PROVENANCE
from imagectl.registry import Descriptor, Endpoint, Manifest, RegistryClient, copy_image
from imagectl.registry.referrers import (
    artifact_manifest,
    copy_referrers,
    fallback_tag,
    index_manifest,
    list_referrers,
    own_tag,
    referrer_of,
)
from tests.integration.conftest import write_config
from tests.integration.test_standard_verifier import bundles, standard_verify

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"
REPO = f"attest/{PROFILE}"


def cli(config: Path, *args: str, capsys=None) -> tuple[int, str, str]:
    code = main(["--config", str(config), *args])
    if capsys is None:
        return code, "", ""
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_key(folder: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = folder / "attest.pem"
    key.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return key


@pytest.fixture(scope="module")
def built(tmp_path_factory, mirror, wheel_index, registry):
    """Two images of one profile, both attested and signed: A (first build), then B (``--force --no-cache``);
    ``latest`` on B.  Yields (config file, client, digest A, digest B)."""
    folder = tmp_path_factory.mktemp("attest")
    config = write_config(folder, mirror=mirror, index_url=wheel_index, registry=registry, namespace="attest")
    key = write_key(folder)
    config.write_text(config.read_text() + f"\n[attest]\nkey = {json.dumps(str(key))}\n")
    saved = {n: os.environ.pop(n) for n in list(os.environ) if n.startswith("IMAGECTL_")
             and not n.startswith("IMAGECTL_TEST_")}
    try:
        assert cli(config, "build", PROFILE, "--quiet")[0] == 0
        client = RegistryClient(registry.host, insecure=True)
        first = client.head_manifest(REPO, "latest")
        # B: the same profile again without the layer cache; Docker's layers carry the build's file mtimes, so
        # this is another image
        assert cli(config, "build", PROFILE, "--quiet", "--force", "--no-cache")[0] == 0
        second = client.head_manifest(REPO, "latest")
        assert first != second
        yield config, client, first, second
    finally:
        os.environ.update(saved)


def verify_json(config: Path, target: str, capsys) -> tuple[int, dict]:
    code, out, _ = cli(config, "verify", target, "--json", capsys=capsys)
    return code, json.loads(out)


def copy_with_referrers(client: RegistryClient, digest: str, repository: str) -> None:
    copy_image(Endpoint(client, REPO), digest, Endpoint(client, repository), "latest")
    copy_referrers(Endpoint(client, REPO), digest, Endpoint(client, repository), limit=1000)


def replace_referrer(client: RegistryClient, repository: str, digest: str, old: str, new: Manifest | None) -> None:
    """In ``repository``'s referrers of ``digest``: delete artifact ``old`` and list ``new`` (put under its own tag)
    instead, as someone with push rights could."""
    entries = [r for r in list_referrers(client, repository, digest) if r.digest != old]
    if new is not None:
        client.put_manifest(repository, own_tag(digest, new.digest), new)
        entries.append(referrer_of(new))
    client.put_manifest(repository, fallback_tag(digest), index_manifest(entries))
    client.delete_manifest(repository, old)


def artifact_of(client: RegistryClient, repository: str, digest: str, predicate: str) -> Manifest:
    found = [r for r in list_referrers(client, repository, digest)
             if r.annotations.get("in-toto.io/predicate-type") == predicate]
    assert len(found) == 1, found
    return client.get_manifest(repository, found[0].digest)


def problems_of(config: Path, target: str, capsys) -> list[str]:
    code, out, err = cli(config, "verify", target, capsys=capsys)
    assert code == 1, out + err
    return [line for line in err.splitlines() if line.startswith("imagectl: verify: ")]


def test_tampered_sbom_swapped_subject_and_missing_provenance_each_fail(built, registry, capsys):
    config, client, first, second = built
    host = registry.host

    # a tampered SBOM: a package added to the signed payload of its Sigstore bundle, the signature kept
    repo = "attest/tampered-sbom"
    copy_with_referrers(client, second, repo)
    sbom = artifact_of(client, repo, second, CYCLONEDX_BOM)
    layer = sbom.layers()[0]
    bundle = json.loads(client.read_blob(repo, layer.digest))
    envelope = bundle["dsseEnvelope"]
    import base64

    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["components"].append({"type": "library", "name": "evil", "version": "1.0",
                                                 "purl": "pkg:pypi/evil@1.0", "bom-ref": "pkg:pypi/evil@1.0"})
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    data = json.dumps(bundle).encode()
    forged = artifact_manifest(Descriptor("application/vnd.oci.image.manifest.v1+json", second, 0),
                               sbom.json()["artifactType"],
                               Descriptor(layer.media_type, client.upload_blob(repo, data), len(data)),
                               sbom.json()["annotations"])
    replace_referrer(client, repo, second, sbom.digest, forged)
    lines = problems_of(config, f"{host}/{repo}:latest", capsys)
    assert len(lines) == 1 and "sbom" in lines[0] and "signature: no valid signature" in lines[0], lines

    # a swapped subject: B's provenance listed among A's referrers, A's own gone
    repo = "attest/swapped"
    copy_with_referrers(client, first, repo)
    copy_image(Endpoint(client, REPO), second, Endpoint(client, repo), "other")
    copy_referrers(Endpoint(client, REPO), second, Endpoint(client, repo), limit=1000)
    theirs = artifact_of(client, repo, second, SLSA_PROVENANCE)
    replace_referrer(client, repo, first, artifact_of(client, repo, first, SLSA_PROVENANCE).digest, theirs)
    lines = problems_of(config, f"{host}/{repo}:latest", capsys)
    assert len(lines) == 1 and "provenance" in lines[0], lines
    assert f"its subject is {second}, not the image {first}" in lines[0]

    # a missing provenance
    repo = "attest/missing"
    copy_with_referrers(client, first, repo)
    replace_referrer(client, repo, first, artifact_of(client, repo, first, SLSA_PROVENANCE).digest, None)
    lines = problems_of(config, f"{host}/{repo}:latest", capsys)
    assert lines == ["imagectl: verify: missing provenance: no attestation of https://slsa.dev/provenance/v1 "
                     "refers to the image"], lines


def test_verify_rollback_promote_import_and_prune(built, registry, capsys):
    config, client, first, second = built
    code, report = verify_json(config, PROFILE, capsys)
    assert code == 0, report["problems"]
    assert report["digest"] == second and report["signatures"].startswith("verified (ed25519")
    assert sorted(a["predicate_type"] for a in report["attestations"]) == sorted(
        [CYCLONEDX_BOM, SLSA_PROVENANCE, "https://imagectl.dev/attestation/check-report/v1"])
    assert {a["layout"] for a in report["attestations"]} == {"sigstore-bundle"}
    assert fallback_tag(second) in client.list_tags(REPO)  # registry 2.8: the tag-schema fallback
    assert client.get_referrers(REPO, second) is None
    # a verifier not written here accepts what the build attached (tests/integration/test_standard_verifier.py)
    public_pem = serialization.load_pem_private_key((config.parent / "attest.pem").read_bytes(), None).public_key() \
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    found = bundles(registry.url, REPO, second)
    assert {standard_verify(blob, public_pem, second)["predicateType"] for _, blob in found} == {
        CYCLONEDX_BOM, SLSA_PROVENANCE, "https://imagectl.dev/attestation/check-report/v1"}

    # rollback and promote point at the same digests: the attestations stay with them
    assert cli(config, "rollback", PROFILE, capsys=capsys)[0] == 0
    code, report = verify_json(config, PROFILE, capsys)
    assert code == 0 and report["digest"] == first, report["problems"]
    assert cli(config, "promote", PROFILE, "--channel", "stable", capsys=capsys)[0] == 0
    code, report = verify_json(config, f"{registry.host}/{REPO}:stable", capsys)
    assert code == 0 and report["digest"] == first, report["problems"]

    # import into another repository of the registry copies the referrers
    code, _, err = cli(config, "import", f"{registry.host}/{REPO}@{first}", "--name", f"{PROFILE}-copy",
                       "--no-check", capsys=capsys)
    assert code == 0, err
    code, report = verify_json(config, f"{PROFILE}-copy", capsys)
    assert code == 0 and report["digest"] == first, report["problems"]

    # prune deletes B (nothing points to it) and B's attestations, and only those
    kept = {r.digest for r in list_referrers(client, REPO, first)}
    gone = {r.digest for r in list_referrers(client, REPO, second)}
    assert len(kept) == 3 and len(gone) == 3
    code, out, err = cli(config, "prune", PROFILE, "--keep", "0", "--min-age-days", "0", "--json", capsys=capsys)
    assert code == 0, err
    assert sorted(json.loads(out)["attestations_deleted"]) == sorted(gone)
    assert client.head_manifest(REPO, second) is None
    assert all(client.head_manifest(REPO, d) is None for d in gone)
    assert not any(t.startswith(fallback_tag(second)) for t in client.list_tags(REPO))
    assert {r.digest for r in list_referrers(client, REPO, first)} == kept
    assert all(client.head_manifest(REPO, d) == d for d in kept)
    code, report = verify_json(config, PROFILE, capsys)
    assert code == 0 and report["digest"] == first, report["problems"]
