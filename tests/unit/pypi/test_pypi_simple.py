"""Reading project pages from a real local HTTP index (tests/fixtures/pypi/index), JSON and HTML."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from imagectl.errors import InputError, PackageIndexError
from imagectl.pypi import (
    DistFile,
    IndexSettings,
    normalize_project_name,
    parse_html_page,
    parse_json_page,
    project_files,
    project_url,
    wheel_metadata,
)
from imagectl.retry import RetryPolicy


from tests.fixtures.pypi import server as SERVER  # noqa: E402
FAST = IndexSettings(timeout=5.0, retry=RetryPolicy(attempts=3, sleep=lambda _seconds: None))


@pytest.fixture
def index() -> Iterator[SERVER.FixtureIndex]:  # type: ignore[name-defined]
    with SERVER.FixtureIndex() as served:
        yield served


# --- names and URLs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "normal"),
    [("Demo_Pkg", "demo-pkg"), ("torch", "torch"), ("zope.interface", "zope-interface"), ("A__b--C", "a-b-c")],
)
def test_project_names_are_normalised(name: str, normal: str) -> None:
    assert normalize_project_name(name) == normal


@pytest.mark.parametrize("name", ["", "-torch", "torch/../x", "to rch"])
def test_invalid_project_names_are_input_errors(name: str) -> None:
    with pytest.raises(InputError):
        normalize_project_name(name)


def test_project_url_has_one_slash_and_a_trailing_one() -> None:
    assert project_url("https://pypi.org/simple/", "Torch") == "https://pypi.org/simple/torch/"
    assert project_url("https://pypi.org/simple", "Torch") == "https://pypi.org/simple/torch/"
    with pytest.raises(InputError):
        project_url("file:///srv/simple", "torch")


# --- JSON and HTML pages -------------------------------------------------------------------------


def test_json_page_gives_absolute_urls_hashes_yanks_and_metadata_hints(index) -> None:
    files = project_files(index.url + "/json/simple", "Demo_Pkg", settings=FAST)
    by_name = {f.filename: f for f in files}
    assert len(files) == 7
    wheel = by_name["demo_pkg-1.0-py3-none-any.whl"]
    assert wheel.url == index.url + "/files/demo_pkg-1.0-py3-none-any.whl"
    assert wheel.requires_python == ">=3.9"
    assert set(wheel.hashes) == {"sha256"} and wheel.metadata_hint is not None
    assert set(wheel.metadata_hint) == {"sha256"} and not wheel.yanked
    assert by_name["demo_pkg-1.0.tar.gz"].url == index.url + "/files/demo_pkg-1.0.tar.gz"
    assert by_name["demo_pkg-1.1-py3-none-any.whl"].yanked_reason == "bad hash on purpose"
    assert by_name["demo_pkg-1.2-py3-none-any.whl"].yanked
    assert by_name["demo_pkg-1.2-py3-none-any.whl"].yanked_reason is None
    assert by_name["demo_pkg-1.2-py3-none-any.whl"].metadata_hint == {}
    assert by_name["demo_pkg-2.0-py3-none-any.whl"].metadata_hint is None
    assert "application/vnd.pypi.simple.v1+json" in (index.hits("/json/simple/demo-pkg/")[0].accept or "")


def test_html_variant_reads_the_same_as_json(index) -> None:
    from_json = project_files(index.url + "/json/simple/", "demo-pkg", settings=FAST)
    from_html = project_files(index.url + "/html/simple/", "demo-pkg", settings=FAST)
    assert from_html == from_json
    assert from_html[1].requires_python == ">=3.9"  # unescaped from &gt;=3.9


def test_distfile_is_frozen_and_hashable() -> None:
    file = DistFile("a-1.0.tar.gz", "https://x.invalid/a-1.0.tar.gz", {"sha256": "ab"})
    with pytest.raises(AttributeError):
        file.url = "elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        file.hashes["sha256"] = "cd"  # type: ignore[index]
    assert hash(file) == hash(DistFile("a-1.0.tar.gz", "https://x.invalid/a-1.0.tar.gz", {"sha256": "ab"}))


def test_redirect_resolves_relative_links_against_the_final_url(index) -> None:
    (file,) = project_files(index.url + "/old/simple", "demo-pkg", settings=FAST)
    assert file.url == index.url + "/moved/files/demo_pkg-1.0-py3-none-any.whl"
    assert [hit.status for hit in index.log] == [301, 200]
    assert str(wheel_metadata(file, settings=FAST).version) == "1.0"


def test_pagination_follows_link_next_across_json_and_html_pages(index) -> None:
    files = project_files(index.url + "/json/simple", "paged", settings=FAST)
    assert [f.filename for f in files] == [f"paged-{v}-py3-none-any.whl" for v in ("1.0", "1.1", "2.0", "3.0")]
    assert {f.url.rsplit("/", 2)[-2] for f in files} == {"files"}
    assert all(f.url.startswith(index.url + "/files/") for f in files)


def test_pagination_that_loops_is_an_error(index) -> None:
    with pytest.raises(PackageIndexError, match="pagination loops"):
        project_files(index.url + "/json/simple", "loop", settings=FAST)


# --- errors and retries --------------------------------------------------------------------------


def test_missing_project_is_not_found_and_not_retried(index) -> None:
    with pytest.raises(PackageIndexError) as caught:
        project_files(index.url + "/json/simple", "nope", settings=FAST)
    assert str(caught.value).startswith(index.url + "/json/simple/nope/: not found (HTTP 404")
    assert len(index.hits("/json/simple/nope/")) == 1


def test_transient_failures_are_retried(index) -> None:
    files = project_files(index.url + "/json/simple", "flaky", settings=FAST)
    assert [f.filename for f in files] == ["flaky-1.0-py3-none-any.whl"]
    assert [hit.status for hit in index.hits("/json/simple/flaky/")] == [503, 429, 200]


def test_retries_are_bounded(index) -> None:
    sleeps: list[float] = []
    settings = IndexSettings(retry=RetryPolicy(attempts=2, sleep=sleeps.append))
    with pytest.raises(PackageIndexError, match="HTTP 429"):
        project_files(index.url + "/json/simple", "flaky", settings=settings)
    assert len(index.hits("/json/simple/flaky/")) == 2
    assert sleeps == [0.0]  # the fixture's Retry-After: 0


def test_unreachable_index_is_a_package_index_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    settings = IndexSettings(retry=RetryPolicy(attempts=2, base_s=0.25, sleep=sleeps.append))
    with pytest.raises(PackageIndexError, match="cannot reach the index: ConnectionError"):
        project_files(f"http://127.0.0.1:{port}/simple", "torch", settings=settings)
    assert sleeps == [0.25]


@pytest.mark.parametrize(
    ("root", "name", "problem"),
    [
        ("/json/simple", "broken", "malformed JSON index page"),
        ("/json/simple", "badapi", "unsupported simple API version '2.0'"),
        ("/json/simple", "badfile", "file entry without filename/url"),
        ("/html/simple", "nohref", "<a> without href"),
        ("/text/simple", "plain", "not a simple index page (Content-Type 'text/plain')"),
    ],
)
def test_malformed_pages_raise_one_line_naming_the_url(index, root: str, name: str, problem: str) -> None:
    with pytest.raises(PackageIndexError) as caught:
        project_files(index.url + root, name, settings=FAST)
    message = str(caught.value)
    assert message.startswith(f"{index.url}{root}/{name}/: ") and problem in message and "\n" not in message


# --- the parsers on their own --------------------------------------------------------------------


def test_html_parser_honours_base_href_fragments_and_yank_forms() -> None:
    page = (
        '<html><head><base href="https://files.example/pkgs/"></head><body>'
        '<a href="a-1.0.tar.gz#md5=ABCDEF">a-1.0.tar.gz</a>'
        '<a href="sub/a-1.1.tar.gz#egg=a" data-yanked="">a-1.1.tar.gz</a>'
        '<a href="/abs/a-1.2.tar.gz" data-yanked="reason &amp; more" data-core-metadata="false"></a>'
        "</body></html>"
    )
    first, second, third = parse_html_page("https://index.example/simple/a/", page)
    assert (first.url, dict(first.hashes)) == ("https://files.example/pkgs/a-1.0.tar.gz", {"md5": "abcdef"})
    assert (second.url, dict(second.hashes), second.yanked, second.yanked_reason) == (
        "https://files.example/pkgs/sub/a-1.1.tar.gz",
        {},
        True,
        None,
    )
    assert (third.filename, third.yanked_reason, third.metadata_hint) == ("a-1.2.tar.gz", "reason & more", None)


@pytest.mark.parametrize(
    "anchor",
    ['<a href="a-1.0.tar.gz#sha256=xyz">a</a>', '<a href="a.whl" data-core-metadata="sha256">a.whl</a>'],
)
def test_html_parser_rejects_malformed_hashes(anchor: str) -> None:
    with pytest.raises(PackageIndexError, match=r"^https://i\.example/a/: malformed HTML index page"):
        parse_html_page("https://i.example/a/", anchor)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"[]", "no 'files' list"),
        (b'{"files": []}', "unsupported simple API version None"),
        (b'{"meta": {"api-version": "1.0"}, "files": ["x"]}', "is not an object"),
        (b'{"meta": {"api-version": "1.0"}, "files": [{"filename": "a", "url": "a", "yanked": 3}]}', "yanked"),
        (b'{"meta": {"api-version": "1.0"}, "files": [{"filename": "a", "url": "a", "hashes": []}]}', "hashes"),
    ],
)
def test_json_parser_rejects_malformed_pages(body: bytes, problem: str) -> None:
    with pytest.raises(PackageIndexError, match="^https://i.example/a/: ") as caught:
        parse_json_page("https://i.example/a/", body)
    assert problem in str(caught.value)
