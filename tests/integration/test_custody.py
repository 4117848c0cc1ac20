"""Custody (issue 36, item 1): an image is published only with its attestations.

Against a real registry (CNCF distribution 2.8: no referrers API, so attestations go through the ``sha256-HEX``
tag schema) behind :class:`~tests.integration.support.proxy.TamperingProxy`, which answers 500 to the PUT of every
referrer manifest (and of the referrers index) while a fault is armed:

- the build whose attaching fails exits 1 and no tag names its image (no immutable tag, no ``latest``); the only
  manifest PUT that reached the registry is the image's, by digest;
- the next build (the fault gone) finds nothing to reuse, builds, attaches, and only then tags: every tag PUT comes
  after the last referrer PUT, and ``latest`` names an image that carries its SBOM, provenance and check report;
- an image found by its build key without its attestations (as an older imagectl left one, or as a copy without its
  referrers) is not reused: it is rebuilt, and ``latest`` moves only onto an attested image;
- an ``[attest]`` key that cannot sign is one line, exit 2, before anything is planned: the registry sees nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from imagectl.errors import NotFoundError
from imagectl.evidence.statement import CHECK_REPORT, CYCLONEDX_BOM, SLSA_PROVENANCE
from imagectl.registry import Endpoint, RegistryClient, copy_image
from imagectl.registry.referrers import list_referrers
from imagectl.tags.naming import is_reserved
from tests.integration.conftest import write_config
from tests.integration.support.proxy import TamperingProxy

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11
ATTESTATIONS = {CYCLONEDX_BOM, SLSA_PROVENANCE, CHECK_REPORT}


@pytest.fixture
def proxy(registry):
    front = TamperingProxy(registry.url)
    yield front
    front.stop()


def private_pem(key, encryption=None) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption or serialization.NoEncryption())


def configure(folder: Path, mirror, wheel_index: str, host: str, namespace: str, engine: str | None,
              key: bytes | None = None, public: bytes | None = None) -> Path:
    """imagectl.toml for a build pushing to ``host`` (the proxy), signing with ``key`` (a PEM), if given."""
    config = write_config(folder, mirror=mirror, index_url=wheel_index, registry=SimpleNamespace(host=host),
                          namespace=namespace, engine=engine)
    lines = []
    if key is not None:
        (folder / "attest.pem").write_bytes(key)
        lines += ["[attest]", 'key = "attest.pem"']
    if public is not None:
        (folder / "attest.pub").write_bytes(public)
        lines += ['public_key = "attest.pub"']
    config.write_text(config.read_text() + "\n" + "\n".join(lines) + "\n")
    return config


def tags_of(client: RegistryClient, repo: str) -> dict[str, str]:
    """Every tag of ``repo`` that names an image: not the referrers tag schema's (``sha256-HEX``: they name
    referrers) nor imagectl's move records (``imagectl-move-...``: they name the log's entries)."""
    try:
        names = client.list_tags(repo)
    except NotFoundError:  # a repository no manifest was ever tagged in may be unknown to the registry
        return {}
    return {t: client.head_manifest(repo, t) for t in names if not is_reserved(t)}


def attestations_of(client: RegistryClient, repo: str, digest: str) -> set[str]:
    return {str(r.annotations.get("in-toto.io/predicate-type")) for r in list_referrers(client, repo, digest)}


def manifest_puts(proxy: TamperingProxy, repo: str, start: int = 0) -> list[str]:
    """The references of the manifest PUTs to ``repo`` the proxy saw since request number ``start``, in order."""
    prefix = f"/v2/{repo}/manifests/"
    return [path[len(prefix):] for method, path in proxy.seen[start:] if method == "PUT" and path.startswith(prefix)]


def test_an_image_is_tagged_only_with_its_attestations(run_cli, tmp_path, mirror, wheel_index, registry, proxy,
                                                        docker_config, engine):
    namespace = f"custody-{engine or 'auto'}"
    repo = f"{namespace}/{PROFILE}"
    configure(tmp_path, mirror, wheel_index, proxy.host, namespace, engine,
              key=private_pem(Ed25519PrivateKey.generate()))
    client = RegistryClient(registry.host, insecure=True)

    # 1. the registry answers 500 to every referrer's manifest PUT: the build fails and no tag names the image
    proxy.fail("PUT", f"/v2/{repo}/manifests/sha256-")
    failed = run_cli("build", PROFILE)
    assert failed.code == 1, failed.err[-3000:]
    assert re.search(r"attest: cannot attest \S+@sha256:[0-9a-f]{64}: .*500", failed.err), failed.err[-3000:]
    assert tags_of(client, repo) == {}, "a tag names an image that carries no attestations"
    puts = manifest_puts(proxy, repo)
    assert puts and all(p.startswith(("sha256:", "sha256-")) for p in puts), puts  # the image by digest alone
    image = puts[0]
    assert client.head_manifest(repo, image) == image and attestations_of(client, repo, image) == set()

    # 2. the fault gone, the next build builds, attaches, and only then tags; latest names an attested image
    proxy.heal()
    start = len(proxy.seen)
    again = run_cli("build", PROFILE, "--json")
    assert again.code == 0, again.err[-3000:]
    [result] = json.loads(again.out)["results"]
    assert result["status"] == "built", result
    tags = tags_of(client, repo)
    assert tags == {result["tag"]: result["digest"], "latest": result["digest"]}
    assert attestations_of(client, repo, result["digest"]) == ATTESTATIONS
    puts = manifest_puts(proxy, repo, start)
    referrers = [n for n, p in enumerate(puts) if p.startswith("sha256-")]
    naming = [(n, p) for n, p in enumerate(puts) if not p.startswith("sha256") and not is_reserved(p)]
    assert [p for _, p in naming] == [result["tag"], "latest"], puts  # the immutable tag, then latest
    assert puts[0] == result["digest"] and len(referrers) >= 3 and naming[0][0] > max(referrers), puts
    verified = run_cli("verify", f"{proxy.host}/{repo}:latest")
    assert verified.code == 0, verified.err

    # 3. the image under its immutable tag without its referrers (as an older imagectl, or a copy, leaves it) in a
    # repository of its own: not reused, rebuilt; latest moves only onto an attested image
    bare_namespace = f"custody-bare-{engine or 'auto'}"
    bare_repo = f"{bare_namespace}/{PROFILE}"
    copy_image(Endpoint(client, repo), result["digest"], Endpoint(client, bare_repo), result["tag"])
    assert tags_of(client, bare_repo) == {result["tag"]: result["digest"]}
    assert attestations_of(client, bare_repo, result["digest"]) == set()
    configure(tmp_path, mirror, wheel_index, proxy.host, bare_namespace, engine,
              key=(tmp_path / "attest.pem").read_bytes())
    rebuilt = run_cli("build", PROFILE, "--json")
    assert rebuilt.code == 0, rebuilt.err[-3000:]
    [second] = json.loads(rebuilt.out)["results"]
    assert second["status"] == "built", second  # the old code said "reused" and moved latest onto the bare image
    assert f"not reusing {proxy.host}/{bare_repo}:{result['tag']}" in rebuilt.err
    assert "lacks its attestations (sbom, provenance, check report missing)" in rebuilt.err
    assert second["notes"][0].startswith(f"rebuilt: {result['tag']} ") and "lacked its attestations" in \
        second["notes"][0]
    latest = tags_of(client, bare_repo)["latest"]
    assert latest == second["digest"] and attestations_of(client, bare_repo, latest) == ATTESTATIONS
    if second["digest"] == result["digest"]:  # buildah builds the very same image: the old tag is attested now
        assert "the rebuild is the same image: its attestations are now attached to it" in second["notes"][0]


@pytest.mark.parametrize("case", ["malformed", "empty", "encrypted", "rsa", "other public key"])
def test_an_attest_key_that_cannot_sign_is_refused_before_anything_is_built(run_cli, tmp_path, mirror, wheel_index,
                                                                             proxy, docker_config, engine, case):
    ours = Ed25519PrivateKey.generate()
    keys = {
        "malformed": b"-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
        "empty": b"\n",
        "encrypted": private_pem(ours, serialization.BestAvailableEncryption(b"secret")),
        "rsa": private_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "other public key": private_pem(ours),
    }
    public = None
    if case == "other public key":
        public = Ed25519PrivateKey.generate().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    configure(tmp_path, mirror, wheel_index, proxy.host, f"custody-keys-{engine or 'auto'}", engine,
              key=keys[case], public=public)
    refused = run_cli("build", PROFILE)
    assert refused.code == 2, refused.err[-3000:]
    # one line (beside the advisories' warning, said before any build), and no line of a build: nothing was planned
    [line] = [n for n in refused.err.splitlines() if not n.startswith("imagectl: warning: ")]
    assert line.startswith("imagectl: [attest] ") and str(tmp_path / "attest.p") in line, refused.err
    assert proxy.seen == []  # nothing planned, built or pushed: the registry was never asked
