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
