"""The build key: what makes two builds the same build (stored in the image as label ``imagectl.build-key``,
see :mod:`imagectl.labels`, and in the immutable tag's name)."""

from __future__ import annotations

import hashlib
from typing import Mapping

def build_key(files: Mapping[str, bytes], base_digest: str, build_args: Mapping[str, str],
              file_digests: Mapping[str, str] | None = None) -> str:
    """sha256 over the rendered context (names and contents), the digests of added context files, the base
    image digest and the build args.

    Pure and order-independent: the same inputs always give the same 64 hex digits.
    """
    digests = {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}
    digests.update(file_digests or {})
    h = hashlib.sha256()
    h.update(b"imagectl-build-key-v1\0")
    for name in sorted(digests):
        h.update(name.encode() + b"\0" + digests[name].encode() + b"\0")
    h.update(b"base\0" + base_digest.encode() + b"\0")
    for name in sorted(build_args):
        h.update(f"arg\0{name}\0{build_args[name]}\0".encode())
    return h.hexdigest()
