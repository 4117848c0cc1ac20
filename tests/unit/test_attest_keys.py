"""``[attest]`` keys proven before a build (:func:`imagectl.evidence.keys.signing_key`): each bad key is one
ConfigError line naming the file (exit 2); a good key, with or without its public half configured, signs."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from imagectl.config import Config
from imagectl.errors import ConfigError
from imagectl.evidence import dsse
from imagectl.evidence.keys import signing_key


def private_pem(key, encryption=None) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption or serialization.NoEncryption())


def public_pem(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def test_a_good_key_signs_and_its_public_half_may_be_configured(tmp_path):
    key = Ed25519PrivateKey.generate()
    private, public = write(tmp_path, "k.pem", private_pem(key)), write(tmp_path, "k.pub", public_pem(key))
    signing = signing_key(Config(attest_key=private, attest_public_key=public))
    assert signing is not None and signing.keyid == dsse.load_public_key(public).keyid
    assert signing_key(Config(attest_key=private)) is not None
    assert signing_key(Config()) is None


@pytest.mark.parametrize("name, data, message", [
    ("junk.pem", b"-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n",
     "not a readable unencrypted PEM private key"),
    ("empty.pem", b"", "not a readable unencrypted PEM private key"),
    ("locked.pem", private_pem(Ed25519PrivateKey.generate(), serialization.BestAvailableEncryption(b"pw")),
     "not a readable unencrypted PEM private key"),
    ("rsa.pem", private_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "not an Ed25519 key"),
], ids=["junk", "empty", "encrypted", "rsa"])  # fixed ids: the keys are generated at collection
def test_a_key_that_cannot_sign_is_one_line_naming_it(tmp_path, name, data, message):
    path = write(tmp_path, name, data)
    with pytest.raises(ConfigError) as refused:
        signing_key(Config(attest_key=path))
    line = str(refused.value)
    assert message in line and str(path) in line and "\n" not in line and refused.value.exit_code == 2


def test_a_public_key_that_is_not_the_keys_half_is_refused(tmp_path):
    ours, theirs = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    private = write(tmp_path, "k.pem", private_pem(ours))
    public = write(tmp_path, "other.pub", public_pem(theirs))
    with pytest.raises(ConfigError, match=r"\[attest\] public_key .*other.pub is not the public half of \[attest\] "
                                          r"key .*k.pem \(key ids [0-9a-f]{16} and [0-9a-f]{16}\)"):
        signing_key(Config(attest_key=private, attest_public_key=public))
    junk = write(tmp_path, "junk.pub", b"junk")
    with pytest.raises(ConfigError, match="not a readable PEM public key"):
        signing_key(Config(attest_key=private, attest_public_key=junk))
