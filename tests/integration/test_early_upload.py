"""Layer blobs uploaded while an image is still being made (:mod:`imagectl.images.early_upload`), against a real
registry: they arrive before any manifest; a registry that cannot be reached, or a blob file that is not what its
digest says, stops the uploads with one log line and no exception (the push then does the work, or fails itself)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from imagectl.images.early_upload import EarlyUpload
from imagectl.registry.access import connect

pytestmark = pytest.mark.integration


def blob(tmp_path: Path, data: bytes) -> tuple[Path, str, int]:
    path = tmp_path / hashlib.sha256(data).hexdigest()
    path.write_bytes(data)
    return path, f"sha256:{path.name}", len(data)


def uploader(host: str, repository: str, lines: list[str]) -> EarlyUpload:
    return EarlyUpload(lambda: connect(host, insecure=True), repository, lines.append)


def test_blobs_arrive_before_any_manifest_and_are_counted(tmp_path, registry):
    lines: list[str] = []
    early = uploader(registry.host, "early/one", lines)
    blobs = [blob(tmp_path, b"layer %d " % n * 1000) for n in range(3)]
    for path, digest, size in blobs:
        early.add(path, digest, size)
    sent = early.finish()
    assert sent is not None and sent.uploaded == sum(size for _, _, size in blobs) and not early.failed
    with connect(registry.host, insecure=True) as client:
        assert all(client.blob_exists("early/one", digest) for _, digest, _ in blobs)
        assert client.head_manifest("early/one", "latest") is None  # blobs only: no manifest, no tag
    assert any(line.startswith("uploaded while the image was made: ") for line in lines), lines

    again = uploader(registry.host, "early/one", lines)  # a second build of the same layers: nothing to send
    for path, digest, size in blobs:
        again.add(path, digest, size)
    sent = again.finish()
    assert sent is not None and sent.uploaded == 0 and sent.present == sum(size for _, _, size in blobs)


def test_a_registry_that_does_not_answer_stops_the_uploads_with_one_line(tmp_path):
    lines: list[str] = []
    early = uploader("127.0.0.1:9", "early/none", lines)  # the discard port: nothing listens
    path, digest, size = blob(tmp_path, b"x" * 100)
    early.add(path, digest, size)
    early.add(path, digest, size)
    sent = early.finish()
    assert sent is not None and sent.uploaded == 0
    assert early.failed and len([line for line in lines if "the push sends them" in line]) == 1, lines


def test_a_blob_file_that_is_not_its_digest_is_not_uploaded_and_stops_the_rest(tmp_path, registry):
    lines: list[str] = []
    early = uploader(registry.host, "early/bad", lines)
    path, digest, size = blob(tmp_path, b"good bytes")
    path.write_bytes(b"evil bytes")  # same size, other content
    later = blob(tmp_path, b"a later layer")
    early.add(path, digest, size)
    early.add(*later)
    sent = early.finish()
    assert early.failed and "not uploaded" in early.failed
    with connect(registry.host, insecure=True) as client:
        assert not client.blob_exists("early/bad", digest) and not client.blob_exists("early/bad", later[1])
    assert sent is not None and sent.uploaded == 0


def test_close_stops_after_the_upload_in_progress(tmp_path, registry):
    lines: list[str] = []
    early = uploader(registry.host, "early/closed", lines)
    early.close()
    path, digest, size = blob(tmp_path, b"after close")
    early.add(path, digest, size)  # the thread is gone: nothing is sent, nothing blocks
    with connect(registry.host, insecure=True) as client:
        assert not client.blob_exists("early/closed", digest)


class SlowLink:
    """A TCP relay to ``upstream`` (``host:port``) that passes what the client sends at most ``rate`` bytes a second,
    as a slow uplink would, counting those bytes; answers come back at once."""

    def __init__(self, upstream: str, rate: int) -> None:
        self.upstream, self.rate, self.sent = upstream, rate, 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.host = f"127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            host, port = self.upstream.rsplit(":", 1)
            server = socket.create_connection((host, int(port)))
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, slow: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(4096 if slow else 65536):
                target.sendall(data)
                if slow:
                    self.sent += len(data)
                    time.sleep(len(data) / self.rate)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._server.close()


def test_abort_ends_the_upload_in_progress_and_nothing_of_it_is_in_the_registry(tmp_path, registry):
    """A failed or interrupted build stops its uploads at once (issue 35, item 1): the 8 MB blob being sent over a
    256 kB/s link is given up before its next piece and its session cancelled; the later blob is never sent."""
    link = SlowLink(registry.host, 256 * 1024)
    lines: list[str] = []
    early = uploader(link.host, "early/aborted", lines)
    big = blob(tmp_path, os.urandom(8 * 1024 * 1024))
    later = blob(tmp_path, b"a later layer")
    early.add(*big)
    early.add(*later)
    deadline = time.monotonic() + 60
    while link.sent < 512 * 1024 and time.monotonic() < deadline:  # the big blob is on its way
        time.sleep(0.1)
    assert link.sent >= 512 * 1024
    asked = time.monotonic()
    early.abort()
    early.close()
    print(f"\n[measured] early upload: from abort to the end of its thread: {time.monotonic() - asked:.1f} s",
          file=sys.__stdout__)
    assert link.sent < 8 * 1024 * 1024  # not all of it went (some 30 s at this rate)
    with connect(registry.host, insecure=True) as client:
        assert not client.blob_exists("early/aborted", big[1]) and not client.blob_exists("early/aborted", later[1])
    assert not early.failed and not [line for line in lines if "stopped" in line]  # an abort is no failure
    link.close()
