"""A build from a team's static index (issue 35, item 6): a folder of wheels with ``simple/`` pages whose links carry
no ``#sha256=``, served by the standard library's ``http.server``.  ``imagectl lock`` (uv) locks from it; both
engines build from it (Docker: pip ``--require-hashes``; buildah: imagectl picks the file by its name and checks the
lock's sha256 on the stream); a wheel whose bytes are not the lock's is refused with one line and nothing is pushed;
``lock --check`` finds a locked file the pages mark yanked (``data-yanked``), though they list no sha256.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from imagectl.errors import NotFoundError
from imagectl.lock.lockfile import parse_lock
from imagectl.registry import RegistryClient
from tests.integration.conftest import standin_torch_wheels, write_config
from tests.integration.support.static_index import StaticIndex, serve_folder, write_static_pages
from tests.integration.support.wheels import make_wheel

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-py3.11"
LOCK_ID = "torch-2.3.1-cu121-py3.11"


@pytest.fixture
def static_index(tmp_path: Path) -> Iterator[StaticIndex]:
    """The stand-in wheels of torch-2.3-cu121's pins in ``files/``, pages without fragments, served."""
    root = tmp_path / "team-index"
    standin_torch_wheels(root / "files")
    write_static_pages(root)
    with serve_folder(root) as index:
        yield index


def pushed_tags(registry, repository: str) -> list[str]:
    try:
        return RegistryClient(registry.host, insecure=True).list_tags(repository)
    except NotFoundError:
        return []


def rewrite_with_other_bytes(wheel: Path) -> str:
    """Write another wheel of the same name, version and file name over ``wheel``; its sha256."""
    name, version = wheel.name.split("-")[:2]
    again = make_wheel(wheel.parent, name, version, {f"{name}/__init__.py": "# rebuilt: not the lock's bytes\n"})
    assert again == wheel
    return hashlib.sha256(wheel.read_bytes()).hexdigest()


def test_a_static_index_without_hashes_locks_and_builds_refuses_a_changed_wheel_and_finds_a_yanked_one(
        run_cli, tmp_path, monkeypatch, static_index, mirror, registry, docker_config, engine):
    pages = sorted((static_index.root / "simple").rglob("index.html"))
    assert len(pages) > 20 and not [p for p in pages if "#sha256" in p.read_text() or "sha256=" in p.read_text()]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))  # no wheel of another test's cache
    namespace = f"static-{engine or 'auto'}"  # one per engine: both run in one registry
    locks = tmp_path / "locks"
    locks.mkdir()
    write_config(tmp_path, mirror=mirror, index_url=static_index.url, registry=registry, namespace=namespace,
                 locks=locks, engine=engine)

    # uv locks from it: every wheel downloaded whole (no .metadata, no Range) and hashed; no upload times
    made = run_cli("lock", PROFILE)
    assert made.code == 0, made.err[-3000:]
    lock = parse_lock((locks / f"{LOCK_ID}.txt").read_text(), "lock")
    assert lock.header.index == static_index.url and lock.header.as_of == "none"
    [filelock] = [p for p in lock.packages if p.name == "filelock"]
    wheel = next((static_index.root / "files").glob(f"filelock-{filelock.version}-*.whl"))
    good = wheel.read_bytes()
    assert filelock.hashes == (hashlib.sha256(good).hexdigest(),)

    # the folder's filelock wheel rebuilt under the same name: refused before any layer, one line, nothing pushed
    other = rewrite_with_other_bytes(wheel)
    refused = run_cli("build", PROFILE, "--quiet")
    assert refused.code == 1, refused.err[-3000:]
    assert f"{PROFILE}  failed" in refused.out
    if engine == "docker":  # pip checks the file it downloaded in the build
        tail = [line for line in refused.err.splitlines() if line.startswith("| ")]
        assert any("DO NOT MATCH THE HASHES" in line for line in tail), refused.err[-3000:]
        assert any(f"Expected sha256 {filelock.hashes[0]}" in line for line in tail), tail
        assert any("Got" in line and other in line for line in tail), tail
    else:
        [line] = [line for line in refused.err.splitlines() if line.startswith(f"imagectl: {PROFILE}: ")]
        url = f"{static_index.url.removesuffix('/simple')}/files/{wheel.name}"
        assert line == (f"imagectl: {PROFILE}: build: filelock=={filelock.version}: {wheel.name} from {url} does not "
                        f"match the lock: expected sha256 {filelock.hashes[0]}, got sha256 {other}"), line
        assert not list((tmp_path / "xdg-cache").rglob(f"{other}*")), "the refused bytes were kept"
    assert pushed_tags(registry, f"{namespace}/{PROFILE}") == []

    # the lock's own bytes back: the build takes each file by its name, checks it, and the image is the lock
    wheel.write_bytes(good)
    built = run_cli("build", PROFILE)
    assert built.code == 0, built.err[-3000:]
    assert "check: ok" in built.err and f"{PROFILE}  built" in built.out
    tags = pushed_tags(registry, f"{namespace}/{PROFILE}")
    assert "latest" in tags and [t for t in tags if re.fullmatch(r"2\.3\.1-cu121-py3\.11-.+", t)]
    if engine != "docker":  # the assembled layers were written from these files, each the lock's bytes
        wheels = tmp_path / "xdg-cache" / "imagectl" / "wheels"
        for package in lock.packages:
            [kept] = [p for h in package.hashes for p in (wheels / h).glob("*.whl")]
            assert hashlib.sha256(kept.read_bytes()).hexdigest() in package.hashes
        assert wheel.name in static_index.downloads()


    # lock --check matched yanked files by their listed sha256 only, so an index that lists none (this folder, its
    # pages carrying data-yanked) never reported one; now such a file is matched by its version, and says so
    assert run_cli("lock", "--check", "--framework", "torch").code == 0
    wheel.with_name(wheel.name + ".yanked").write_text("broken on 3.11\n")
    write_static_pages(static_index.root)
    page = (static_index.root / "simple" / "filelock" / "index.html").read_text()
    assert 'data-yanked="broken on 3.11"' in page and "sha256" not in page
    found = run_cli("lock", "--check", "--framework", "torch")
    assert found.code == 1, found.err[-3000:]
    assert (f"filelock=={filelock.version}: {wheel.name} is yanked (broken on 3.11) (the index lists it without a "
            "sha256: matched by version)") in found.err
