"""The value grammars match whole values: a trailing newline (a Dockerfile line break) is never accepted."""

from __future__ import annotations

import pytest

from imagectl import grammar
from imagectl.errors import ValidationError
from imagectl.reference import check_digest, check_tag
from imagectl.tags.naming import check_channel, is_immutable

NEWLINE_CASES = [
    (grammar.check_python, "3.11"),
    (grammar.check_driver, "535.104.05"),
    (grammar.check_package_name, "torch"),
    (lambda v: grammar.check_token(v, "token"), "runtime"),
    (lambda v: grammar.check_text(v, "text"), "one line"),
    (grammar.check_host, "registry.example.com:5000"),
    (grammar.check_env_name, "HTTP_PROXY"),
    (grammar.check_url, "https://pypi.example.com/simple"),
    (check_tag, "latest"),
    (check_digest, "sha256:" + "a" * 64),
    (check_channel, "stable"),
]


@pytest.mark.parametrize("check, good", NEWLINE_CASES)
def test_a_value_with_a_trailing_newline_is_refused(check, good):
    assert check(good) == good
    with pytest.raises(ValidationError):
        check(good + "\n")


def test_an_immutable_tag_with_a_trailing_newline_is_not_immutable():
    tag = "2.3.1-cu121-py3.11-20240501T120000-0123456789"
    assert is_immutable(tag) and not is_immutable(tag + "\n")


VERSIONS = ["2", "2.3", "2.3.0", "2.3.1", "02.3.1", "2.3.1.0", "12.1.105", "2.3.1rc1", "2.3.1.post1", "2.3.1+cu121",
            "1!2.3.1", "2.3.1.dev0", "0.4.30", "3.10", "3.9"]


@pytest.mark.parametrize("a", VERSIONS)
def test_the_version_helpers_agree_with_packaging(a):
    from packaging.version import Version

    from imagectl.grammar import major_minor, release_numbers, versions_equal

    assert release_numbers(a) == Version(a).release
    assert major_minor(a) == f"{Version(a).major}.{Version(a).minor}"
    for b in VERSIONS:
        assert versions_equal(a, b) == (Version(a) == Version(b)), (a, b)


def test_plain_versions_are_checked_without_packaging_and_bad_ones_still_refused():
    from imagectl.grammar import check_version, release_numbers

    assert check_version("12.1.105") == "12.1.105" and check_version("2.3.1rc1") == "2.3.1rc1"
    for bad in ("2.3.x", "2..3", ".2", "2.3.", "v 2"):
        with pytest.raises(ValidationError):
            check_version(bad)
    with pytest.raises(ValueError):
        release_numbers("not a version")
