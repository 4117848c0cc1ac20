"""The pure parts of the evidence package: in-toto statements, DSSE envelopes, the SBOM and its Python set, the
provenance and check-report predicates."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import pytest

from imagectl import __version__
from imagectl.assemble.layer import LAYER_WRITER, writer_name
from imagectl.config import Config

from imagectl.errors import OperationError
from imagectl.evidence import dsse
from imagectl.evidence.attach import _OS_SCRIPT, layer_writer, os_packages_of
from imagectl.evidence.provenance import (
    BuildFacts,
    CheckFacts,
    EngineFacts,
    check_predicate,
    gpu_ran,
    provenance_predicate,
    templates_digest,
)
from imagectl.evidence.sbom import (
    LOCK_PROPERTY,
    OsRelease,
    SbomInputs,
    deb_purl,
    make_sbom,
    os_package_count,
    parse_dpkg_status,
    parse_os_release,
    parse_sbom,
    python_problems,
    python_set,
    sbom_property,
)
from imagectl.evidence.statement import SLSA_PROVENANCE, parse_statement, statement, subject_digests, to_bytes
from imagectl.image_spec import ImageSpec
from imagectl.imagecheck.compare import Finding
from imagectl.lock.lockfile import LockedPackage
from imagectl.matrix.names import resolve_profile

DIGEST = "sha256:" + "ab" * 32
STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Source: glibc
Version: 2.36-9+deb12u4
Description: GNU C Library
 a continuation line: Package: not-a-package

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2024a-0+deb12u1
"""


def test_statement_round_trip_names_the_digest():
    made = statement("reg/ml/torch", DIGEST, SLSA_PROVENANCE, {"x": 1})
    parsed = parse_statement(to_bytes(made), "it")
    assert subject_digests(parsed) == [DIGEST] and parsed["predicateType"] == SLSA_PROVENANCE
    with pytest.raises(OperationError, match="not an in-toto v1 statement"):
        parse_statement(b'{"_type": "other"}', "it")


def test_pae_is_the_dsse_v1_encoding():
    # the example of the DSSE protocol document
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world")


@pytest.fixture
def keys(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = tmp_path / "key.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public = tmp_path / "pub.pem"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_dsse_sign_verify_and_tamper(keys):
    signing = dsse.load_signing_key(keys[0])
    public = dsse.load_public_key(keys[1])
    assert public.keyid == signing.keyid
    envelope = dsse.sign("application/vnd.in-toto+json", b'{"a":1}', signing)
    assert dsse.verify(envelope, public) == ("application/vnd.in-toto+json", b'{"a":1}')
    forged = dict(envelope, payload="eyJhIjoyfQ==")  # {"a":2}
    with pytest.raises(dsse.SignatureError, match="no valid signature"):
        dsse.verify(forged, public)
    retyped = dict(envelope, payloadType="text/plain")  # the PAE covers the type too
    with pytest.raises(dsse.SignatureError):
        dsse.verify(retyped, public)


def test_a_key_that_is_not_ed25519_is_a_config_error(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from imagectl.errors import ConfigError

    path = tmp_path / "ec.pem"
    path.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(ConfigError, match="not an Ed25519 key"):
        dsse.load_signing_key(path)
    (tmp_path / "junk.pem").write_text("junk")
    with pytest.raises(ConfigError, match="junk.pem"):
        dsse.load_signing_key(tmp_path / "junk.pem")


def test_dpkg_status_and_purls():
    debs = parse_dpkg_status(STATUS)
    assert [(d.name, d.version, d.arch, d.source) for d in debs] == [
        ("libc6", "2.36-9+deb12u4", "amd64", "glibc"), ("tzdata", "2024a-0+deb12u1", "all", "")]
    release = parse_os_release('PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n')
    assert release == OsRelease("ubuntu", "22.04")
    assert deb_purl(debs[0], release) == "pkg:deb/ubuntu/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=ubuntu-22.04"


def test_os_packages_come_from_the_script_s_output_and_output_cut_short_is_refused():
    assert "echo --imagectl-dpkg-end--" in _OS_SCRIPT  # the script prints the end mark the reader looks for
    release = 'ID=debian\nVERSION_ID="12"\n'
    whole = f"{release}--imagectl-dpkg-status--\n{STATUS}\n--imagectl-dpkg-end--\n"
    debs, found, how = os_packages_of(whole + "a warning buildah wrote to stderr\n")
    assert ([d.name for d in debs], found, how) == (["libc6", "tzdata"], OsRelease("debian", "12"), "status")
    missing = f"{release}--imagectl-dpkg-status--\n--imagectl-dpkg-status--missing\n\n--imagectl-dpkg-end--\n"
    assert os_packages_of(missing) == ([], OsRelease("debian", "12"), "the image has no /var/lib/dpkg/status")
    # the end of the output lost (buildah run dropped what its relay held): an error, not an SBOM short of packages
    cut = whole[:whole.index("Package: tzdata") + 30]
    with pytest.raises(OperationError, match=f"ended before its end mark \\({len(cut)} characters\\)"):
        os_packages_of(cut)


def inputs(**changes) -> SbomInputs:
    values = dict(
        name="reg/ml/torch", digest=DIGEST,
        locked=[LockedPackage("torch", "2.3.1", ("11" * 32, "22" * 32)), LockedPackage("filelock", "3.15.1", ())],
        extras=[LockedPackage("team-extra", "1.0", ("33" * 32,))],
        inventory={"torch": "2.3.1", "filelock": "3.15.1", "team_extra": "1.0", "pip": "24.0"},
        debs=parse_dpkg_status(STATUS), os_release=OsRelease("debian", "12"), lock_sha256="cd" * 32,
        when=datetime(2024, 5, 1, tzinfo=timezone.utc))
    values.update(changes)
    return SbomInputs(**values)


def test_sbom_lists_every_package_with_hashes_and_purls_and_validates():
    raw = make_sbom(inputs())
    assert raw == make_sbom(inputs())  # deterministic
    document = parse_sbom(raw)
    assert document["specVersion"] == "1.6"
    assert python_set(document) == {"torch": "2.3.1", "filelock": "3.15.1", "team-extra": "1.0", "pip": "24.0"}
    assert os_package_count(document) == 2
    assert sbom_property(document, LOCK_PROPERTY) == "cd" * 32
    torch = next(c for c in document["components"] if c["name"] == "torch")
    assert torch["purl"] == "pkg:pypi/torch@2.3.1"
    assert {h["content"] for h in torch["hashes"]} == {"11" * 32, "22" * 32}
    libc = next(c for c in document["components"] if c["name"] == "libc6")
    assert libc["purl"].startswith("pkg:deb/debian/libc6@") and "distro=debian-12" in libc["purl"]


def test_python_problems_compare_with_the_lock_plus_extras():
    lock, extras = {"torch": "2.3.1", "filelock": "3.15.1"}, {"team-extra": "1.0"}
    found = {"torch": "2.3.1", "filelock": "3.15.1", "team-extra": "1.0", "pip": "24.0"}
    assert python_problems(found, lock, extras) == []  # the venv's pip is exempt, as in the check
    assert python_problems({**found, "evil": "1.0"}, lock, extras) == ["not in the lock: evil==1.0"]
    assert python_problems({**found, "torch": "2.3.0"}, lock, extras) == ["differs: torch 2.3.1 != 2.3.0"]
    assert python_problems({"torch": "2.3.1"}, lock, extras) == ["missing: filelock==3.15.1, team-extra==1.0"]
    # an image on a user's base: only the extras are promised
    assert python_problems({"anything": "1", "team-extra": "1.0"}, None, extras) == []


def facts(**changes) -> BuildFacts:
    values = dict(profile="torch-2.3-cu121", matrix_entry={"cuda": "12.1", "packages": {"torch": "2.3.1"}},
                  extras=(), user_base=None, lock_sha256="cd" * 32, lock_origin="shipped",
                  lock_id="torch-2.3.1-cu121-py3.11", base="docker.io/nvidia/cuda:12.1.1-base-ubuntu22.04",
                  base_digest="sha256:" + "ef" * 32, templates_sha256="01" * 32, build_key="02" * 32,
                  engine=EngineFacts("docker", "20.10.24"), started=datetime(2024, 5, 1, 12, tzinfo=timezone.utc),
                  finished=datetime(2024, 5, 1, 12, 5, tzinfo=timezone.utc))
    values.update(changes)
    return BuildFacts(**values)


def test_provenance_records_inputs_builder_and_times():
    predicate = provenance_predicate(facts())
    definition = predicate["buildDefinition"]
    deps = {d["name"]: d for d in definition["resolvedDependencies"]}
    assert deps["lock"]["digest"] == {"sha256": "cd" * 32}
    assert deps["base-image"]["digest"] == {"sha256": "ef" * 32}
    assert deps["templates"]["digest"] == {"sha256": "01" * 32}
    assert deps["matrix-entry"]["annotations"]["cuda"] == "12.1"
    assert definition["externalParameters"] == {"profile": "torch-2.3-cu121", "extras": []}
    run = predicate["runDetails"]
    assert run["builder"]["id"].endswith("/docker@20.10.24")
    assert run["metadata"]["startedOn"] == "2024-05-01T12:00:00Z"
    assert run["metadata"]["finishedOn"] == "2024-05-01T12:05:00Z"
    json.dumps(predicate)  # plain data
    assert "digest" not in {d["name"]: d for d in provenance_predicate(facts(base_digest=""))
                            ["buildDefinition"]["resolvedDependencies"]}["base-image"]


def test_provenance_of_an_assembled_build_names_its_layer_writer():
    run = provenance_predicate(facts(engine=EngineFacts("buildah", "1.33.7"), layer_writer=LAYER_WRITER))["runDetails"]
    assert run["builder"]["version"] == {"imagectl": __version__, "buildah": "1.33.7", "layer-writer": LAYER_WRITER}
    assert LAYER_WRITER == "imagectl-layer/2"  # the byte format test_layer_golden.py fixes
    plain = provenance_predicate(facts())["runDetails"]["builder"]["version"]  # the engine wrote every layer
    assert plain == {"imagectl": __version__, "docker": "20.10.24"}


@dataclass(frozen=True)
class _Plan:
    spec: ImageSpec
    netrc: bytes = b""


def test_the_layer_writer_is_recorded_for_the_builds_that_assemble_and_only_those(matrix, monkeypatch):
    monkeypatch.setattr("imagectl.engine.features.host.machine", lambda: "x86_64")
    plan = _Plan(ImageSpec(resolve_profile("torch-2.3-cu121", matrix)))
    buildah = Config(build_engine="buildah")
    assert layer_writer(plan, buildah) == LAYER_WRITER
    assert layer_writer(plan, Config(build_engine="docker")) == ""
    assert layer_writer(plan, Config(build_engine="buildah", build_install="pip")) == ""
    assert layer_writer(replace(plan, netrc=b"machine pypi.example.com login u password p\n"), buildah) == ""


def test_the_layer_writer_of_a_zstd_build_names_the_zstd_encoder(matrix, monkeypatch):
    monkeypatch.setattr("imagectl.engine.features.host.machine", lambda: "x86_64")
    plan = _Plan(ImageSpec(resolve_profile("torch-2.3-cu121", matrix)))
    zstd = Config(build_engine="buildah", registry_compression="zstd")
    assert layer_writer(plan, zstd) == writer_name("zstd") == f"{LAYER_WRITER}+zstd-1.5.7-l3"
    assert layer_writer(plan, Config(build_engine="docker", registry_compression="zstd")) == ""


def test_templates_digest_covers_names_and_contents():
    assert templates_digest({"a": b"1", "b": b"2"}) == templates_digest({"b": b"2", "a": b"1"})
    assert templates_digest({"a": b"1"}) != templates_digest({"a": b"2"})
    assert templates_digest({"a": b"1"}) != templates_digest({"c": b"1"})


def test_the_gpu_check_counts_as_run_only_on_a_gpu():
    asked_no_device = {"gpu_requested": True, "framework": {"gpu": {"available": False, "device_count": 0}}}
    on_device = {"gpu_requested": True, "framework": {"gpu": {"available": True, "device": "NVIDIA H200"}}}
    assert not gpu_ran(asked_no_device) and not gpu_ran({"gpu_requested": False}) and gpu_ran(on_device)
    check = CheckFacts(("python", "/opt/imagectl/check.py", "--gpu"), True, asked_no_device,
                       [Finding("python", "3.11", "3.11", ok=True)], EngineFacts("docker", "20.10"),
                       "linux/amd64", "x86_64")
    predicate = check_predicate(check)
    assert predicate["ran"]["gpuRequested"] and not predicate["ran"]["gpuRan"] and predicate["found"]["gpu"] is None
    assert predicate["result"] == "pass" and predicate["where"]["platform"] == "linux/amd64"
    ran = check_predicate(CheckFacts(check.command, True, on_device, [], check.engine, "linux/amd64", "x86_64"))
    assert ran["ran"]["gpuRan"] and ran["ran"]["gpuDevice"] == "NVIDIA H200"
    failing = check_predicate(CheckFacts(check.command, False, {}, [Finding("x", "1", "2", ok=False)],
                                         check.engine, "linux/amd64", "x86_64"))
    assert failing["result"] == "fail"


def test_verify_needs_a_registry_and_a_known_name(run_cli):
    local = run_cli("verify", "torch-2.3-cu121")
    assert local.code == 2 and "no [registry] url configured" in local.err  # a configuration to fix: exit 2
    unknown = run_cli("verify", "no-such-profile")
    assert unknown.code == 2 and unknown.err.startswith("imagectl: ")
