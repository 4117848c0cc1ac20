"""An index behind Basic auth: ``imagectl build`` installs from it and the credential reaches no part of the image.

The credential is in ``[pip] index_url``; the test greps every layer of ``docker save``, the image's config
(labels, ENV), each ``docker history`` line and every line the command printed.  As a control, the same grep
finds the credential in the first (install) stage, which holds it by design and is never tagged.  The three
images are exported in one ``docker save`` (shared layers once), then each is read from its own entry of the
archive's ``manifest.json``.
"""

from __future__ import annotations

import io
import json
import posixpath
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


def saved_images(docker_client, refs: list[str]) -> dict[str, dict[str, bytes]]:
    """``docker save REF...`` in one export: for each ref, the members of the archive that are its own (its
    config, each of its layer folders: ``layer.tar`` and the v1 ``json``) and the shared ``manifest.json`` and
    ``repositories``: name -> content."""
    answer = docker_client.api.get(f"{docker_client.api.base_url}/images/get", params={"names": refs}, stream=True)
    answer.raise_for_status()
    with tarfile.open(fileobj=io.BytesIO(answer.raw.read())) as archive:
        files = {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}
        # a layer the archive holds already (under another image's folder) is a symlink to it
        links = {m.name: posixpath.normpath(posixpath.join(posixpath.dirname(m.name), m.linkname))
                 for m in archive.getmembers() if m.issym()}
    members = {**files, **{name: files[target] for name, target in links.items()}}
    entries = json.loads(members["manifest.json"])
    shared = {name: content for name, content in members.items() if name in ("manifest.json", "repositories")}
    images = {}
    for ref in refs:
        config = docker_client.images.get(ref).id.removeprefix("sha256:")
        [entry] = [e for e in entries if e["Config"].removesuffix(".json").endswith(config)]
        folders = {layer.rpartition("/")[0] + "/" for layer in entry["Layers"]}
        own = {name: content for name, content in members.items()
               if name == entry["Config"] or name.startswith(tuple(folders))}
        assert set(entry["Layers"]) <= set(own), f"layers of {ref} missing from the archive"
        images[ref] = {**shared, **own}
    return images


def files_in_layer(layer: bytes) -> dict[str, bytes]:
    """The regular files of one (uncompressed) layer tar."""
    with tarfile.open(fileobj=io.BytesIO(layer)) as archive:
        return {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def install_stage_id(output: str) -> str:
    """The image id of the build step that copied the netrc file (the install stage), from the build output."""
    match = re.search(r"COPY imagectl-pip\.netrc \S+\n(?:.*\n)*?(?:\[\d\d:\d\d\] )? ---> ([0-9a-f]{12})", output)
    assert match, "the build output names no install-stage step"
    return match.group(1)


def assert_no_secret(docker_client, ref: str, saved: dict[str, bytes], password: str) -> None:
    """``password`` is in no layer, no file of a layer, no part of the config (labels, ENV) and no history line;
    ``saved``: the image's members of ``docker save`` (see :func:`saved_images`)."""
    image = docker_client.images.get(ref)
    assert password not in json.dumps(image.attrs)  # labels, ENV, command, build key
    history = [json.dumps(step) for step in docker_client.api.history(ref)]
    assert history and not [line for line in history if password in line or "netrc" in line]
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
    private = f"{registry.host}/secrets/{PROFILE}-private:latest"
    stage = install_stage_id(built.err)  # the control: the install stage holds the credential, and the grep sees it
    saved = saved_images(docker_client, [base, private, stage])
    assert_no_secret(docker_client, base, saved[base], password)
    assert_no_secret(docker_client, private, saved[private], password)
    assert any(password.encode() in content for content in saved[stage].values())
    assert not docker_client.images.get(stage).tags  # never tagged, so never pushed
