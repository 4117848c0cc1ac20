import os
import re

import pytest

from imagectl.images.context_files import context_files_on_disk, file_digests
from imagectl.images.context_write import write_context
from imagectl.images.build_key import build_key
from imagectl.errors import InputError

BASE = "sha256:" + "a" * 64


def test_build_key_changes_with_every_input():
    files = {"Dockerfile": b"FROM x\n", "requirements.txt": b"torch==2.3.1\n"}
    key = build_key(files, BASE, {})
    assert key == build_key(dict(reversed(list(files.items()))), BASE, {})  # order-independent
    assert key != build_key({**files, "Dockerfile": b"FROM y\n"}, BASE, {})
    assert key != build_key(files, "sha256:" + "b" * 64, {})
    assert key != build_key(files, BASE, {"HTTP_PROXY": "http://p:3128"})
    assert key != build_key(files, BASE, {}, {"files/w.whl": "0" * 64})
    assert re.fullmatch(r"[0-9a-f]{64}", key), key  # a sha256, as lower-case hex


def test_where_a_pinned_base_is_pulled_from_is_not_part_of_the_key():
    """The same base digest through another mirror, a team copy or a registry on another port is the same build
    (the image's labels carry the key, so a mirror's name in it gave another image digest)."""
    digest = "sha256:" + "c" * 64

    def key(from_line: str) -> str:
        return build_key({"Dockerfile": f"{from_line}\nRUN true\n".encode()}, digest, {})

    mirrored = key(f"FROM 127.0.0.1:5000/hub/nvidia/cuda@{digest}")
    assert mirrored == key(f"FROM team.example.com/bases/nvidia/cuda@{digest}") == key(f"FROM nvidia/cuda@{digest}")
    assert mirrored == key(f"FROM 127.0.0.1:41234/hub/nvidia/cuda@{digest}")  # a test registry on another port
    assert key(f"FROM --platform=linux/arm64 h/cuda@{digest}") != mirrored  # the platform stays
    assert key(f"FROM h/cuda@sha256:{'d' * 64}") != mirrored  # another base is another build
    assert key("FROM h/cuda:12.1") != key("FROM h/cuda:12.2")  # unpinned: the reference is all there is


def test_context_files_and_cached_digests(tmp_path):
    root = tmp_path / "ctx"
    (root / "wheels").mkdir(parents=True)
    big = root / "wheels" / "a.whl"
    big.write_bytes(b"x" * 1000)
    found = context_files_on_disk([root])
    assert found == {"files/wheels/a.whl": big}
    cache = tmp_path / "cache.json"
    first = file_digests(found, cache)
    assert first == file_digests(found, cache)
    big.write_bytes(b"y" * 1000)
    os.utime(big, ns=(1, 1))
    assert file_digests(found, cache) != first  # a changed file is hashed again
    dest = tmp_path / "build"
    write_context({}, found, dest, link=True)
    assert (dest / "files/wheels/a.whl").read_bytes() == b"y" * 1000


def test_context_symlink_escaping_is_refused(tmp_path):
    root = tmp_path / "ctx"
    root.mkdir()
    (root / "secret").symlink_to("/etc/passwd")
    with pytest.raises(InputError, match="links outside"):
        context_files_on_disk([root])
