"""imagectl.assemble.fetch: the wheel tags of a lock's platform, the pick of a lock's file, and the downloads into the
content-addressed cache, against a real loopback simple index (http.server in a thread) over made-up wheels."""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import ipaddress
import io
import json
import ssl
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from packaging.tags import Tag

from imagectl.assemble.fetch import (
    check_sha256,
    expected_sha256,
    fetch_wheels,
    linux_platforms,
    pick_wheel,
    supported_tags,
)
from imagectl.errors import BuildError, InputError, PackageIndexError
from imagectl.lock.lockfile import LockedPackage, package
from imagectl.pypi.simple import DistFile
from imagectl.pypi.transport import IndexSettings
from imagectl.retry import RetryPolicy
from imagectl.stop import Stop, Stopped

PLATFORM = "x86_64-manylinux_2_28"
PURE = "demo-1.0-py3-none-any.whl"
CP311 = "demo-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
CP312 = "demo-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
GLIBC_234 = "demo-1.0-cp311-cp311-manylinux_2_34_x86_64.whl"
SDIST = "demo-1.0.tar.gz"
OLDER = "demo-0.9-py3-none-any.whl"
DEMO_FILES = (PURE, CP311, CP312, GLIBC_234, SDIST, OLDER)


def _wheel_bytes(filename: str, padding: int = 0) -> bytes:
    """A real (small) wheel: a module, METADATA and WHEEL; its bytes differ by file name."""
    name, version = filename.split("-")[:2]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr(f"{name}/__init__.py", f"FILE = {filename!r}\n" + "#" * padding)
        archive.writestr(f"{name}-{version}.dist-info/METADATA",
                         f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(f"{name}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
    return buffer.getvalue()


def _file_bytes(filename: str, padding: int = 0) -> bytes:
    return _wheel_bytes(filename, padding) if filename.endswith(".whl") else b"sdist " + filename.encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Index:
    """A loopback simple index: ``projects`` name -> file names, ``files`` name -> bytes.  ``lies`` are bytes sent
    instead of a file's own (the listed sha256 stays that of ``files``), ``unhashed`` files are listed without a
    sha256, ``missing`` ones answer 404, ``barrier`` (when set) holds each file download until as many are in
    flight, and ``pause_s`` sends a file's body in pieces.  ``requests`` records every path asked for."""

    url: str = ""
    projects: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    lies: dict[str, bytes] = field(default_factory=dict)
    unhashed: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    barrier: threading.Barrier | None = None
    pause_s: float = 0.0  # between the 64 kB pieces of a file's body
    requests: list[str] = field(default_factory=list)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def add(self, project: str, filenames: tuple[str, ...] | list[str], padding: int = 0) -> None:
        for filename in filenames:
            self.files[filename] = _file_bytes(filename, padding)
        self.projects.setdefault(project, []).extend(filenames)

    def sha(self, filename: str) -> str:
        return _sha(self.files[filename])

    def downloads(self) -> list[str]:
        return [path.rsplit("/", 1)[-1] for path in self.requests if path.startswith("/files/")]

    def listings(self) -> list[str]:
        return [path for path in self.requests if path.startswith("/simple/")]


def _handler(index: Index) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            with index.guard:
                index.requests.append(self.path)
            if self.path.startswith("/simple/"):
                self._page(self.path.split("/")[2])
            elif self.path.startswith("/files/"):
                self._file(self.path.split("/")[2])
            else:
                self._send(404, b"no", "text/plain")

        def _page(self, project: str) -> None:
            if project not in index.projects:
                self._send(404, b"no such project", "text/plain")
            elif "json" in self.headers.get("Accept", "") and project.startswith("json"):
                self._send(200, _json_page(index, project), "application/vnd.pypi.simple.v1+json")
            else:
                self._send(200, _html_page(index, project), "text/html")

        def _file(self, filename: str) -> None:
            if filename not in index.files or filename in index.missing:
                self._send(404, b"gone", "text/plain")
                return
            if index.barrier is not None:
                index.barrier.wait()
            self._send(200, index.lies.get(filename, index.files[filename]), "application/octet-stream",
                       index.pause_s)

        def _send(self, status: int, body: bytes, kind: str, pause_s: float = 0.0) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for start in range(0, len(body), 64_000):
                    self.wfile.write(body[start:start + 64_000])
                    self.wfile.flush()
                    time.sleep(pause_s)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a test of that)
                pass

    return Handler


def _fragment(index: Index, filename: str) -> str:
    return "" if filename in index.unhashed else f"#sha256={index.sha(filename)}"


def _html_page(index: Index, project: str) -> bytes:
    anchors = "".join(f'<a href="../../files/{html.escape(f)}{_fragment(index, f)}">{html.escape(f)}</a><br>\n'
                      for f in index.projects[project])
    return f"<!DOCTYPE html><html><body>\n{anchors}</body></html>".encode()


def _json_page(index: Index, project: str) -> bytes:
    files = [{"filename": f, "url": f"../../files/{f}",
              "hashes": {} if f in index.unhashed else {"sha256": index.sha(f)}} for f in index.projects[project]]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files}).encode()


@contextmanager
def _serving(tls: ssl.SSLContext | None = None) -> Iterator[Index]:
    state = Index()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def index() -> Iterator[Index]:
    with _serving() as state:
        yield state


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "imagectl test index")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "index.pem", folder / "index.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def _locked(index: Index, name: str, filenames: tuple[str, ...] | list[str], version: str = "1.0") -> LockedPackage:
    return package(name, version, [index.sha(f) for f in filenames])


def _leftovers(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) if cache.exists() else []


# --- supported_tags -----------------------------------------------------------------------------


def _position(tags: list[Tag], text: str) -> int:
    return [str(t) for t in tags].index(text)


def test_manylinux_2_28_accepts_older_glibc_levels_and_aliases_in_pip_order() -> None:
    tags = supported_tags("3.11", PLATFORM)
    texts = [str(t) for t in tags]
    assert texts[0] == "cp311-cp311-manylinux_2_28_x86_64"
    order = ["cp311-cp311-manylinux_2_28_x86_64", "cp311-cp311-manylinux_2_17_x86_64",
             "cp311-cp311-manylinux2014_x86_64", "cp311-cp311-manylinux_2_12_x86_64",
             "cp311-cp311-manylinux2010_x86_64",
             "cp311-cp311-manylinux_2_5_x86_64", "cp311-cp311-manylinux1_x86_64", "cp311-cp311-linux_x86_64",
             "cp311-abi3-manylinux_2_28_x86_64", "cp310-abi3-manylinux1_x86_64", "py3-none-manylinux1_x86_64",
             "cp311-none-any", "py3-none-any"]
    assert [_position(tags, text) for text in order] == sorted(_position(tags, text) for text in order)
    assert not [t for t in texts if "manylinux_2_29" in t or "manylinux_2_34" in t or "cp312" in t]
    assert not [t for t in texts if "aarch64" in t or "macosx" in t or "win" in t or "musllinux" in t]
    assert len(texts) == len(set(texts))


def test_the_platform_list_is_pip_s_for_glibc_2_28() -> None:
    x86 = linux_platforms(PLATFORM)
    assert x86[:2] == ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64"]
    assert x86[-4:] == ["manylinux_2_6_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    assert x86.index("manylinux2014_x86_64") == x86.index("manylinux_2_17_x86_64") + 1
    assert x86.index("manylinux2010_x86_64") == x86.index("manylinux_2_12_x86_64") + 1
    assert len(x86) == 24 + 3 + 1  # 2_28 .. 2_5, three aliases, linux_x86_64
    arm = linux_platforms("aarch64-manylinux_2_28")  # no manylinux tag names aarch64 below glibc 2.17
    assert arm[0] == "manylinux_2_28_aarch64" and arm[-3:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64",
                                                                "linux_aarch64"]


def test_arm64_locks_get_aarch64_tags() -> None:
    texts = [str(t) for t in supported_tags("3.12", "aarch64-manylinux_2_28")]
    assert texts[0] == "cp312-cp312-manylinux_2_28_aarch64"
    assert "cp312-cp312-manylinux2014_aarch64" in texts and "cp312-cp312-manylinux1_aarch64" not in texts
    assert not [t for t in texts if "x86_64" in t]


@pytest.mark.parametrize("platform", ["x86_64", "linux/amd64", "x86_64-manylinux2014", "sparc-manylinux_2_28",
                                      "x86_64-musllinux_1_2", "", "x86_64-manylinux_2_28\n"])
def test_a_platform_it_cannot_read_is_one_input_error_line(platform: str) -> None:
    with pytest.raises(InputError) as caught:
        supported_tags("3.11", platform)
    message = str(caught.value)
    assert "\n" not in message and repr(platform) in message and "x86_64-manylinux_2_28" in message


def test_a_bad_python_version_is_an_input_error() -> None:
    with pytest.raises(InputError, match="not a CPython version"):
        supported_tags("3", PLATFORM)


# --- pick_wheel ---------------------------------------------------------------------------------


def _dist(filename: str, sha: str | None = None) -> DistFile:
    digest = sha if sha is not None else _sha(_file_bytes(filename))
    return DistFile(filename=filename, url=f"https://files.example/{filename}",
                    hashes={"sha256": digest} if digest else {})


def _demo(filenames: tuple[str, ...] = DEMO_FILES) -> list[DistFile]:
    return [_dist(f) for f in filenames]


def _lock_of(*filenames: str, version: str = "1.0") -> LockedPackage:
    return package("demo", version, [_sha(_file_bytes(f)) for f in filenames])


def test_the_cp311_platform_wheel_beats_the_pure_one_and_refused_tags_never_win() -> None:
    tags = supported_tags("3.11", PLATFORM)
    everything = _lock_of(*DEMO_FILES)
    assert pick_wheel(_demo(), everything, tags).filename == CP311
    assert pick_wheel(list(reversed(_demo())), everything, tags).filename == CP311
    # without the cp311 manylinux2014 wheel in the lock: cp312 and glibc 2.34 are refused, the pure wheel fits
    assert pick_wheel(_demo(), _lock_of(PURE, CP312, GLIBC_234, SDIST), tags).filename == PURE
    assert pick_wheel(_demo(), _lock_of(PURE, CP311), supported_tags("3.12", PLATFORM)).filename == PURE
    assert pick_wheel(_demo(), _lock_of(CP312, PURE), supported_tags("3.12", PLATFORM)).filename == CP312


def test_only_the_lock_s_hashes_and_version_count() -> None:
    tags = supported_tags("3.11", PLATFORM)
    files = _demo()
    assert pick_wheel(files, _lock_of(PURE), tags).filename == PURE  # the index's cp311 wheel is not the lock's
    wrong_version = package("demo", "0.9", [_sha(_file_bytes(PURE))])  # the hash of 1.0's file, pinned at 0.9
    with pytest.raises(BuildError):
        pick_wheel(files, wrong_version, tags)
    assert pick_wheel(files, _lock_of(OLDER, version="0.9"), tags).filename == OLDER


def test_no_fitting_wheel_is_one_build_line_naming_the_pin_index_and_target() -> None:
    with pytest.raises(BuildError) as caught:
        pick_wheel(_demo(), _lock_of(CP312, GLIBC_234, SDIST), supported_tags("3.11", PLATFORM),
                   index_url="https://user:hunter2-secret@pypi.example/simple")
    assert caught.value.step == "build"
    assert str(caught.value) == ("demo==1.0: none of the lock's 3 files on https://***@pypi.example/simple is a wheel "
                                 "for cp311 manylinux_2_28_x86_64 (sdists are never installed)")


def test_an_index_without_hashes_gives_the_best_wheel_of_the_locked_version_by_its_name() -> None:
    unhashed = [_dist(f, sha="") for f in DEMO_FILES]  # a static folder's page: no #sha256= on any link
    everything = _lock_of(*DEMO_FILES)
    assert pick_wheel(unhashed, everything, supported_tags("3.11", PLATFORM)).filename == CP311
    assert pick_wheel(list(reversed(unhashed)), everything, supported_tags("3.11", PLATFORM)).filename == CP311
    assert pick_wheel(unhashed, everything, supported_tags("3.12", PLATFORM)).filename == CP312
    assert pick_wheel(unhashed, _lock_of(OLDER, version="0.9"), supported_tags("3.11", PLATFORM)).filename == OLDER
    # the name decides, not the hash: the lock holding only the pure wheel's sha256 still gets the cp311 file,
    # whose download then fails the hash check (as pip's does)
    assert pick_wheel(unhashed, _lock_of(PURE), supported_tags("3.11", PLATFORM)).filename == CP311


def test_a_file_listed_with_the_lock_s_sha256_beats_one_listed_without_as_in_pip() -> None:
    tags = supported_tags("3.11", PLATFORM)
    files = [_dist(PURE), _dist(CP311, sha="")]
    assert pick_wheel(files, _lock_of(PURE, CP311), tags).filename == PURE
    # a file listed with a sha256 the lock does not hold is never taken, even with the better tag
    files = [_dist(CP311, sha="b" * 64), _dist(PURE, sha="")]
    assert pick_wheel(files, _lock_of(PURE, CP311), tags).filename == PURE
    with pytest.raises(BuildError):
        pick_wheel([_dist(CP311, sha="b" * 64)], _lock_of(CP311), tags)
    # an empty sha256 on the index (a JSON page's "sha256": "") is none
    empty = DistFile(filename=CP311, url=f"https://files.example/{CP311}", hashes={"sha256": ""})
    assert pick_wheel([empty], _lock_of(CP311), tags) == empty


def test_expected_sha256_is_the_listed_one_else_any_of_the_lock_s() -> None:
    lock = _lock_of(PURE, CP311)
    assert expected_sha256(_dist(CP311), lock) == (_sha(_file_bytes(CP311)),)
    assert expected_sha256(_dist(CP311, sha=""), lock) == lock.hashes


def test_no_fitting_wheel_on_an_index_without_hashes_names_the_files_it_lists() -> None:
    tags = supported_tags("3.11", PLATFORM)
    with pytest.raises(BuildError) as caught:
        pick_wheel([_dist(CP312, sha=""), _dist(SDIST, sha="")], _lock_of(CP312, SDIST), tags,
                   index_url="http://i/simple")
    assert str(caught.value) == ("demo==1.0: none of the 2 files of it on http://i/simple (listed without a sha256) is "
                                 "a wheel for cp311 manylinux_2_28_x86_64 (sdists are never installed)")
    with pytest.raises(BuildError) as caught:
        pick_wheel([_dist(CP312), _dist(SDIST, sha=""), _dist(OLDER, sha="")], _lock_of(CP312), tags)
    assert str(caught.value) == ("demo==1.0: none of the 2 files of it (1 listed without a sha256) is a wheel for "
                                 "cp311 manylinux_2_28_x86_64 (sdists are never installed)")


def test_files_listed_with_other_hashes_only_are_named_with_the_expected_ones() -> None:
    files = [_dist(PURE, sha="c" * 64), _dist(OLDER, sha="")]  # 0.9 without a hash is no file of 1.0
    lock = package("demo", "1.0", [f"{n:064x}" for n in range(1, 6)])
    with pytest.raises(BuildError) as caught:
        pick_wheel(files, lock, supported_tags("3.11", PLATFORM), index_url="http://i/simple")
    shown = " or ".join(sorted(lock.hashes)[:3])
    assert str(caught.value) == ("demo==1.0: none of the lock's 5 files is listed on http://i/simple: no file there "
                                 f"has the sha256 the lock names (expected sha256 {shown} (or 2 more of the lock's))")


def test_check_sha256_passes_a_digest_it_expects_and_names_both_otherwise() -> None:
    check_sha256("a" * 64, ("b" * 64, "a" * 64), "demo==1.0: demo.whl")
    with pytest.raises(BuildError) as caught:
        check_sha256("a" * 64, ("b" * 64,), "demo==1.0: demo.whl from http://i/files/demo.whl")
    assert caught.value.step == "build"
    assert str(caught.value) == (f"demo==1.0: demo.whl from http://i/files/demo.whl does not match the lock: expected "
                                 f"sha256 {'b' * 64}, got sha256 {'a' * 64}")


def test_a_hostile_file_name_is_never_picked() -> None:
    evil = DistFile(filename="../demo-1.0-py3-none-any.whl", url="https://x/evil", hashes={"sha256": "a" * 64})
    with pytest.raises(BuildError):
        pick_wheel([evil], package("demo", "1.0", ["a" * 64]), supported_tags("3.11", PLATFORM))


# --- fetch_wheels -------------------------------------------------------------------------------


def _fetch(index: Index, packages: list[LockedPackage], cache: Path, lines: list[str] | None = None,
           url: str | None = None, **options) -> dict[str, Path]:
    return fetch_wheels(packages, url or index.url, "3.11", PLATFORM, cache,
                        on_line=(lines.append if lines is not None else lambda line: None), **options)


def test_download_then_the_cache_answers_without_downloading(index: Index, tmp_path: Path) -> None:
    index.add("demo", DEMO_FILES, padding=2_500_000)  # over two MiB: the per-MiB deadline is renewed on the way
    cache = tmp_path / "cache"
    lines: list[str] = []
    got = _fetch(index, [_locked(index, "demo", DEMO_FILES)], cache, lines)
    assert got == {"demo": cache / index.sha(CP311) / CP311}
    assert got["demo"].read_bytes() == index.files[CP311]
    assert index.downloads() == [CP311] and len(index.listings()) == 1
    size = len(index.files[CP311])
    assert lines[0] == f"downloading {CP311} ({size / 1e6:.1f} MB)"
    assert lines[1].startswith(f"wheels: 1 file, {size / 1e6:.1f} MB downloaded in ")
    assert lines[1].endswith(" s, 0 B from the cache") and len(lines) == 2
    lines.clear()
    assert _fetch(index, [_locked(index, "demo", DEMO_FILES)], cache, lines) == got
    assert index.downloads() == [CP311] and len(index.listings()) == 2  # listed again, downloaded once
    assert len(lines) == 1 and lines[0].startswith("wheels: 1 file, 0 B downloaded in ")
    assert lines[0].endswith(f" s, {size / 1e6:.1f} MB from the cache")
    assert _leftovers(cache) == [f"{index.sha(CP311)}/{CP311}"]


def test_a_json_index_works_as_well(index: Index, tmp_path: Path) -> None:
    index.add("json-demo", ["json_demo-1.0-py3-none-any.whl"])
    got = _fetch(index, [_locked(index, "json-demo", ["json_demo-1.0-py3-none-any.whl"])], tmp_path)
    assert got["json-demo"].read_bytes() == index.files["json_demo-1.0-py3-none-any.whl"]


def test_a_corrupted_cached_file_is_downloaded_again(index: Index, tmp_path: Path) -> None:
    index.add("demo", [PURE])
    place = tmp_path / index.sha(PURE) / PURE
    place.parent.mkdir(parents=True)
    place.write_bytes(b"truncated")
    lines: list[str] = []
    got = _fetch(index, [_locked(index, "demo", [PURE])], tmp_path, lines)
    assert got["demo"] == place and place.read_bytes() == index.files[PURE]
    assert index.downloads() == [PURE] and lines[0].startswith(f"downloading {PURE} (")
    assert _leftovers(tmp_path) == [f"{index.sha(PURE)}/{PURE}"]


def test_wrong_bytes_fail_with_both_digests_and_leave_no_file(index: Index, tmp_path: Path) -> None:
    index.add("demo", [PURE])
    index.lies[PURE] = b"not the wheel the lock hashes"
    with pytest.raises(BuildError) as caught:
        _fetch(index, [_locked(index, "demo", [PURE])], tmp_path,
               url=index.url.replace("http://", "http://builder:s3cret-token@"))
    message = str(caught.value)
    assert caught.value.step == "build" and "\n" not in message
    assert _sha(index.lies[PURE]) in message and index.sha(PURE) in message
    assert f"/files/{PURE}" in message and "s3cret-token" not in message and "builder" not in message
    assert _leftovers(tmp_path) == []


def test_an_index_without_hashes_serves_the_lock_s_file_checked_on_the_stream(index: Index, tmp_path: Path) -> None:
    index.add("demo", DEMO_FILES, padding=2_500_000)
    index.unhashed.update(DEMO_FILES)  # python -m http.server over a folder: no link carries a sha256
    cache, lines = tmp_path / "cache", list[str]()
    got = _fetch(index, [_locked(index, "demo", DEMO_FILES)], cache, lines)
    assert got == {"demo": cache / index.sha(CP311) / CP311}  # picked by its name, filed under its own sha256
    assert got["demo"].read_bytes() == index.files[CP311] and index.downloads() == [CP311]
    assert lines[0].startswith(f"downloading {CP311} (")
    lines.clear()
    assert _fetch(index, [_locked(index, "demo", DEMO_FILES)], cache, lines) == got  # the cache answers
    assert index.downloads() == [CP311] and lines[0].startswith("wheels: 1 file, 0 B downloaded in ")
    assert _leftovers(cache) == [f"{index.sha(CP311)}/{CP311}"]
    index.add("json-demo", ["json_demo-1.0-py3-none-any.whl"])
    index.unhashed.add("json_demo-1.0-py3-none-any.whl")
    got = _fetch(index, [_locked(index, "json-demo", ["json_demo-1.0-py3-none-any.whl"])], cache)
    assert got["json-demo"].read_bytes() == index.files["json_demo-1.0-py3-none-any.whl"]


def test_an_unhashed_file_whose_bytes_are_not_the_lock_s_is_one_line_and_never_kept(index: Index,
                                                                                      tmp_path: Path) -> None:
    index.add("demo", [PURE, CP311])
    index.unhashed.update([PURE, CP311])
    index.lies[CP311] = b"a rebuilt wheel under the same name"
    lock = _locked(index, "demo", [PURE, CP311])
    with pytest.raises(BuildError) as caught:
        _fetch(index, [lock], tmp_path, url=index.url.replace("http://", "http://builder:s3cret-token@"))
    expected = " or ".join(sorted(lock.hashes))
    base = index.url.removesuffix("/simple")
    assert caught.value.step == "build"
    assert str(caught.value) == (f"demo==1.0: {CP311} from {base.replace('http://', 'http://***@')}/files/{CP311} "
                                 f"does not match the lock: expected sha256 {expected}, got sha256 "
                                 f"{_sha(index.lies[CP311])}")
    assert _leftovers(tmp_path) == []  # the bytes were hashed as they came and thrown away: no layer can take them
    # the lock holding only the pure wheel's hash: the cp311 file is still the one picked (by its name), and refused
    del index.lies[CP311]
    with pytest.raises(BuildError, match=f"^demo==1.0: {CP311} from .* expected sha256 {index.sha(PURE)}, got "
                                         f"sha256 {index.sha(CP311)}$"):
        _fetch(index, [_locked(index, "demo", [PURE])], tmp_path)
    assert _leftovers(tmp_path) == []


def test_a_file_the_index_does_not_serve_is_one_index_error_line(index: Index, tmp_path: Path) -> None:
    index.add("demo", [PURE])
    index.missing.add(PURE)
    with pytest.raises(PackageIndexError) as caught:
        _fetch(index, [_locked(index, "demo", [PURE])], tmp_path,
               url=index.url.replace("http://", "http://builder:s3cret-token@"))
    message = str(caught.value)
    assert "HTTP 404" in message and PURE in message and "\n" not in message and "s3cret-token" not in message
    assert _leftovers(tmp_path) == []


def test_an_unreachable_index_is_one_index_error_line(tmp_path: Path) -> None:
    with pytest.raises(PackageIndexError, match="^http://127.0.0.1:9/simple/demo/: cannot reach the index"):
        fetch_wheels([package("demo", "1.0", ["a" * 64])], "http://127.0.0.1:9/simple", "3.11", PLATFORM, tmp_path,
                     settings=IndexSettings(retry=RetryPolicy(attempts=1), deadline_s=5.0))


def test_several_packages_and_one_failing(index: Index, tmp_path: Path) -> None:
    names = {f"p{n}": f"p{n}-1.0-py3-none-any.whl" for n in range(5)}
    for name, filename in names.items():
        index.add(name, [filename])
    packages = [_locked(index, name, [filename]) for name, filename in names.items()]
    lines: list[str] = []
    got = _fetch(index, packages, tmp_path, lines, jobs=3)
    assert list(got) == list(names) and all(got[n].read_bytes() == index.files[f] for n, f in names.items())
    assert sorted(index.downloads()) == sorted(names.values())
    assert lines[-1].startswith("wheels: 5 files, ")
    index.add("sdist-only", ["sdist_only-1.0.tar.gz"])
    with pytest.raises(BuildError, match=r"^sdist-only==1\.0: none of the lock's 1 file on .* is a wheel for cp311"):
        _fetch(index, [*packages, _locked(index, "sdist-only", ["sdist_only-1.0.tar.gz"])], tmp_path, jobs=2)


def test_two_fetches_at_once_into_one_cache_both_succeed(index: Index, tmp_path: Path) -> None:
    index.add("demo", DEMO_FILES, padding=300_000)
    index.barrier = threading.Barrier(2, timeout=10)  # both downloads are in flight at once,
    index.pause_s = 0.01  # and their bodies come in pieces, interleaved
    results: list[dict[str, Path]] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            results.append(_fetch(index, [_locked(index, "demo", DEMO_FILES)], tmp_path))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [] and len(results) == 2 and results[0] == results[1]
    assert index.downloads() == [CP311, CP311]
    assert results[0]["demo"].read_bytes() == index.files[CP311]
    assert _leftovers(tmp_path) == [f"{index.sha(CP311)}/{CP311}"]


def test_bad_options_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="jobs must be at least 1"):
        fetch_wheels([], "http://127.0.0.1:9/simple", "3.11", PLATFORM, tmp_path, jobs=0)
    with pytest.raises(InputError, match="CA bundle .*: no such file"):
        fetch_wheels([], "http://127.0.0.1:9/simple", "3.11", PLATFORM, tmp_path, ca_bundle=tmp_path / "none.pem")
    with pytest.raises(InputError, match="pinned twice"):
        fetch_wheels([package("demo", "1.0", []), package("Demo", "2.0", [])], "http://127.0.0.1:9/simple", "3.11",
                     PLATFORM, tmp_path)


def test_https_trusts_the_ca_bundle_and_only_it(tmp_path: Path, monkeypatch) -> None:
    cert, key = _self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    with _serving(tls) as index:
        index.add("demo", [PURE])
        pinned = [_locked(index, "demo", [PURE])]
        with pytest.raises(PackageIndexError, match="cannot reach the index: SSLError"):
            _fetch(index, pinned, tmp_path / "cache", settings=IndexSettings(retry=RetryPolicy(attempts=1)))
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "elsewhere.pem"))  # the configured bundle wins
        with pytest.raises(PackageIndexError, match="^https://127.0.0.1:[0-9]+/simple: request failed: .*elsewhere"):
            _fetch(index, pinned, tmp_path / "cache")  # without one, requests' error for the missing file: one line
        got = _fetch(index, pinned, tmp_path / "cache", ca_bundle=cert)
        assert got["demo"].read_bytes() == index.files[PURE]


def test_a_cache_that_cannot_be_written_is_one_build_line(index: Index, tmp_path: Path) -> None:
    index.add("demo", [PURE])
    (tmp_path / "cache").write_text("a file, not a folder")
    with pytest.raises(BuildError, match=f"^wheel cache {tmp_path / 'cache'}"):
        _fetch(index, [_locked(index, "demo", [PURE])], tmp_path / "cache")


def test_a_download_longer_than_the_index_deadline_is_fine_while_each_mib_keeps_coming(index: Index,
                                                                                        tmp_path: Path) -> None:
    index.add("demo", [PURE], padding=5_000_000)
    index.pause_s = 0.02  # 64 kB pieces: about 0.35 s a MiB, 1.6 s in all
    started = time.monotonic()
    got = _fetch(index, [_locked(index, "demo", [PURE])], tmp_path, settings=IndexSettings(deadline_s=1.0))
    assert time.monotonic() - started > 1.0  # longer than the deadline of one index request
    assert got["demo"].read_bytes() == index.files[PURE]


def test_a_download_whose_mib_takes_longer_than_the_deadline_fails_naming_it(index: Index, tmp_path: Path) -> None:
    index.add("demo", [PURE], padding=2_000_000)
    index.pause_s = 0.1  # a MiB in 1.6 s
    started = time.monotonic()
    with pytest.raises(PackageIndexError) as caught:
        _fetch(index, [_locked(index, "demo", [PURE])], tmp_path,
               settings=IndexSettings(deadline_s=0.3, retry=RetryPolicy(attempts=1)))
    assert time.monotonic() - started < 3
    assert str(caught.value) == (f"{index.url.removesuffix('/simple')}/files/{PURE}: no complete answer within 0.3 s "
                                 "(less than 1 MiB of the file came in that time); [pip] timeout sets how long to wait")
    assert _leftovers(tmp_path) == []


def _fetch_in_thread(index: Index, packages: list[LockedPackage], cache: Path, stop: Stop,
                     **options) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            _fetch(index, packages, cache, stop=stop, **options)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, raised


def _wait_for_downloads(index: Index, count: int) -> None:
    for _ in range(600):
        if len(index.downloads()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {count} downloads started: {index.requests}")


def test_a_stop_set_elsewhere_ends_the_downloads_in_flight_and_leaves_no_partial_file(index: Index,
                                                                                      tmp_path: Path) -> None:
    names = {f"p{n}": f"p{n}-1.0-py3-none-any.whl" for n in range(3)}
    for name, filename in names.items():
        index.add(name, [filename], padding=3_000_000)
    index.pause_s = 0.5  # 64 kB pieces: some 25 s a file
    stop = Stop()
    thread, raised = _fetch_in_thread(index, [_locked(index, n, [f]) for n, f in names.items()], tmp_path / "c", stop)
    _wait_for_downloads(index, 3)
    stop.set(BuildError("the system image's build failed"))
    thread.join(60)  # generous: each download stops before its next piece
    assert not thread.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], Stopped), raised
    assert "the system image's build failed" in str(raised[0])
    assert _leftovers(tmp_path / "c") == []  # the partial files are gone


def test_a_stop_ends_a_download_waiting_on_a_stalled_index_at_once(index: Index, tmp_path: Path) -> None:
    index.add("demo", [PURE], padding=200_000)
    index.pause_s = 600  # the first piece, then nothing for ten minutes
    stop = Stop()
    thread, raised = _fetch_in_thread(index, [_locked(index, "demo", [PURE])], tmp_path / "c", stop,
                                      settings=IndexSettings(timeout=600.0, deadline_s=600.0))
    _wait_for_downloads(index, 1)
    time.sleep(0.5)  # the client is in its socket read now
    stop.set()
    thread.join(60)  # the stall allows 600 s: only the stop shutting the connection down ends it sooner
    assert not thread.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], Stopped), raised
    assert _leftovers(tmp_path / "c") == []


def test_a_failing_download_stops_the_others_and_is_the_error_raised(index: Index, tmp_path: Path) -> None:
    index.add("slow", ["slow-1.0-py3-none-any.whl"], padding=3_000_000)
    index.add("gone", ["gone-1.0-py3-none-any.whl"])
    index.missing.add("gone-1.0-py3-none-any.whl")
    index.pause_s = 0.5
    stop = Stop()
    packages = [_locked(index, "slow", ["slow-1.0-py3-none-any.whl"]),
                _locked(index, "gone", ["gone-1.0-py3-none-any.whl"])]
    with pytest.raises(PackageIndexError, match="gone-1.0-py3-none-any.whl"):
        _fetch(index, packages, tmp_path / "c", stop=stop, settings=IndexSettings(retry=RetryPolicy(attempts=1)))
    assert stop.is_set() and isinstance(stop.error, PackageIndexError)  # the build's other workers see it too
    assert _leftovers(tmp_path / "c") == []
