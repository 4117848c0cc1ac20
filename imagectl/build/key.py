"""The build key: what makes two builds the same build."""

from __future__ import annotations

import hashlib
from typing import Mapping

KEY_LABEL = "imagectl.build-key"


def build_key(files: Mapping[str, bytes], base_digest: str, build_args: Mapping[str, str]) -> str:
    """sha256 over the rendered context (names and contents), the base image digest and the build args.

    Pure and order-independent: the same inputs always give the same 64 hex digits.
    """
    h = hashlib.sha256()
    h.update(b"imagectl-build-key-v1\0")
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).hexdigest().encode() + b"\0")
    h.update(b"base\0" + base_digest.encode() + b"\0")
    for name in sorted(build_args):
        h.update(f"arg\0{name}\0{build_args[name]}\0".encode())
    return h.hexdigest()
