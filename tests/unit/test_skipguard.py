"""tests/skipguard.py in an inner pytest session: under CI=true a skip the allow-list does not explain fails the
run and is named; without CI it is an ordinary skip; IMAGECTL_UPDATE_GOLDEN under CI stops the run at start."""

from __future__ import annotations

import pytest

from tests import skipguard

SKIPPING = {
    "call": "import pytest\n\ndef test_it():\n    pytest.skip('no widget')\n",
    "mark": "import pytest\n\n@pytest.mark.skipif(True, reason='no widget')\ndef test_it():\n    pass\n",
    "fixture": "import pytest\n\n@pytest.fixture\ndef widget():\n    pytest.skip('no widget')\n\n"
               "def test_it(widget):\n    pass\n",
    "module": "import pytest\n\npytest.importorskip('no_widget_module_anywhere', reason='no widget')\n\n"
              "def test_it():\n    pass\n",
}


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """``inner(source, ci=...)``: run ``test_inner.py`` holding ``source`` in a session with the guard loaded."""
    monkeypatch.delenv("IMAGECTL_UPDATE_GOLDEN", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # hermetic and fast: no installed plugins

    def run(source: str, ci: bool) -> pytest.RunResult:
        if ci:
            monkeypatch.setenv("CI", "true")
        else:
            monkeypatch.delenv("CI", raising=False)
        pytester.makepyfile(test_inner=source + "\n\ndef test_passes():\n    pass\n")
        return pytester.runpytest("-p", "tests.skipguard")

    return run


@pytest.mark.parametrize("where", sorted(SKIPPING))
def test_an_unexplained_skip_fails_a_ci_run_and_is_named(inner, where):
    result = inner(SKIPPING[where], ci=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    nodeid = "test_inner.py" if where == "module" else "test_inner.py::test_it"
    result.stdout.fnmatch_lines([f"*unexplained skip: {nodeid}: *no widget*"])


@pytest.mark.parametrize("where", sorted(SKIPPING))
def test_without_ci_a_skip_is_only_a_skip(inner, where):
    result = inner(SKIPPING[where], ci=False)
    # a skipped module leaves nothing collected: pytest's own status 5, not a failure
    assert result.ret == (pytest.ExitCode.NO_TESTS_COLLECTED if where == "module" else pytest.ExitCode.OK)
    assert "unexplained skip" not in result.stdout.str()


@pytest.mark.parametrize("key", ["test_inner.py::test_it", "test_inner.py"])
def test_an_allow_listed_skip_passes_a_ci_run(inner, monkeypatch, key):
    monkeypatch.setattr(skipguard, "ALLOWED_SKIPS", {key: "the widget is optional (a comment says why)"})
    result = inner(SKIPPING["call"], ci=True)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, skipped=1)


def test_an_expected_failure_is_not_a_skip(inner):
    source = "import pytest\n\n@pytest.mark.xfail(reason='known')\ndef test_it():\n    assert False\n"
    result = inner(source, ci=True)
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=1, xfailed=1)


def test_a_ci_run_with_failures_and_skips_still_fails(inner):
    result = inner(SKIPPING["call"] + "\n\ndef test_fails():\n    assert False\n", ci=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*unexplained skip: test_inner.py::test_it*"])


@pytest.mark.parametrize("ci", [True, False])
def test_update_golden_stops_a_ci_run_at_start(inner, monkeypatch, ci):
    monkeypatch.setenv("IMAGECTL_UPDATE_GOLDEN", "1")
    result = inner("", ci=ci)
    if ci:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*IMAGECTL_UPDATE_GOLDEN is set under CI=true*"])
        assert "passed" not in result.stdout.str()  # nothing ran
    else:
        assert result.ret == pytest.ExitCode.OK
        result.assert_outcomes(passed=1)


def test_an_allow_list_key_covers_itself_and_what_lies_below_it():
    allowed = {"tests/unit/": "a", "tests/x/test_a.py": "b", "tests/x/test_b.py::test_c": "c"}
    assert skipguard.allowed_by("tests/unit/test_y.py::test_z", allowed) == "tests/unit/"
    assert skipguard.allowed_by("tests/x/test_a.py", allowed) == "tests/x/test_a.py"
    assert skipguard.allowed_by("tests/x/test_a.py::test_q[1]", allowed) == "tests/x/test_a.py"
    assert skipguard.allowed_by("tests/x/test_b.py::test_c[gpu]", allowed) == "tests/x/test_b.py::test_c"
    assert skipguard.allowed_by("tests/x/test_ab.py::test_q", allowed) is None
    assert skipguard.allowed_by("tests/x/test_b.py::test_cd", allowed) is None
    assert skipguard.allowed_by("tests/unitx/test_y.py", allowed) is None
