"""Secrets in error and log lines (issue 9, item 4): the redaction function, and each leak the fault sweep found,
through the real CLI error handling."""

from __future__ import annotations

import pytest

from imagectl.cli.building import _line_sink
from imagectl.redact import redact, userinfo_secrets


@pytest.mark.parametrize("text, expected", [
    ("https://u:Tok3n@host/simple", "https://***@host/simple"),
    ("index 'http://u:p@ss@proxy:3128/x' failed", "index 'http://***@proxy:3128/x' failed"),
    ("HTTP://TOKEN@host and ftp://a:b@c/d", "HTTP://***@host and ftp://***@c/d"),
    ("no URL: user@example.com, repo:tag@sha256:abc", "no URL: user@example.com, repo:tag@sha256:abc"),
    ("http://host/path@with/at", "http://host/path@with/at"),
])
def test_url_userinfo_is_masked(text, expected):
    assert redact(text) == expected


def test_known_secret_values_are_masked_as_written_and_decoded():
    line = "proxy p%40ssword1 said p@ssword1 and abc"
    assert redact(line, ["p%40ssword1", "abc"]) == "proxy *** said *** and abc"  # too short to mask: abc


def test_userinfo_secrets_of_a_value_without_scheme():
    assert userinfo_secrets("u:Tok3n@host/simple") == ("u:Tok3n", "Tok3n")
    assert userinfo_secrets("https://ghp_token@host/x") == ("ghp_token", "ghp_token")
    assert userinfo_secrets("https://host/a@b") == ()


def test_index_url_with_credentials_is_never_printed(run_cli, monkeypatch):
    monkeypatch.setenv("IMAGECTL_PIP_INDEX_URL", "https://u:Tok3n@host/simple")
    listed = run_cli("list")
    assert listed.code == 0 and "Tok3n" not in listed.out + listed.err
    shown = run_cli("show", "torch-2.3-cu121")
    assert shown.code == 0 and "https://host/simple" in shown.out and "Tok3n" not in shown.out + shown.err


@pytest.mark.parametrize("url", ["https://u:Tok3n@host/sim\"ple", "u:Tok3n@host/simple", "https://u:To$k3n@host/x"])
def test_rejected_index_url_is_shown_without_its_credentials(run_cli, monkeypatch, url):
    monkeypatch.setenv("IMAGECTL_PIP_INDEX_URL", url)
    r = run_cli("list")
    assert r.code == 2 and "IMAGECTL_PIP_INDEX_URL" in r.err and "***@host" in r.err
    assert "Tok3n" not in r.err and "k3n" not in r.err


def test_build_arg_with_credentials_is_never_printed(run_cli, tmp_path):
    (tmp_path / "imagectl.toml").write_text('[build]\nargs = { HTTP_PROXY = "http://u:pw@proxy\\"" }\n')
    r = run_cli("list")
    assert r.code == 2 and "build arg HTTP_PROXY" in r.err and "pw@proxy" not in r.err


def test_build_args_variable_without_equals_is_not_echoed(run_cli, monkeypatch):
    monkeypatch.setenv("IMAGECTL_BUILD_ARGS", "HTTP_PROXY:http://u:pw@proxy")
    r = run_cli("list")
    assert r.code == 2 and "IMAGECTL_BUILD_ARGS" in r.err and "pw" not in r.err


def test_build_output_lines_are_redacted(capsys):
    sink = _line_sink(("http://u:pw@proxy:3128", "token-value-1"))
    sink("Step 3/9 : RUN curl -x http://u:pw@proxy:3128 https://a:b@host/x  # token-value-1")
    sink("Looking in indexes: http://user:****@127.0.0.1:8080/simple")
    sink("x" * 80 + " http://user:Tok3nTok3nTok3n@host/simple")
    err = capsys.readouterr().err
    assert err == "Step 3/9 : RUN curl -x *** https://***@host/x  # ***\n" \
                  "Looking in indexes: http://***@127.0.0.1:8080/simple\n" + "x" * 80 + " http://***@host/simple\n"


def test_matrix_verify_index_with_credentials_is_not_printed(run_cli):
    r = run_cli("matrix", "verify", "--index", "https://u:Tok3n@host/simple")
    assert r.code == 2 and "--index" in r.err and "https://***@host/simple" in r.err and "Tok3n" not in r.err


def test_requirements_file_that_is_not_requirements_is_not_quoted(run_cli, tmp_path):
    (tmp_path / "shadow").write_text("root:$6$s4lt$SecretHashSecretHash:19000:0:99999:7:::\n"
                                     "daemon:*:19000:0:99999:7:::\n")
    r = run_cli("build", "torch-2.3-cu121", "--requirements", "shadow")
    assert r.code == 2 and "shadow:1:" in r.err and "SecretHash" not in r.err and "root" not in r.err


def test_the_error_printer_redacts_whatever_reaches_it(run_cli):
    missing = run_cli("--config", "https://u:Tok3n@host/imagectl.toml", "list")
    assert missing.code == 2 and "https://***@host/imagectl.toml" in missing.err and "Tok3n" not in missing.err
    usage = run_cli("build", "-j", "https://u:Tok3n@host/x", "torch-2.3-cu121")
    assert usage.code == 2 and "Tok3n" not in usage.err
