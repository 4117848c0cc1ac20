"""Fetching core metadata (PEP 658, Range-read fallback) over real HTTP, parsing it, and reading pins."""

from __future__ import annotations

import io
import random
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from imagectl.errors import PackageIndexError
from imagectl.pypi import (
    DistFile,
    IndexSettings,
    WheelMetadata,
    exact_pins,
    fetch_metadata,
    loose_requirements,
    marker_environment,
    new_session,
    parse_metadata,
    project_files,
    wheel_metadata,
)
from imagectl.retry import RetryPolicy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pypi"
META10 = (FIXTURES / "index" / "files" / "demo_pkg-1.0-py3-none-any.whl.metadata").read_text(encoding="utf-8")
FAST = IndexSettings(timeout=5.0, retry=RetryPolicy(attempts=3, sleep=lambda _seconds: None))


from tests.fixtures.pypi import server as SERVER  # noqa: E402


@pytest.fixture
def index() -> Iterator[SERVER.FixtureIndex]:  # type: ignore[name-defined]
    with SERVER.FixtureIndex() as served:
        yield served


def demo_files(index) -> dict[str, DistFile]:
    return {f.filename: f for f in project_files(index.url + "/json/simple", "demo-pkg", settings=FAST)}


def make_wheel(
    dist: str, metadata: str | None, padding: int = 1_000_000, comment: bytes = b"", metadata_first: bool = False
) -> bytes:
    """A real wheel-shaped zip: a large stored member and a deflated ``*.dist-info/METADATA`` (last by default)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        if metadata is not None and metadata_first:
            archive.writestr(f"{dist}.dist-info/METADATA", metadata, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("demo_pkg/__init__.py", "")
        archive.writestr("demo_pkg/blob.bin", random.Random(0).randbytes(padding))
        if metadata is not None and not metadata_first:
            archive.writestr(f"{dist}.dist-info/METADATA", metadata, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        archive.writestr(f"{dist}.dist-info/RECORD", "")
        archive.comment = comment
    return buffer.getvalue()


# --- PEP 658 .metadata ---------------------------------------------------------------------------


def test_advertised_metadata_is_fetched_and_its_hash_verified(index) -> None:
    file = demo_files(index)["demo_pkg-1.0-py3-none-any.whl"]
    document = fetch_metadata(file, settings=FAST)
    assert (document.via, document.url) == ("pep658", file.url + ".metadata")
    metadata = wheel_metadata(file, settings=FAST)
    assert (metadata.name, metadata.version, metadata.requires_python) == ("demo_pkg", Version("1.0"), ">=3.9")
    assert metadata.requires_dist_lines[0] == (
        'nvidia-nccl-cu12 (==2.20.5) ; platform_system == "Linux" and platform_machine == "x86_64"'
    )
    assert len(metadata.requires_dist) == 10
    assert index.hits("/files/demo_pkg-1.0-py3-none-any.whl") == []


def test_metadata_is_tried_even_when_not_advertised(index) -> None:
    file = DistFile("demo_pkg-1.0-py3-none-any.whl", index.url + "/files/demo_pkg-1.0-py3-none-any.whl")
    assert fetch_metadata(file, settings=FAST).via == "pep658"


@pytest.mark.parametrize(("filename", "message"), [
    ("demo_pkg-1.1-py3-none-any.whl", r"^{url}\.metadata: sha256 mismatch: the index says 0000"),
    ("demo_pkg-1.2-py3-none-any.whl", r"\.metadata: malformed metadata: invalid Requires-Dist"),
    ("demo_pkg-1.3-py3-none-any.whl", "metadata is for demo_pkg 9.9, not demo-pkg 1.3"),
    ("demo_pkg-3.0-py3-none-any.whl", r"^{url}: not found \(HTTP 404"),
    ("demo_pkg-1.0.tar.gz", "not a wheel"),
], ids=["bad-hash", "malformed", "another-release", "missing-wheel", "sdist"])
def test_a_listed_file_without_good_metadata_is_refused(index, filename: str, message: str) -> None:
    """``message``: a regex; ``{url}`` stands for the file's URL, ``^`` for "the error starts with"."""
    file = demo_files(index)[filename]
    with pytest.raises(PackageIndexError, match=message.format(url=re.escape(file.url))):
        wheel_metadata(file, settings=FAST)


# --- Range-read fallback -------------------------------------------------------------------------


@pytest.mark.parametrize(("comment", "metadata_first"), [(b"", False), (b"c" * 40_000, False), (b"", True)])
def test_missing_metadata_falls_back_to_range_reads_of_the_wheel(index, comment: bytes, metadata_first: bool) -> None:
    text = META10.replace("Version: 1.0", "Version: 2.0")
    wheel = make_wheel("demo_pkg-2.0", text, comment=comment, metadata_first=metadata_first)
    path = "/files/demo_pkg-2.0-py3-none-any.whl"
    index.put(path, wheel)
    file = demo_files(index)["demo_pkg-2.0-py3-none-any.whl"]
    with new_session() as session:
        document = fetch_metadata(file, session, FAST)
        metadata = parse_metadata(document.content, document.url)
    assert document.via == "range" and metadata.version == Version("2.0")
    assert [hit.status for hit in index.hits(path + ".metadata")] == [404]
    hits = index.hits(path)
    assert len(hits) == (2 if metadata_first else 1)
    assert all(hit.status == 206 and hit.range for hit in hits)
    assert sum(hit.sent for hit in hits) < len(wheel) // 4


@pytest.mark.parametrize(("filename", "content", "message"), [
    ("norange-1.0-py3-none-any.whl", lambda: make_wheel("norange-1.0", META10), "server ignores HTTP Range requests"),
    ("junk-1.0-py3-none-any.whl", lambda: random.Random(1).randbytes(200_000), "not a readable wheel"),
    ("empty-1.0-py3-none-any.whl", lambda: make_wheel("empty-1.0", None, padding=10), "0 candidate"),
], ids=["ignores-range", "not-a-zip", "no-metadata"])
def test_a_served_file_that_is_no_readable_wheel_is_refused(index, filename: str, content, message: str) -> None:
    url = index.put(f"/files/{filename}", content())
    with pytest.raises(PackageIndexError, match=message):
        wheel_metadata(DistFile(filename, url), settings=FAST)


def test_range_reads_are_capped(index) -> None:
    url = index.put("/files/big-1.0-py3-none-any.whl", make_wheel("big-1.0", META10, metadata_first=True))
    with pytest.raises(PackageIndexError, match="would read more than"):
        fetch_metadata(DistFile("big-1.0-py3-none-any.whl", url), settings=IndexSettings(max_range_bytes=100_000))


# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"Metadata-Version: 2.1\nName: a\nVersion: 1\xff\n", "not UTF-8"),
        ("Metadata-Version: 2.1\nVersion: 1.0\n", "expected one Name field, found 0"),
        ("Metadata-Version: 2.1\nName: a\nName: b\nVersion: 1.0\n", "expected one Name field, found 2"),
        ("Name: a\nVersion: 1.0\n", "expected one Metadata-Version"),
        ("Metadata-Version: 2.1\nName: a\nVersion: one\n", "invalid Version 'one'"),
        ("Metadata-Version: 2.1\nName: a\nVersion: 1.0\nRequires-Python: >=>3\n", "invalid Requires-Python"),
        ("<html><body>Not Found</body></html>\n", "expected one Name field"),
    ],
)
def test_malformed_metadata_is_rejected(content: bytes | str, problem: str) -> None:
    with pytest.raises(PackageIndexError, match="^https://i.example/m: malformed metadata: ") as caught:
        parse_metadata(content, "https://i.example/m")
    assert problem in str(caught.value)


def test_metadata_is_frozen() -> None:
    metadata = parse_metadata(META10, "fixture")
    with pytest.raises(AttributeError):
        metadata.name = "other"  # type: ignore[misc]


# --- pins ----------------------------------------------------------------------------------------


def test_exact_pins_for_linux_x86_64_python_311() -> None:
    metadata = parse_metadata(META10, "fixture")
    assert exact_pins(metadata) == {"nvidia-nccl-cu12": "2.20.5", "numpy": "1.26.4"}


def test_exact_pins_follow_the_python_and_platform() -> None:
    metadata = parse_metadata(META10, "fixture")
    assert exact_pins(metadata, python="3.12") == {"nvidia-nccl-cu12": "2.20.5", "numpy": "2.1.0"}
    assert exact_pins(metadata, platform_machine="aarch64") == {"numpy": "1.26.4"}
    assert exact_pins(metadata, platform_system="Windows", platform_machine="AMD64") == {
        "numpy": "1.26.4",
        "pywin32": "306",
    }


def test_loose_requirements_are_reported_separately() -> None:
    metadata = parse_metadata(META10, "fixture")
    assert loose_requirements(metadata) == {
        "triton": "~=3.8.0",
        "typing-extensions": ">=4.8",
        "filelock": "",
        "sympy": "==1.13.*",
        "mylib": "@ https://example.invalid/mylib-1.0.tar.gz",
    }
    assert "triton" not in loose_requirements(metadata, platform_system="Darwin", platform_machine="arm64")


def test_conflicting_pins_are_an_error() -> None:
    metadata = WheelMetadata("a", Version("1"), None, (Requirement("b==1"), Requirement("B==2")))
    with pytest.raises(PackageIndexError, match="pins b to both 1 and 2"):
        exact_pins(metadata)


def test_marker_environment_is_deterministic() -> None:
    environment = marker_environment("3.11")
    assert environment["python_full_version"] == "3.11.0" and environment["sys_platform"] == "linux"
    assert marker_environment("3.12.4")["python_version"] == "3.12"
    assert marker_environment(platform_system="Windows")["os_name"] == "nt"
