"""DSSE envelopes (https://github.com/secure-systems-lab/dsse/blob/master/envelope.md) signed with Ed25519.

The signature is over PAE(payloadType, payload), never over the payload alone, so a signed statement cannot be
passed off as another type.  Keys are PEM files: a PKCS#8 private key (``openssl genpkey -algorithm ed25519``) and
its SubjectPublicKeyInfo public key (``openssl pkey -in key.pem -pubout``).  Ed25519 because it is deterministic
(no nonce to get wrong), small, and what Sigstore's and in-toto's own tooling accept; through ``cryptography``,
loaded only when a key is configured.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import paths
from ..errors import ConfigError, OperationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ENVELOPE_TYPE = "application/vnd.dsse.envelope.v1+json"
ALGORITHM = "ed25519"


class SignatureError(OperationError):
    """An envelope whose signature does not verify, or that is no envelope (exit 1)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE v1 pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body`` (pure)."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


@dataclass(frozen=True)
class PublicKey:
    """A public key to check envelopes with, and its key id (sha256 of its DER SubjectPublicKeyInfo, hex)."""

    key: Ed25519PublicKey
    keyid: str


@dataclass(frozen=True)
class SigningKey:
    """A private key to sign with, and the key id of its public half."""

    key: Ed25519PrivateKey
    keyid: str


def _keyid(public: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()


def load_signing_key(path: Path) -> SigningKey:
    """The Ed25519 private key in PEM file ``path`` (unencrypted PKCS#8); raises ConfigError naming the file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = paths.read_bytes(path, ConfigError, "the [attest] key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"[attest] key {path}: not a readable unencrypted PEM private key "
                          f"({type(exc).__name__})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"[attest] key {path}: an {type(key).__name__}, not an Ed25519 key "
                          "(openssl genpkey -algorithm ed25519)")
    return SigningKey(key, _keyid(key.public_key()))


def load_public_key(path: Path) -> PublicKey:
    """The Ed25519 public key in PEM file ``path``; raises ConfigError naming the file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = paths.read_bytes(path, ConfigError, "the [attest] public_key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"[attest] public_key {path}: not a readable PEM public key ({type(exc).__name__})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"[attest] public_key {path}: an {type(key).__name__}, not an Ed25519 key")
    return PublicKey(key, _keyid(key))


def public_half(signing: SigningKey) -> PublicKey:
    """The public key of ``signing``."""
    return PublicKey(signing.key.public_key(), signing.keyid)


def sigstore_hint(keyid: str) -> str:
    """The key id ``keyid`` (hex sha256 of the DER SubjectPublicKeyInfo) as Sigstore writes a key hint: the same
    sha256, standard base64 (cosign's and sigstore-go's ``publicKey.hint`` and DSSE ``keyid`` of a key-signed
    bundle; pure)."""
    return base64.b64encode(bytes.fromhex(keyid)).decode()


def sign(payload_type: str, payload: bytes, signing: SigningKey, *, keyid: str | None = None) -> dict[str, Any]:
    """The DSSE envelope of ``payload`` with one Ed25519 signature over its PAE, its ``keyid`` ``keyid`` (default:
    the key id of ``signing``)."""
    signature = signing.key.sign(pae(payload_type, payload))
    return {"payloadType": payload_type, "payload": base64.b64encode(payload).decode(),
            "signatures": [{"keyid": signing.keyid if keyid is None else keyid,
                            "sig": base64.b64encode(signature).decode()}]}


def hex_keyid(keyid: str) -> str:
    """A signature's keyid as imagectl shows key ids (hex): a Sigstore hint (base64 of a sha256) turned back into
    hex, any other keyid as it is (pure)."""
    try:
        raw = base64.b64decode(keyid, validate=True)
    except (binascii.Error, ValueError):
        return keyid
    return raw.hex() if len(raw) == hashlib.sha256().digest_size and len(keyid) == 44 else keyid


def names_key(keyid: object, public: PublicKey) -> bool:
    """Whether a signature's (unauthenticated) ``keyid`` names ``public``: its hex key id or its Sigstore hint."""
    return keyid in (public.keyid, sigstore_hint(public.keyid))


def open_envelope(envelope: Mapping[str, Any]) -> tuple[str, bytes]:
    """(payloadType, payload) of an envelope, unverified; raises SignatureError for one that is malformed."""
    kind, body = envelope.get("payloadType"), envelope.get("payload")
    if not isinstance(kind, str) or not isinstance(body, str):
        raise SignatureError("not a DSSE envelope (no payloadType or payload)")
    try:
        return kind, base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise SignatureError("the DSSE payload is not base64") from None


def verify(envelope: Mapping[str, Any], public: PublicKey) -> tuple[str, bytes]:
    """(payloadType, payload) of an envelope that carries a valid signature by ``public``.

    Raises SignatureError when no signature by that key verifies over the PAE (or the envelope is malformed).
    """
    from cryptography.exceptions import InvalidSignature

    kind, body = open_envelope(envelope)
    signatures = envelope.get("signatures")
    for item in signatures if isinstance(signatures, list) else []:
        if not isinstance(item, dict) or not (item.get("keyid") in (None, "") or names_key(item.get("keyid"), public)):
            continue
        try:
            public.key.verify(base64.b64decode(str(item.get("sig") or ""), validate=True), pae(kind, body))
            return kind, body
        except (InvalidSignature, binascii.Error, ValueError):
            continue
    raise SignatureError(f"no valid signature by key {public.keyid[:16]}")
