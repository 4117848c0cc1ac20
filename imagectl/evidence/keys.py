"""The ``[attest]`` key a build signs its attestations with, read and proven before anything is built.

A key that cannot sign used to be noticed at the step ``attest``, after the build and the push.  Now ``build``
calls :func:`signing_key` first (:func:`imagectl.images.builder.build_many`): the private key must load (an
unencrypted PKCS#8 Ed25519 PEM), must sign a probe whose signature its own public half verifies, and, where
``[attest] public_key`` is set too, that public key must be its public half (``verify`` checks signatures with
``public_key``: attestations signed by another key would all fail it).  The attaching step reads the key through
the same function, so the rules are one.
"""

from __future__ import annotations

from ..config import Config
from ..errors import ConfigError
from . import dsse

_PROBE_TYPE = "application/vnd.imagectl.key-probe"
_PROBE = b"imagectl: can this key sign?"


def signing_key(config: Config) -> dsse.SigningKey | None:
    """The ``[attest] key`` of ``config``, proven to sign (see the module docstring); None without one.

    Raises ConfigError (exit 2), one line naming the file, for a key that cannot be read, is malformed, encrypted
    or not Ed25519, cannot sign, or whose public half is not ``[attest] public_key``.
    """
    if not config.attest_key:
        return None
    signing = dsse.load_signing_key(config.attest_key)
    try:
        dsse.verify(dsse.sign(_PROBE_TYPE, _PROBE, signing), dsse.public_half(signing))
    except (dsse.SignatureError, ValueError, TypeError) as exc:
        raise ConfigError(f"[attest] key {config.attest_key}: cannot sign ({exc})") from None
    if config.attest_public_key:
        public = dsse.load_public_key(config.attest_public_key)
        if public.keyid != signing.keyid:
            raise ConfigError(f"[attest] public_key {config.attest_public_key} is not the public half of [attest] key "
                              f"{config.attest_key} (key ids {public.keyid[:16]} and {signing.keyid[:16]}): verify "
                              "would refuse every attestation the build signs")
    return signing
