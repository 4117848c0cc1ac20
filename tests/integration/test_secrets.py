"""An index behind Basic auth: ``imagectl build`` installs from it and the credential reaches no part of the image.

The credential is in ``[pip] index_url``; the test greps every layer of ``docker save``, the image's config
(labels, ENV), each ``docker history`` line and every line the command printed.  As a control, the same grep
finds the credential in the first (install) stage, which holds it by design and is never tagged.
"""

from __future__ import annotations

import io
import json
import re
import secrets
import tarfile
import urllib.error
import urllib.request

import pytest

from tests.fixtures.pypi.server import BasicAuthGate
from tests.integration.conftest import write_config

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"  # the stand-in base is Debian bookworm, whose python is 3.11


def saved_layers(docker_client, ref: str) -> dict[str, bytes]:
    """Every member of ``docker save REF`` (layer tars, image config, manifest): name -> content."""
    data = b"".join(docker_client.api.get_image(ref))
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def files_in_layer(layer: bytes) -> dict[str, bytes]:
    """The regular files of one (uncompressed) layer tar."""
    with tarfile.open(fileobj=io.BytesIO(layer)) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def install_stage_id(output: str) -> str:
    """The image id of the build step that copied the netrc file (the install stage), from the build output."""
    match = re.search(r"COPY imagectl-pip\.netrc \S+\n(?:.*\n)*?(?:\[\d\d:\d\d\] )? ---> ([0-9a-f]{12})", output)
    assert match, "the build output names no install-stage step"
    return match.group(1)


def assert_no_secret(docker_client, ref: str, password: str) -> None:
    """``password`` is in no layer, no file of a layer, no part of the config (labels, ENV) and no history line."""
    image = docker_client.images.get(ref)
    assert password not in json.dumps(image.attrs)  # labels, ENV, command, build key
    history = [json.dumps(step) for step in docker_client.api.history(ref)]
    assert history and not [line for line in history if password in line or "netrc" in line]
    saved = saved_layers(docker_client, ref)
    layers = [name for name in saved if name.endswith("layer.tar")]
    assert layers and not [name for name, content in saved.items() if password.encode() in content]
    for name in layers:
        assert not [f for f, content in files_in_layer(saved[name]).items() if password.encode() in content]


def test_authenticated_index_leaves_no_secret_in_the_image(run_cli, tmp_path, mirror, wheel_index, registry,
                                                           docker_client, docker_config):
    password = f"S3cr3t{secrets.token_hex(6)}"
    upstream = wheel_index.rsplit("/simple", 1)[0]
    with BasicAuthGate(upstream, "user", password) as gate:
        with pytest.raises(urllib.error.HTTPError, match="401"):  # the gate does refuse anonymous requests
            urllib.request.urlopen(f"{gate.url}/simple/torch/", timeout=10)
        index = f"http://user:{password}@{gate.url.split('://', 1)[1]}/simple"
        write_config(tmp_path, mirror=mirror, index_url=index, registry=registry, namespace="secrets")
        built = run_cli("build", PROFILE)
        assert built.code == 0, built.err[-3000:]
        assert any(path.startswith("/files/torch-") and ok for path, ok in gate.log)  # pip authenticated
        base = f"{registry.host}/secrets/{PROFILE}:latest"
        extra = run_cli("build", PROFILE, "--base", base, "--extra", "team-extra==1.0", "--suffix", "private")
        assert extra.code == 0, extra.err[-3000:]
        assert any(path.startswith("/files/team_extra-") and ok for path, ok in gate.log)

    for result in (built, extra):
        assert password not in result.out + result.err and "  built" in result.out
    image = docker_client.images.get(base)
    assert image.labels["imagectl.profile"] == PROFILE and len(image.labels["imagectl.build-key"]) == 64
    assert_no_secret(docker_client, base, password)
    assert_no_secret(docker_client, f"{registry.host}/secrets/{PROFILE}-private:latest", password)

    stage = install_stage_id(built.err)  # the control: the install stage holds the credential, and the grep sees it
    assert any(password.encode() in content for content in saved_layers(docker_client, stage).values())
    assert not docker_client.images.get(stage).tags  # never tagged, so never pushed
