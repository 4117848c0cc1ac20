"""``imagectl index`` trusts only check reports signed by the team's key (issue 36, item 3), against a real registry.

Each case pushes one small ``linux/amd64`` image (through the registry client, no build) under the immutable tag a
``build --platform linux/amd64 --push`` of the profile would give it (its build key worked out as ``index`` works
it out), attaches a passing check report of that platform (unsigned, signed by the team's key, or signed by
another key) as ``build`` attaches one (a Sigstore bundle), or as it attached one before bundles (imagectl's own DSSE
artifact, which images pushed then still carry), and runs ``imagectl index`` on it:

- with ``[attest]`` configured, an unsigned report and one signed by another key are refused (exit 1, one line
  naming the image and the reason, ``latest`` not moved); one signed by the key is taken;
- without a key, the unsigned report is taken and the platform marked ``unsigned`` (a signed one ``signed, not
  checked``), in the log, a note and ``--json``.
"""

from __future__ import annotations

import hashlib
import json
import platform as host_platform
from datetime import datetime, timezone
from pathlib import Path

import pytest

from imagectl.cli.workspace import Workspace
from imagectl.config import load_config
from imagectl.engine.select import engine_for
from imagectl.evidence import dsse
from imagectl.evidence.attach import PREDICATE_ANNOTATION, SIGNATURE_ANNOTATION, UNSIGNED, attach_statements
from imagectl.evidence.provenance import CheckFacts, EngineFacts, check_predicate
from imagectl.evidence.statement import CHECK_REPORT, PAYLOAD_TYPE, statement, to_bytes
from imagectl.images.builder import base_resolver
from imagectl.images.plan import BuildRequest, plan_build
from imagectl.images.trace import Trace
from imagectl.registry import Descriptor, RegistryClient
from imagectl.registry.referrers import Artifact, attach
from imagectl.tags.naming import immutable_tag
from tests.integration.conftest import write_config
from tests.integration.support.registry import make_sample_image, push_sample_image
from tests.integration.test_evidence import write_key

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"
AMD = "linux/amd64"


def push_checked_image(config_file: Path, namespace: str, signing: dsse.SigningKey | None,
                       layout: str = "sigstore-bundle") -> tuple[str, str]:
    """Push the linux/amd64 image ``index`` looks for in ``namespace`` and attach a passing check report of it,
    signed by ``signing`` (unsigned when None) in ``layout`` (a Sigstore bundle as ``build`` attaches it now, or
    ``dsse``: imagectl's own envelope artifact, as images pushed before carry); (its immutable tag, its digest)."""
    config = load_config(str(config_file))
    profile = Workspace(config).profile(PROFILE)
    plan = plan_build(BuildRequest(profile, platforms=(AMD,)), config, base_resolver(config, engine_for(config)),
                      Trace(), AMD)
    client = RegistryClient(plan.repository.domain, insecure=True)
    repo = plan.repository.path
    image = make_sample_image({"layer.txt": f"{namespace}\n".encode()}, labels={"imagectl.build-key": plan.key})
    tag = immutable_tag(profile, plan.key, image="sha256:" + hashlib.sha256(image.config).hexdigest())  # its id
    digest = push_sample_image(client, repo, tag, image)
    manifest = client.get_manifest(repo, digest)
    facts = CheckFacts(("python", "-m", "check"), False, {}, (), EngineFacts("buildah", "1"), AMD,
                       host_platform.machine())
    document = statement(plan.repository.familiar, digest, CHECK_REPORT, check_predicate(facts))
    subject = Descriptor(manifest.media_type, digest, len(manifest.raw))
    if signing is not None and layout == "sigstore-bundle":
        attach_statements(client, repo, subject, [(CHECK_REPORT, document)], signing, datetime.now(timezone.utc))
        return tag, digest
    payload = to_bytes(document)
    media_type, data, signature = PAYLOAD_TYPE, payload, UNSIGNED
    if signing is not None:
        media_type, signature = dsse.ENVELOPE_TYPE, f"ed25519:{signing.keyid}"
        data = to_bytes(dsse.sign(PAYLOAD_TYPE, payload, signing))
    annotations = {PREDICATE_ANNOTATION: CHECK_REPORT, SIGNATURE_ANNOTATION: signature}
    attach(client, repo, subject, Artifact(PAYLOAD_TYPE, media_type, data, annotations))
    return tag, digest


@pytest.fixture
def setup(tmp_path, mirror, wheel_index, registry):
    """(a config writer: namespace, key file or None -> the config file; the team key; another key)."""
    for folder in ("team", "other"):
        (tmp_path / folder).mkdir()
    team, other = write_key(tmp_path / "team"), write_key(tmp_path / "other")

    def config_for(namespace: str, key: Path | None) -> Path:
        folder = tmp_path / namespace
        folder.mkdir()
        made = write_config(folder, mirror=mirror, index_url=wheel_index, registry=registry, namespace=namespace)
        if key is not None:
            made.write_text(made.read_text() + f"\n[attest]\nkey = {json.dumps(str(key))}\n")
        return made

    return config_for, team, other


def index(run_cli, config: Path, *extra: str):
    return run_cli("--config", str(config), "index", PROFILE, "--platforms", AMD, *extra)


@pytest.mark.parametrize(("signer", "layout"), [("unsigned", ""), ("another key", "sigstore-bundle"),
                                                 ("another key", "dsse")])
def test_with_a_key_an_unsigned_report_or_one_signed_by_another_key_is_refused(run_cli, setup, registry, signer,
                                                                               layout):
    config_for, team, other = setup
    namespace = f"index-refused-{signer.replace(' ', '-')}-{layout}".rstrip("-")
    config = config_for(namespace, team)
    signing = None if signer == "unsigned" else dsse.load_signing_key(other)
    tag, digest = push_checked_image(config, namespace, signing, layout)

    refused = index(run_cli, config)
    assert refused.code == 1, refused.err
    lines = refused.err.strip().splitlines()
    assert len(lines) == 1, refused.err
    team_id = dsse.load_signing_key(team).keyid[:16]
    image = f"{registry.host}/{namespace}/{PROFILE}:{tag} ({digest[:19]})"
    if signing is None:
        reason = f"its check report is unsigned, and only one signed by the [attest] key ed25519:{team_id} counts"
    else:
        reason = (f"its check report is signed by another key (ed25519:{signing.keyid[:16]}), not by the [attest] key"
                  f" ed25519:{team_id}")
    assert lines[0] == f"imagectl: index {PROFILE}: {image}: {reason}; nothing assembled"
    assert RegistryClient(registry.host, insecure=True).head_manifest(f"{namespace}/{PROFILE}", "latest") is None


@pytest.mark.parametrize("layout", ["sigstore-bundle", "dsse"])
def test_with_a_key_a_report_signed_by_it_is_taken(run_cli, setup, registry, layout):
    config_for, team, _ = setup
    namespace = f"index-signed-{layout}"
    config = config_for(namespace, team)
    tag, digest = push_checked_image(config, namespace, dsse.load_signing_key(team), layout)

    done = index(run_cli, config, "--json")
    assert done.code == 0, done.err
    (entry,) = json.loads(done.out)["platforms"]
    assert (entry["tag"], entry["digest"]) == (tag, digest)
    assert entry["signature"] == f"verified ed25519:{dsse.load_signing_key(team).keyid[:16]}"
    assert RegistryClient(registry.host, insecure=True).head_manifest(f"{namespace}/{PROFILE}", "latest") == digest


@pytest.mark.parametrize("signer", ["unsigned", "signed"])
def test_without_a_key_reports_are_taken_and_marked(run_cli, setup, registry, signer):
    config_for, team, _ = setup
    namespace = f"index-nokey-{signer}"
    config = config_for(namespace, None)
    tag, digest = push_checked_image(config, namespace, dsse.load_signing_key(team) if signer == "signed" else None)
    mark = "unsigned" if signer == "unsigned" else "signed, not checked"

    shown = index(run_cli, config)
    assert shown.code == 0, shown.err
    assert f"{AMD}: {registry.host}/{namespace}/{PROFILE}:{tag} ({digest[:19]}, checked native, check report {mark})" \
        in shown.err
    assert f"note: {AMD}: {registry.host}/{namespace}/{PROFILE}:{tag}: its check report is {mark} (no [attest] key" \
        in shown.err
    again = index(run_cli, config, "--json")
    assert again.code == 0, again.err
    (entry,) = json.loads(again.out)["platforms"]
    assert (entry["digest"], entry["signature"]) == (digest, mark)
