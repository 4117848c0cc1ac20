"""The stand-in wheels and package index of the integration tests (tests/integration/support/wheels.py), without
Docker: the index behaves like a real one (PEP 503 HTML, PEP 691 JSON, PEP 658/714 metadata, PEP 700 upload
times, PEP 592 yanking, HEAD and Range), so ``uv pip compile`` locks a stand-in profile from it reading metadata
only, and ``--exclude-newer`` sees upload times; the stand-ins declare the dependency tree of the real wheels.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.integration.support.wheels import (
    HTML_PAGE_TYPE,
    JSON_PAGE_TYPE,
    STANDIN_DEPENDENCIES,
    IndexServer,
    choose_page_type,
    make_standin_dependency_wheels,
    make_standin_framework_wheels,
    make_wheel,
    serve_simple_index,
    start_simple_index,
    upload_time_text,
    wheel_filename,
    wheel_metadata,
)

UTC = timezone.utc
T0 = datetime(2024, 6, 5, 16, 25, 38, 123456, tzinfo=UTC)  # the stand-ins' upload time
PINS = {"torch": "2.3.1", "triton": "2.3.1", "nvidia-nccl-cu12": "2.20.5"}
FACTS = {"cuda": "12.1", "cudnn": None, "nccl": "2.20.5"}
TORCH_CLOSURE = {"torch", "triton", "nvidia-nccl-cu12", "filelock", "typing-extensions", "sympy", "mpmath",
                 "networkx", "jinja2", "markupsafe", "fsspec"}
UV_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
PIP_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
TORCH_WHEEL = wheel_filename("torch", "2.3.1")


# --------------------------------------------------------------------------------------------- helpers


def fetch(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of one request (an error status is an answer too)."""
    request = urllib.request.Request(url, method=method, headers={k.replace("_", "-"): v for k, v in headers.items()})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers.items()), answer.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers.items()), exc.read()


def root_of(server: IndexServer) -> str:
    """``http://127.0.0.1:<port>`` of an index (its url ends in ``/simple``)."""
    return server.url.removesuffix("/simple")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def project_json(server: IndexServer, project: str) -> dict:
    status, headers, body = fetch(f"{server.url}/{project}/", Accept=UV_ACCEPT)
    assert status == 200 and headers["Content-Type"] == JSON_PAGE_TYPE
    return json.loads(body)


def json_file(server: IndexServer, project: str, filename: str) -> dict:
    return next(f for f in project_json(server, project)["files"] if f["filename"] == filename)


@pytest.fixture
def wheels(tmp_path) -> Path:
    """The stand-ins of PINS plus torchvision and every stand-in dependency, all uploaded at T0."""
    wheel_dir = tmp_path / "wheels"
    make_standin_framework_wheels(wheel_dir, {**PINS, "torchvision": "0.18.1"}, FACTS, upload_time=T0,
                                  dependencies=False)
    make_standin_dependency_wheels(wheel_dir, upload_time=T0)
    return wheel_dir


@pytest.fixture
def index(wheels) -> Iterator[IndexServer]:
    with start_simple_index(wheels) as server:
        yield server


# --------------------------------------------------------------------------------------------- pages


def test_html_project_page_links_hashes_and_metadata(index, wheels):
    status, headers, body = fetch(f"{index.url}/torch/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Vary"] == "Accept"
    page = body.decode()
    assert '<meta name="pypi:repository-version" content="1.1">' in page
    wheel = wheels / TORCH_WHEEL
    metadata_sha = sha256(wheel_metadata(wheel))
    anchor = re.search(r"<a [^>]*>torch-2\.3\.1-py3-none-any\.whl</a>", page).group(0)
    assert f'href="/files/{TORCH_WHEEL}#sha256={sha256(wheel.read_bytes())}"' in anchor
    assert f'data-dist-info-metadata="sha256={metadata_sha}"' in anchor
    assert f'data-core-metadata="sha256={metadata_sha}"' in anchor
    assert "data-yanked" not in anchor


def test_html_root_page_lists_every_project(index):
    status, _, body = fetch(f"{index.url}/")
    assert status == 200
    projects = re.findall(r'<a href="/simple/([^/"]+)/">', body.decode())
    assert projects == sorted({"torchvision", *TORCH_CLOSURE, *STANDIN_DEPENDENCIES})


def test_json_project_page(index, wheels):
    page = project_json(index, "numpy")
    assert page["meta"] == {"api-version": "1.1"} and page["name"] == "numpy" and page["versions"] == ["1.26.4"]
    wheel = wheels / wheel_filename("numpy", "1.26.4")
    metadata_sha = sha256(wheel_metadata(wheel))
    assert page["files"] == [{
        "filename": wheel.name,
        "url": f"/files/{wheel.name}",
        "hashes": {"sha256": sha256(wheel.read_bytes())},
        "size": wheel.stat().st_size,
        "upload-time": "2024-06-05T16:25:38.123456Z",
        "yanked": False,
        "core-metadata": {"sha256": metadata_sha},
        "data-dist-info-metadata": {"sha256": metadata_sha},
    }]


def test_json_lists_versions_in_pep440_order(index, wheels):
    make_standin_dependency_wheels(wheels, overrides={"numpy": "10.0.0"})
    make_standin_dependency_wheels(wheels, overrides={"numpy": "2.0.0rc1"})
    assert project_json(index, "NumPy")["versions"] == ["1.26.4", "2.0.0rc1", "10.0.0"]


def test_json_root_page(index):
    status, headers, body = fetch(f"{index.url}/", Accept=PIP_ACCEPT)
    assert status == 200 and headers["Content-Type"] == JSON_PAGE_TYPE
    page = json.loads(body)
    assert page["meta"] == {"api-version": "1.1"}
    assert {p["name"] for p in page["projects"]} == {"torchvision", *TORCH_CLOSURE, *STANDIN_DEPENDENCIES}


@pytest.mark.parametrize(("accept", "expected"), [
    (None, "text/html"),
    ("", "text/html"),
    ("*/*", "text/html"),
    ("text/html", "text/html"),
    (JSON_PAGE_TYPE, JSON_PAGE_TYPE),
    ("application/vnd.pypi.simple.latest+json", JSON_PAGE_TYPE),
    (UV_ACCEPT, JSON_PAGE_TYPE),
    (PIP_ACCEPT, JSON_PAGE_TYPE),
    (f"text/html, {JSON_PAGE_TYPE}", JSON_PAGE_TYPE),  # equal: JSON
    (f"{JSON_PAGE_TYPE};q=0.5, text/html", "text/html"),  # HTML preferred
    (f"{JSON_PAGE_TYPE}; q=0, */*", "text/html"),  # JSON refused
    (f"{JSON_PAGE_TYPE};q=0.9, */*;q=0.1", JSON_PAGE_TYPE),
    (HTML_PAGE_TYPE, HTML_PAGE_TYPE),
    ("image/png", "text/html"),  # nothing acceptable: HTML anyway
])
def test_page_type_follows_accept(accept, expected):
    assert choose_page_type(accept) == expected


def test_page_in_the_html_type_the_client_named(index):
    status, headers, _ = fetch(f"{index.url}/torch/", Accept=HTML_PAGE_TYPE)
    assert status == 200 and headers["Content-Type"] == f"{HTML_PAGE_TYPE}; charset=utf-8"


def test_unknown_paths_are_404(index):
    for path in ("/simple/no-such-project/", "/files/no_such-1.0-py3-none-any.whl", "/files/x.metadata", "/other"):
        assert fetch(root_of(index) + path)[0] == 404, path
        assert fetch(root_of(index) + path, method="HEAD")[0] == 404, path


# --------------------------------------------------------------------------------------------- upload time


def test_upload_time_is_the_wheel_mtime(tmp_path):
    naive = make_wheel(tmp_path, "naive", "1.0", {"naive/__init__.py": ""}, upload_time=datetime(2024, 1, 2, 3, 4, 5))
    other_zone = timezone(timedelta(hours=2))
    aware = make_wheel(tmp_path, "aware", "1.0", {"aware/__init__.py": ""},
                       upload_time=datetime(2024, 1, 2, 5, 4, 5, 7, tzinfo=other_zone))
    before = datetime.now(UTC).timestamp()
    plain = make_wheel(tmp_path, "plain", "1.0", {"plain/__init__.py": ""})
    assert naive.stat().st_mtime_ns == int(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()) * 10**9
    assert upload_time_text(aware.stat().st_mtime_ns) == "2024-01-02T03:04:05.000007Z"
    assert plain.stat().st_mtime >= before - 2  # left as written
    with start_simple_index(tmp_path) as server:
        assert json_file(server, "naive", naive.name)["upload-time"] == "2024-01-02T03:04:05.000000Z"
        assert json_file(server, "aware", aware.name)["upload-time"] == "2024-01-02T03:04:05.000007Z"


def test_upload_time_does_not_change_the_bytes(tmp_path):
    first = make_wheel(tmp_path / "a", "same", "1.0", {"same/__init__.py": "x = 1\n"}, ["dep>=1"], upload_time=T0)
    second = make_wheel(tmp_path / "b", "same", "1.0", {"same/__init__.py": "x = 1\n"}, ["dep>=1"])
    assert first.read_bytes() == second.read_bytes()
    assert not [p for p in (tmp_path / "a").iterdir() if p.name != first.name]  # no scratch file left behind


# --------------------------------------------------------------------------------------------- yanked


def test_yanked_sidecar(index, wheels):
    wheel = wheels / wheel_filename("numpy", "1.26.4")
    sidecar = wheel.with_name(wheel.name + ".yanked")

    def html_anchor() -> str:
        page = fetch(f"{index.url}/numpy/")[2].decode()
        return re.search(r"<a [^>]*>numpy-1\.26\.4-py3-none-any\.whl</a>", page).group(0)

    sidecar.write_text("  broken <build> & more\n")
    assert json_file(index, "numpy", wheel.name)["yanked"] == "broken <build> & more"
    assert 'data-yanked="broken &lt;build&gt; &amp; more"' in html_anchor()
    sidecar.write_text("\n")
    assert json_file(index, "numpy", wheel.name)["yanked"] is True
    assert 'data-yanked=""' in html_anchor()
    sidecar.unlink()
    assert json_file(index, "numpy", wheel.name)["yanked"] is False
    assert "data-yanked" not in html_anchor()
    assert ".yanked" not in fetch(f"{index.url}/")[2].decode()  # a sidecar is not a wheel


# --------------------------------------------------------------------------------------------- HEAD, Range


@pytest.mark.parametrize("path", ["/simple/", "/simple/torch/", f"/files/{TORCH_WHEEL}",
                                  f"/files/{TORCH_WHEEL}.metadata"])
def test_head_sends_the_headers_of_get_without_a_body(index, path):
    for accept in (None, UV_ACCEPT):
        extra = {"Accept": accept} if accept else {}
        got_status, got_headers, got_body = fetch(root_of(index) + path, **extra)
        status, headers, body = fetch(root_of(index) + path, method="HEAD", **extra)
        assert (status, body) == (got_status, b"") and got_status == 200
        assert headers["Content-Length"] == got_headers["Content-Length"] == str(len(got_body))
        assert headers["Content-Type"] == got_headers["Content-Type"]
    assert index.full_downloads() == ({TORCH_WHEEL: 2} if path.endswith(".whl") else {})


def test_file_headers(index, wheels):
    status, headers, _ = fetch(f"{root_of(index)}/files/{TORCH_WHEEL}", method="HEAD")
    assert status == 200 and headers["Accept-Ranges"] == "bytes"
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["ETag"] == f'"{sha256((wheels / TORCH_WHEEL).read_bytes())}"'
    assert headers["Last-Modified"] == "Wed, 05 Jun 2024 16:25:38 GMT"


def test_range_requests(index, wheels):
    url = f"{root_of(index)}/files/{TORCH_WHEEL}"
    data = (wheels / TORCH_WHEEL).read_bytes()
    size = len(data)
    for header, first, last in (("bytes=0-9", 0, 9), ("bytes=-10", size - 10, size - 1),
                                ("bytes=100-", 100, size - 1), (f"bytes=5-{size + 50}", 5, size - 1),
                                (f"bytes=-{size + 50}", 0, size - 1), (" bytes = 3 - 4 ", 3, 4)):
        status, headers, body = fetch(url, Range=header)
        assert status == 206, header
        assert headers["Content-Range"] == f"bytes {first}-{last}/{size}", header
        assert body == data[first:last + 1] and headers["Content-Length"] == str(last + 1 - first), header
        head_status, head_headers, head_body = fetch(url, method="HEAD", Range=header)
        assert (head_status, head_body, head_headers["Content-Range"]) == (206, b"", headers["Content-Range"])
    for header in (f"bytes={size}-", f"bytes={size + 1}-{size + 9}", "bytes=-0"):
        status, headers, body = fetch(url, Range=header)
        assert (status, headers["Content-Range"], body) == (416, f"bytes */{size}", b""), header
    for header in ("bytes=0-1,5-6", "bytes=9-3", "items=0-1", "bytes=-"):  # ignored: the whole file
        status, headers, body = fetch(url, Range=header)
        assert (status, body) == (200, data) and "Content-Range" not in headers, header


def test_range_on_metadata(index, wheels):
    metadata = wheel_metadata(wheels / TORCH_WHEEL)
    status, headers, body = fetch(f"{root_of(index)}/files/{TORCH_WHEEL}.metadata", Range="bytes=0-15")
    assert (status, body) == (206, metadata[:16])
    assert headers["Content-Range"] == f"bytes 0-15/{len(metadata)}"


# --------------------------------------------------------------------------------------------- metadata


@pytest.mark.parametrize("project, filename", [("torch", TORCH_WHEEL), ("jinja2", wheel_filename("jinja2", "3.1.4"))])
def test_metadata_file_is_the_wheels_metadata(index, wheels, project, filename):
    with zipfile.ZipFile(wheels / filename) as archive:
        expected = archive.read(f"{filename.split('-')[0]}-{filename.split('-')[1]}.dist-info/METADATA")
    status, headers, body = fetch(f"{root_of(index)}/files/{filename}.metadata")
    assert (status, body) == (200, expected)
    assert json_file(index, project, filename)["core-metadata"] == {"sha256": sha256(body)}
    assert f'data-core-metadata="sha256={sha256(body)}"' in fetch(f"{index.url}/{project}/")[2].decode()
    assert index.full_downloads() == {}


def test_a_wheel_without_metadata_advertises_none(tmp_path):
    bad = tmp_path / "broken-1.0-py3-none-any.whl"
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("broken/__init__.py", "")
    with start_simple_index(tmp_path) as server:
        entry = json_file(server, "broken", bad.name)
        assert entry["core-metadata"] is False and entry["data-dist-info-metadata"] is False
        assert "data-core-metadata" not in fetch(f"{server.url}/broken/")[2].decode()
        assert fetch(f"{root_of(server)}/files/{bad.name}.metadata")[0] == 404
        assert fetch(f"{root_of(server)}/files/{bad.name}")[0] == 200


# --------------------------------------------------------------------------------------------- the server


def test_full_downloads_counts_whole_wheels_only(index, wheels):
    url = f"{root_of(index)}/files/{TORCH_WHEEL}"
    size = (wheels / TORCH_WHEEL).stat().st_size
    fetch(url, method="HEAD")
    fetch(url, Range="bytes=0-99")
    fetch(url, Range="bytes=-22")
    fetch(url + ".metadata")
    fetch(f"{index.url}/torch/")
    assert index.full_downloads() == {}
    fetch(url)
    fetch(url, Range=f"bytes=0-{size - 1}")  # a range that spans the file is a whole download too
    fetch(f"{root_of(index)}/files/{wheel_filename('numpy', '1.26.4')}")
    assert index.full_downloads() == {TORCH_WHEEL: 2, wheel_filename("numpy", "1.26.4"): 1}
    log = index.requests()
    assert [(r.method, r.status) for r in log][:3] == [("HEAD", 200), ("GET", 206), ("GET", 206)]
    assert log[1].range == "bytes=0-99" and log[1].sent == 100 and log[0].sent == 0


def test_rescans_and_rehashes(tmp_path):
    first, extra = tmp_path / "first", tmp_path / "extra"
    with start_simple_index(first, [extra]) as server:
        assert fetch(f"{server.url}/late/")[0] == 404
        make_wheel(extra, "late", "1.0", {"late/__init__.py": "a = 1\n"}, upload_time=T0)
        old_sha = json_file(server, "late", "late-1.0-py3-none-any.whl")["hashes"]["sha256"]
        shadow = make_wheel(first, "late", "1.0", {"late/__init__.py": "a = 2\n"}, upload_time=T0)  # first wins
        entry = json_file(server, "late", shadow.name)
        assert entry["hashes"]["sha256"] == sha256(shadow.read_bytes()) != old_sha
        # the same path, size and mtime, other bytes: still hashed afresh
        rewritten = make_wheel(first, "late", "1.0", {"late/__init__.py": "a = 3\n"}, upload_time=T0)
        assert rewritten.stat().st_size == shadow.stat().st_size
        entry = json_file(server, "late", shadow.name)
        assert entry["hashes"]["sha256"] == sha256(rewritten.read_bytes())
        assert fetch(f"{root_of(server)}/files/{shadow.name}.metadata")[2] == wheel_metadata(rewritten)


def test_serve_simple_index_keeps_its_tuple(wheels):
    url, stop = serve_simple_index(wheels)
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/simple", url)
    assert fetch(f"{url}/torch/")[0] == 200
    stop()
    stop()  # idempotent
    port = int(url.split(":")[2].split("/")[0])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_stop_cuts_keep_alive_connections(wheels):
    server = start_simple_index(wheels)
    port = int(server.url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /simple/ HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(12).startswith(b"HTTP/1.")
        server.stop()
        conn.settimeout(10)
        received = b""
        while chunk := conn.recv(65536):  # the rest of the answer, then EOF rather than a hang
            received += chunk
    assert server.full_downloads() == {}


# --------------------------------------------------------------------------------------------- wheels


def test_payload(tmp_path):
    size = 3 * (1 << 20) + 123
    wheel = make_wheel(tmp_path / "a", "nvidia-cudnn-cu12", "8.9.2.26",
                       {"nvidia/cudnn/__init__.py": "", "nvidia/cudnn/lib/x.py": ""}, payload_bytes=size)
    again = make_wheel(tmp_path / "b", "nvidia-cudnn-cu12", "8.9.2.26",
                       {"nvidia/cudnn/__init__.py": "", "nvidia/cudnn/lib/x.py": ""}, payload_bytes=size)
    other = make_wheel(tmp_path / "c", "nvidia-cudnn-cu12", "8.9.2.27", {"nvidia/cudnn/__init__.py": ""},
                       payload_bytes=4096)
    assert wheel.read_bytes() == again.read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("nvidia/cudnn/_payload.bin")
        payload = archive.read(info)
        record = archive.read("nvidia_cudnn_cu12-8.9.2.26.dist-info/RECORD").decode()
        assert archive.testzip() is None
    assert info.compress_type == zipfile.ZIP_STORED and len(payload) == size
    assert len(zlib.compress(payload[: 1 << 20], 9)) > (1 << 20) * 0.99  # incompressible
    assert wheel.stat().st_size > size
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    assert f"nvidia/cudnn/_payload.bin,sha256={digest},{size}" in record.splitlines()
    with zipfile.ZipFile(other) as archive:
        assert archive.read("nvidia/cudnn/_payload.bin") != payload[:4096]
    torch = make_wheel(tmp_path / "d", "torch", "1.0", {"torch/__init__.py": "", "torch/a/b.py": ""}, payload_bytes=1)
    bare = make_wheel(tmp_path / "d", "bare", "1.0", {"bare.py": ""}, payload_bytes=1)
    assert "torch/_payload.bin" in zipfile.ZipFile(torch).namelist()
    assert "bare/_payload.bin" in zipfile.ZipFile(bare).namelist()
    with pytest.raises(ValueError):
        make_wheel(tmp_path, "x", "1.0", {"x/_payload.bin": ""}, payload_bytes=1)
    with pytest.raises(ValueError):
        make_wheel(tmp_path, "x", "1.0", {"x/__init__.py": ""}, payload_bytes=-1)


def test_a_kept_payload_is_the_same_in_every_release_and_the_other_is_not(tmp_path):
    wheels = [make_wheel(tmp_path / v, "torch", v, {"torch/__init__.py": ""}, payload_bytes=5000,
                         kept_payload_bytes=7000) for v in ("1.0", "1.1")]
    members = [{i.filename: (i.CRC, i.compress_size) for i in zipfile.ZipFile(w).infolist()} for w in wheels]
    assert members[0]["torch/_kept.bin"] == members[1]["torch/_kept.bin"] and members[0]["torch/_kept.bin"][1] == 7000
    assert members[0]["torch/_payload.bin"] != members[1]["torch/_payload.bin"]
    with pytest.raises(ValueError):
        make_wheel(tmp_path, "x", "1.0", {"x/_kept.bin": ""}, kept_payload_bytes=1)


def test_a_payload_wheel_installs_and_its_record_checks_out(tmp_path):
    wheel = make_wheel(tmp_path, "heavy", "1.0", {"heavy/__init__.py": "__version__ = '1.0'\n"},
                       payload_bytes=200_000)
    with zipfile.ZipFile(wheel) as archive:
        for line in archive.read("heavy-1.0.dist-info/RECORD").decode().splitlines():
            path, digest, size = line.split(",")
            if digest:
                data = archive.read(path)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert (digest, int(size)) == (f"sha256={expected}", len(data)), path


def metadata_of(path: Path) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for line in wheel_metadata(path).decode().splitlines():
        key, _, value = line.partition(": ")
        fields.setdefault(key, []).append(value)
    return fields


def test_framework_stand_ins_declare_the_real_requirements(tmp_path):
    pins = {**PINS, "torchvision": "0.18.1", "torchaudio": "2.3.1", "nvidia-cudnn-cu12": "8.9.2.26"}
    paths = make_standin_framework_wheels(tmp_path, {**pins, "torch": "2.3.1+cu121"}, FACTS)
    assert [p.name for p in paths] == sorted(p.name for p in paths) and len(paths) == len(pins)
    requires = {p.name.split("-")[0]: metadata_of(p).get("Requires-Dist", []) for p in paths}
    assert requires["torch"] == ["filelock", "typing-extensions>=4.8.0", "sympy", "networkx", "jinja2", "fsspec",
                                 "nvidia-cudnn-cu12==8.9.2.26", "nvidia-nccl-cu12==2.20.5", "triton==2.3.1"]
    assert requires["torchvision"] == ["numpy", "torch==2.3.1", "pillow!=8.3.*,>=5.3.0"]
    assert requires["torchaudio"] == ["torch==2.3.1"]
    assert requires["triton"] == ["filelock"]
    assert requires["nvidia_nccl_cu12"] == []


def test_framework_stand_ins_bring_the_dependencies_they_need(tmp_path):
    make_standin_framework_wheels(tmp_path / "torch", PINS, FACTS)
    written = {p.name.split("-")[0].replace("_", "-") for p in (tmp_path / "torch").glob("*.whl")}
    assert written == TORCH_CLOSURE
    make_standin_framework_wheels(tmp_path / "vision", {**PINS, "torchvision": "0.18.1"}, FACTS)
    written = {p.name.split("-")[0].replace("_", "-") for p in (tmp_path / "vision").glob("*.whl")}
    assert written == TORCH_CLOSURE | {"torchvision", "numpy", "pillow"}
    make_standin_framework_wheels(tmp_path / "pinned", {**PINS, "torchvision": "0.18.1", "numpy": "2.0.0"}, FACTS)
    assert not (tmp_path / "pinned" / wheel_filename("numpy", "1.26.4")).exists()  # a pin wins
    assert (tmp_path / "pinned" / wheel_filename("numpy", "2.0.0")).exists()
    make_standin_framework_wheels(tmp_path / "bare", PINS, FACTS, dependencies=False)
    assert len(list((tmp_path / "bare").glob("*.whl"))) == len(PINS)


def test_framework_payloads_and_upload_time(tmp_path):
    paths = make_standin_framework_wheels(tmp_path, PINS, FACTS, upload_time=T0,
                                          payload_bytes={"Torch": 50_000, "nvidia-nccl-cu12": 10_000})
    by_name = {p.name.split("-")[0]: p for p in paths}
    assert zipfile.ZipFile(by_name["torch"]).getinfo("torch/_payload.bin").file_size == 50_000
    assert zipfile.ZipFile(by_name["nvidia_nccl_cu12"]).getinfo("nvidia/nccl/_payload.bin").file_size == 10_000
    assert "triton/_payload.bin" not in zipfile.ZipFile(by_name["triton"]).namelist()
    stamp = (T0 - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000
    assert {p.stat().st_mtime_ns for p in tmp_path.glob("*.whl")} == {stamp}  # dependencies too


def test_dependency_wheels(tmp_path):
    paths = make_standin_dependency_wheels(tmp_path / "deps")
    assert [p.name for p in paths] == [wheel_filename(name, version)
                                       for name, (version, _) in sorted(STANDIN_DEPENDENCIES.items())]
    assert {name: version for name, (version, _) in STANDIN_DEPENDENCIES.items()} == {
        "filelock": "3.15.1", "typing-extensions": "4.12.2", "sympy": "1.12.1", "mpmath": "1.3.0",
        "networkx": "3.3", "jinja2": "3.1.4", "markupsafe": "2.1.5", "fsspec": "2024.6.0", "numpy": "1.26.4",
        "pillow": "10.3.0"}
    by_name = {p.name.split("-")[0]: p for p in paths}
    assert metadata_of(by_name["jinja2"])["Requires-Dist"] == ["MarkupSafe>=2.0"]
    assert metadata_of(by_name["sympy"])["Requires-Dist"] == ["mpmath<1.4.0,>=1.1.0"]
    assert "Requires-Dist" not in metadata_of(by_name["numpy"])
    target = tmp_path / "site"
    for path in paths:
        zipfile.ZipFile(path).extractall(target)
    code = ("import filelock, typing_extensions, sympy, mpmath, networkx, jinja2, markupsafe, fsspec, numpy, PIL; "
            "print(numpy.__version__, PIL.__version__, typing_extensions.__version__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=target,
                          env={"PYTHONPATH": str(target), "PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1.26.4", "10.3.0", "4.12.2"]
    with pytest.raises(ValueError, match="not a stand-in dependency"):
        make_standin_dependency_wheels(tmp_path / "deps", overrides={"numpyy": "2.0.0"})


def test_publishing_a_newer_dependency_keeps_the_older_upload_times(tmp_path):
    later = T0 + timedelta(days=10)
    make_standin_dependency_wheels(tmp_path, upload_time=T0)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.whl")}
    make_standin_dependency_wheels(tmp_path, upload_time=later, overrides={"NumPy": "2.0.0"})
    after = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.whl")}
    newer = wheel_filename("numpy", "2.0.0")
    assert after == {**before, newer: int(later.timestamp()) * 10**9 + 123456000}
    earlier = T0 - timedelta(days=1)
    make_standin_dependency_wheels(tmp_path, upload_time=earlier)  # an earlier upload time is taken
    stamp = int(earlier.timestamp()) * 10**9 + 123456000
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.whl")} == {
        **{name: stamp for name in before}, newer: after[newer]}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(after)  # no scratch left behind


# --------------------------------------------------------------------------------------------- uv and pip


def uv_binary() -> str | None:
    """The uv executable: the ``uv`` Python package's, else the one on PATH."""
    try:
        import uv

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


@pytest.fixture
def uv() -> str:
    found = uv_binary()
    if found is None:
        message = "uv not installed (pip install uv): the lock tests of the stand-in index need it"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI=true must not skip them")
        pytest.skip(message)
    return found


def uv_compile(uv: str, tmp_path: Path, server: IndexServer, requirements: str, *extra: str) -> str:
    """``uv pip compile`` of ``requirements`` against ``server`` as imagectl locks; its output (checks rc 0)."""
    source = tmp_path / "requirements.in"
    source.write_text(requirements + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    argv = [uv, "pip", "compile", "--no-config", "--generate-hashes", "--python-version", "3.11",
            "--python-platform", "x86_64-manylinux_2_28", "--only-binary", ":all:", "--index-url", server.url,
            *extra, str(source)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, f"uv failed:\n{done.stderr}\nrequests: {server.requests()}"
    return done.stdout


def locked(output: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a ``uv pip compile --generate-hashes`` output."""
    out: dict[str, tuple[str, list[str]]] = {}
    name = None
    for line in output.splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line)
        if match:
            name = match.group(1)
            out[name] = (match.group(2), [])
        elif name and (found := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            out[name][1].append(found.group(1))
    return out


def test_uv_locks_the_torch_closure_from_metadata_alone(uv, tmp_path, index, wheels):
    lock = locked(uv_compile(uv, tmp_path, index, "torch==2.3.1"))
    assert set(lock) == TORCH_CLOSURE  # no numpy, pillow, torchvision: nothing asked for them
    assert lock["torch"][0] == "2.3.1" and lock["sympy"][0] == "1.12.1" and lock["markupsafe"][0] == "2.1.5"
    for name, (version, hashes) in lock.items():
        assert hashes == [sha256((wheels / wheel_filename(name, version)).read_bytes())], name
    assert index.full_downloads() == {}
    wheel_gets = [r for r in index.requests() if r.path.endswith(".whl")]
    assert wheel_gets == []  # not even a HEAD or a Range: the .metadata files were enough
    assert {r.path for r in index.requests() if r.path.endswith(".metadata")} == {
        f"/files/{wheel_filename(name, version)}.metadata" for name, (version, _) in lock.items()}


def test_uv_locks_torchvision_with_numpy_and_pillow(uv, tmp_path, index):
    lock = locked(uv_compile(uv, tmp_path, index, "torchvision==0.18.1"))
    assert set(lock) == TORCH_CLOSURE | {"torchvision", "numpy", "pillow"}
    assert lock["numpy"][0] == "1.26.4" and lock["pillow"][0] == "10.3.0"
    assert index.full_downloads() == {}


def test_uv_skips_a_yanked_release(uv, tmp_path, index, wheels):
    make_standin_dependency_wheels(wheels, upload_time=T0, overrides={"numpy": "2.0.0"})
    (wheels / (wheel_filename("numpy", "2.0.0") + ".yanked")).write_text("broken ABI\n")
    assert locked(uv_compile(uv, tmp_path, index, "torchvision==0.18.1"))["numpy"][0] == "1.26.4"


def test_uv_exclude_newer_sees_upload_times(uv, tmp_path, index, wheels):
    make_standin_dependency_wheels(wheels, upload_time=datetime(2024, 6, 16, 12, tzinfo=UTC),
                                   overrides={"numpy": "2.0.0"})
    newest = locked(uv_compile(uv, tmp_path, index, "torchvision==0.18.1"))
    assert newest["numpy"][0] == "2.0.0"
    before = locked(uv_compile(uv, tmp_path, index, "torchvision==0.18.1", "--exclude-newer", "2024-06-10T00:00:00Z"))
    assert before["numpy"][0] == "1.26.4" and set(before) == set(newest)
    after = locked(uv_compile(uv, tmp_path, index, "torchvision==0.18.1", "--exclude-newer", "2024-06-20T00:00:00Z"))
    assert after["numpy"][0] == "2.0.0"
    with pytest.raises(AssertionError, match="uv failed"):  # nothing was uploaded yet
        uv_compile(uv, tmp_path, index, "torch==2.3.1", "--exclude-newer", "2024-06-01T00:00:00Z")
    assert index.full_downloads() == {}


def test_pip_installs_a_profile_from_the_index(tmp_path):
    """What the image build does: pip resolves the pins and the stand-ins' own dependencies from the index."""
    pins = {**PINS, "torch": "2.3.1+cu121", "torchvision": "0.18.1", "torchaudio": "2.3.1"}
    make_standin_framework_wheels(tmp_path / "wheels", pins, FACTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    with start_simple_index(tmp_path / "wheels") as server:
        argv = [sys.executable, "-m", "pip", "--isolated", "download", "--no-cache-dir", "--disable-pip-version-check",
                "--only-binary", ":all:", "--index-url", server.url, "-d", str(tmp_path / "got"),
                *(f"{name}=={version}" for name, version in pins.items())]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        got = sorted(p.name for p in (tmp_path / "got").iterdir())
        assert got == sorted(p.name for p in (tmp_path / "wheels").glob("*.whl"))
        assert server.full_downloads() == {name: 1 for name in got}
