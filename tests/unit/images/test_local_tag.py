"""Keeping the local copy of a moved tag in step: asked over a (fake) engine socket first, changed through the
engine interface only when it is stale, never an error."""

from __future__ import annotations

import json
import socketserver
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from imagectl.engine import ImageInfo
from imagectl.errors import EngineError
from imagectl.engine.docker import engine_socket, inspect_over_socket
from imagectl.engine.select import LazyEngine
from imagectl.images.local_tag import follow_locally
from imagectl.reference import parse_reference

REPO = parse_reference("registry.example.com/ml/torch-2.3-cu121")
NAME = REPO.familiar
OLD, NEW = "sha256:" + "1" * 64, "sha256:" + "2" * 64


class EngineSocket(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The image-inspect endpoint of the Engine API on a unix socket: ``images`` maps a reference to its answer."""

    daemon_threads = True

    def __init__(self, path: Path, images: dict[str, dict]) -> None:
        self.images, self.asked = images, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                server.asked.append(self.path)
                ref = self.path.removeprefix("/images/").removesuffix("/json")
                found = server.images.get(ref)
                body = json.dumps(found if found is not None else {"message": "No such image"}).encode()
                self.send_response(200 if found is not None else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def address_string(self) -> str:
                return "unix"

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(str(path), Handler)


@pytest.fixture
def engine_socket_at(tmp_path, monkeypatch) -> Iterator[EngineSocket]:
    path = tmp_path / "docker.sock"
    server = EngineSocket(path, {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    yield server
    server.shutdown()
    server.server_close()


class Engine:
    """The engine calls follow_locally may make, recorded."""

    def __init__(self, has: dict[str, str] | None = None, fail: bool = False) -> None:
        self.has, self.fail, self.calls = has or {}, fail, []

    def inspect(self, ref: str) -> ImageInfo | None:
        self.calls.append(("inspect", ref))
        image = self.has.get(ref)
        return ImageInfo(image, (), (f"{NAME}@{OLD}",)) if image else None

    def tag(self, image: str, repository: str, tag: str) -> None:
        if self.fail:
            raise EngineError("engine: conflict")
        self.calls.append(("tag", image, repository, tag))

    def untag(self, ref: str) -> None:
        self.calls.append(("untag", ref))


def never() -> Engine:
    raise AssertionError("the engine (and the Docker SDK) must not be needed here")


NEVER = LazyEngine(never)  # connects (and fails the test) only when something asks it


def test_without_an_engine_nothing_is_loaded_or_changed(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
    monkeypatch.delitem(sys.modules, "docker", raising=False)
    assert follow_locally(REPO, "latest", NEW, NEVER) == ""
    assert "docker" not in sys.modules


def test_no_local_tag_or_one_already_on_the_target_needs_no_engine(engine_socket_at):
    assert follow_locally(REPO, "latest", NEW, NEVER) == ""
    engine_socket_at.images[f"{NAME}:latest"] = {"Id": "sha256:img2", "RepoDigests": [f"{NAME}@{NEW}"]}
    assert follow_locally(REPO, "latest", NEW, NEVER) == ""
    assert engine_socket_at.asked == [f"/images/{NAME}:latest/json"] * 2


def test_a_stale_local_tag_is_re_tagged_onto_the_target_the_engine_has(engine_socket_at):
    engine_socket_at.images[f"{NAME}:latest"] = {"Id": "sha256:img1", "RepoDigests": [f"{NAME}@{OLD}"]}
    engine = Engine({f"{NAME}@{NEW}": "sha256:img2"})
    note = follow_locally(REPO, "latest", NEW, engine)
    assert engine.calls[-1] == ("tag", "sha256:img2", NAME, "latest") and note == f"local {NAME}:latest re-tagged to it"


def test_a_stale_local_tag_is_removed_when_the_engine_lacks_the_target(engine_socket_at):
    engine_socket_at.images[f"{NAME}:stable"] = {"Id": "sha256:img1", "RepoDigests": [f"{NAME}@{OLD}"]}
    engine = Engine()
    note = follow_locally(REPO, "stable", NEW, engine)
    assert engine.calls[-1] == ("untag", f"{NAME}:stable")
    assert note.startswith(f"local {NAME}:stable removed: this machine does not have {NEW[:19]}")


def test_an_engine_that_refuses_is_a_note_never_an_error(engine_socket_at):
    engine_socket_at.images[f"{NAME}:latest"] = {"Id": "sha256:img1", "RepoDigests": []}
    note = follow_locally(REPO, "latest", NEW, Engine({f"{NAME}@{NEW}": "sha256:img2"}, fail=True))
    assert note == f"local {NAME}:latest not updated: engine: conflict"


def test_a_non_unix_engine_is_asked_through_the_engine_interface(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    engine = Engine({f"{NAME}:latest": "sha256:img1"})
    assert follow_locally(REPO, "latest", NEW, engine).startswith(f"local {NAME}:latest removed")
    assert engine_socket("") == "/var/run/docker.sock" and engine_socket("unix:///run/d.sock") == "/run/d.sock"
    assert engine_socket("ssh://host") is None


def test_inspect_over_socket_answers_none_for_a_missing_image_and_raises_without_an_engine(engine_socket_at,
                                                                                        tmp_path):
    path = str(tmp_path / "docker.sock")
    engine_socket_at.images["a/b:1"] = {"Id": "x"}
    assert inspect_over_socket(path, "a/b:1") == {"Id": "x"} and inspect_over_socket(path, "a/b:2") is None
    with pytest.raises(OSError):
        inspect_over_socket(str(tmp_path / "none.sock"), "a/b:1")
