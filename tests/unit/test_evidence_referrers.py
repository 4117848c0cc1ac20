"""The referrers tag schema (registry/referrers.py) against an in-memory registry that behaves as distribution 2.8
does (no referrers API, tags overwritten by the last PUT), and verify's agreement checks."""

from __future__ import annotations

import pytest

from imagectl.errors import NotFoundError
from imagectl.evidence.statement import CHECK_REPORT, CYCLONEDX_BOM, SLSA_PROVENANCE
from imagectl.evidence.verify import _agreement
from imagectl.registry.manifest import OCI_MANIFEST, Descriptor, Manifest, sha256_digest
from imagectl.registry.referrers import (
    Artifact,
    artifact_manifest,
    attach,
    delete_referrers,
    fallback_tag,
    index_manifest,
    is_referrer_tag,
    list_referrers,
    own_tag,
    referrer_of,
)
from imagectl.tags.naming import is_reserved

IMAGE = Descriptor(OCI_MANIFEST, "sha256:" + "aa" * 32, 100)
OTHER = Descriptor(OCI_MANIFEST, "sha256:" + "bb" * 32, 100)


class Registry:
    """Manifests by digest, tags naming them, blobs; a delete of a manifest takes its tags (distribution 2.8)."""

    host = "fake"

    def __init__(self):
        self.manifests: dict[str, Manifest] = {}
        self.tags: dict[str, str] = {}
        self.blobs: dict[str, bytes] = {}
        self.after_put = None  # called after each PUT of a tag: another writer at that moment

    def get_referrers(self, repository, digest):
        return None

    def list_tags(self, repository):
        return sorted(self.tags)

    def get_manifest(self, repository, reference):
        digest = self.tags.get(reference, reference)
        if digest not in self.manifests:
            raise NotFoundError(reference)
        return self.manifests[digest]

    def put_manifest(self, repository, reference, manifest):
        self.manifests[manifest.digest] = manifest
        if not reference.startswith("sha256:"):
            self.tags[reference] = manifest.digest
            if self.after_put:
                hook, self.after_put = self.after_put, None
                hook(reference)
        return manifest.digest

    def delete_manifest(self, repository, digest):
        if digest not in self.manifests:
            raise NotFoundError(digest)
        del self.manifests[digest]
        self.tags = {t: d for t, d in self.tags.items() if d != digest}

    def upload_blob(self, repository, data, digest=None):
        digest = digest or sha256_digest(data)
        self.blobs[digest] = data
        return digest

    def read_blob(self, repository, digest, max_bytes=0):
        return self.blobs[digest]


def art(name: str) -> Artifact:
    return Artifact("application/vnd.in-toto+json", "application/vnd.in-toto+json", name.encode(),
                    {"in-toto.io/predicate-type": name})


def test_tags_of_the_schema_are_reserved():
    assert fallback_tag(IMAGE.digest) == "sha256-" + "aa" * 32
    tag = own_tag(IMAGE.digest, OTHER.digest)
    assert tag == fallback_tag(IMAGE.digest) + "." + "bb" * 8 and is_referrer_tag(tag)
    assert is_reserved(tag) and is_reserved(fallback_tag(IMAGE.digest)) and not is_reserved("latest")


def test_attach_list_and_delete_only_the_subjects_artifacts():
    reg = Registry()
    mine = [attach(reg, "r", IMAGE, art(n)) for n in ("sbom", "provenance")]
    theirs = attach(reg, "r", OTHER, art("sbom"))
    assert {r.digest for r in list_referrers(reg, "r", IMAGE.digest)} == {r.digest for r in mine}
    index = reg.get_manifest("r", fallback_tag(IMAGE.digest)).json()
    assert {m["annotations"]["in-toto.io/predicate-type"] for m in index["manifests"]} == {"sbom", "provenance"}
    assert sorted(delete_referrers(reg, "r", IMAGE.digest)) == sorted(r.digest for r in mine)
    assert list_referrers(reg, "r", IMAGE.digest) == []
    assert not any(t.startswith(fallback_tag(IMAGE.digest)) for t in reg.tags)
    assert [r.digest for r in list_referrers(reg, "r", OTHER.digest)] == [theirs.digest]


def test_an_entry_a_concurrent_writer_overwrote_is_found_and_put_back():
    reg = Registry()
    first = attach(reg, "r", IMAGE, art("sbom"))
    stale = reg.get_manifest("r", fallback_tag(IMAGE.digest))  # what another writer read before our next PUT

    def other_writer(tag):
        reg.tags[tag] = stale.digest  # its PUT of what it read lands right after ours

    second_manifest = artifact_manifest(IMAGE, "t", Descriptor("t", reg.upload_blob("r", b"2"), 1), {})
    reg.put_manifest("r", own_tag(IMAGE.digest, second_manifest.digest), second_manifest)
    reg.after_put = other_writer
    # the index update verifies by reading back, and tries again when its entry was lost
    from imagectl.registry.referrers import _update_index

    _update_index(reg, "r", IMAGE.digest, add=[referrer_of(second_manifest)], sleep=lambda s: None)
    listed = {r.digest for r in list_referrers(reg, "r", IMAGE.digest)}
    assert listed == {first.digest, second_manifest.digest}
    # lost after the writer's last check: the artifact's own tag still finds it, and the index is mended
    reg.put_manifest("r", fallback_tag(IMAGE.digest), index_manifest([first]))
    assert {r.digest for r in list_referrers(reg, "r", IMAGE.digest)} == listed
    mended = reg.get_manifest("r", fallback_tag(IMAGE.digest)).json()["manifests"]
    assert {m["digest"] for m in mended} == listed


LABELS = {"imagectl.lock.packages": "filelock==3.15.1,torch==2.3.1", "imagectl.extras": "",
          "imagectl.lock.sha256": "cd" * 32, "org.opencontainers.image.base.digest": "sha256:" + "ef" * 32,
          "imagectl.build-key": "02" * 32}


def sbom(*purls: str, lock: str = "cd" * 32) -> dict:
    return {"bomFormat": "CycloneDX", "components": [{"purl": p} for p in purls],
            "metadata": {"properties": [{"name": "imagectl:lock.sha256", "value": lock},
                                        {"name": "imagectl:dpkg", "value": "status"}]}}


def provenance(lock: str = "cd" * 32, base: str = "ef" * 32, key: str = "02" * 32) -> dict:
    return {"buildDefinition": {"internalParameters": {"buildKey": key}, "resolvedDependencies": [
        {"name": "lock", "digest": {"sha256": lock}}, {"name": "base-image", "digest": {"sha256": base}}]}}


GOOD = sbom("pkg:pypi/torch@2.3.1", "pkg:pypi/filelock@3.15.1", "pkg:pypi/pip@24.0", "pkg:deb/debian/libc6@2.36")


def test_attestations_that_agree_with_the_labels_have_no_problem():
    found = {CYCLONEDX_BOM: [GOOD], SLSA_PROVENANCE: [provenance()], CHECK_REPORT: [{"result": "pass"}]}
    assert _agreement(found, LABELS) == []


@pytest.mark.parametrize("found, expected", [
    ({CYCLONEDX_BOM: [sbom("pkg:pypi/torch@2.3.1", "pkg:pypi/filelock@3.15.1", "pkg:pypi/evil@1.0",
                           "pkg:deb/debian/libc6@2.36")]}, "sbom: Python distributions"),
    ({CYCLONEDX_BOM: [sbom("pkg:pypi/torch@2.3.1", "pkg:pypi/filelock@3.15.1", "pkg:deb/debian/x@1",
                           lock="00" * 32)]}, "sbom: lock sha256 " + "00" * 32),
    ({SLSA_PROVENANCE: [provenance(base="00" * 32)]}, "provenance: base image"),
    ({SLSA_PROVENANCE: [provenance(key="00" * 32)]}, "provenance: build key"),
    ({SLSA_PROVENANCE: [provenance(lock="00" * 32)]}, "provenance: lock sha256"),
    ({CHECK_REPORT: [{"result": "fail"}]}, "check report: the in-image check did not pass"),
])
def test_each_disagreement_is_its_own_line(found, expected):
    problems = _agreement(found, LABELS)
    assert len(problems) == 1 and problems[0].startswith(expected), problems
