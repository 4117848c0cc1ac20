"""The build key: what makes two builds the same build (stored in the image as label ``imagectl.build-key``,
see :mod:`imagectl.labels`, and in the immutable tag's name)."""

from __future__ import annotations

import hashlib
from typing import Mapping

from ..reference import PINNED_FROM
from ..render.context import NETRC_FILE


def _public_netrc(content: bytes) -> bytes:
    """The netrc file without its passwords: which host and login an index is read with changes the key, the
    password never reaches it (the key is a label anyone who can pull the image reads)."""
    lines = []
    for line in content.decode("utf-8", "replace").splitlines():
        words = line.split()
        if "password" in words[:-1]:
            words = words[:words.index("password")]
        lines.append(" ".join(words))
    return "\n".join(lines).encode()


def _base_by_digest(dockerfile: bytes) -> bytes:
    """The Dockerfile with each base pinned by digest named by the digest alone: the same base pulled through
    another mirror, a team copy (``bases sync``) or a registry on another port is the same build."""
    return PINNED_FROM.sub(r"\1\3", dockerfile.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def build_key(files: Mapping[str, bytes], base_digest: str, build_args: Mapping[str, str],
              file_digests: Mapping[str, str] | None = None, *, compression: str = "gzip") -> str:
    """sha256 over the rendered context (names and contents; of a pip netrc file only hosts and logins; of the
    Dockerfile's ``FROM REF@sha256:...`` only the digest), the digests of added context files, the base image digest
    and the build args; and the layer compression of the image pushed, unless it is gzip (so every gzip build keeps
    the key it had): the same inputs pushed with gzip and with zstd layers are two images, which a build must not
    take for one another (a zstd build reusing the gzip image, or both under one immutable tag: their configs, and
    so their image ids, would differ by nothing else).

    Pure and order-independent: the same inputs always give the same 64 hex digits.
    """
    public = {name: _public_netrc(content) if name == NETRC_FILE else content for name, content in files.items()}
    if "Dockerfile" in public:
        public["Dockerfile"] = _base_by_digest(public["Dockerfile"])
    digests = {name: hashlib.sha256(content).hexdigest() for name, content in public.items()}
    digests.update(file_digests or {})
    h = hashlib.sha256()
    h.update(b"imagectl-build-key-v1\0")
    for name in sorted(digests):
        h.update(name.encode() + b"\0" + digests[name].encode() + b"\0")
    h.update(b"base\0" + base_digest.encode() + b"\0")
    for name in sorted(build_args):
        h.update(f"arg\0{name}\0{build_args[name]}\0".encode())
    if compression != "gzip":
        h.update(f"compression\0{compression}\0".encode())
    return h.hexdigest()
