"""imagectl rebuild NAME --compare, its refusals: images without the labels, or of another imagectl version, are
refused with one line (exit 2).  The rebuild itself (from empty storage: ``reproduced sha256:...``; an image changed
in the registry: the layer and the file, exit 1) is tested with the two fresh runners of tests/integration/
test_locks.py, whose first image it rebuilds on a third."""

from __future__ import annotations

import hashlib

import pytest

from imagectl import __version__
from imagectl.labels import BUILD_KEY, IMAGECTL_VERSION, LOCK_SHA256, OCI_BASE_DIGEST, PROFILE
from imagectl.registry import RegistryClient
from tests.integration.support.registry import make_sample_image, push_sample_image

pytestmark = pytest.mark.integration

PROFILE_NAME = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11


@pytest.fixture()
def plain_config(tmp_path, registry):
    (tmp_path / "imagectl.toml").write_text(f'[registry]\nurl = "{registry.host}"\nnamespace = "ml"\n')
    return RegistryClient(registry.host, insecure=True)


def test_an_image_without_the_labels_is_refused_with_one_line(run_cli, plain_config, registry):
    push_sample_image(plain_config, "ml/foreign", "v1")
    refused = run_cli("rebuild", f"{registry.host}/ml/foreign:v1", "--compare")
    assert refused.code == 2
    assert "cannot rebuild: the image has no imagectl.profile, imagectl.lock.sha256" in refused.err
    assert refused.err.count("\n") == 1


def test_an_image_of_another_imagectl_version_is_refused_naming_both(run_cli, plain_config, registry):
    base = "sha256:" + hashlib.sha256(b"base").hexdigest()
    labels = {PROFILE: PROFILE_NAME, LOCK_SHA256: "0" * 64, OCI_BASE_DIGEST: base,
              IMAGECTL_VERSION: "0.0.1", BUILD_KEY: "1" * 64}
    push_sample_image(plain_config, "ml/older", "v1", make_sample_image(labels=labels))
    refused = run_cli("rebuild", f"{registry.host}/ml/older:v1", "--compare")
    assert refused.code == 2
    assert f"built by imagectl 0.0.1, this is imagectl {__version__}" in refused.err
