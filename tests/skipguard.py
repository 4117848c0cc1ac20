"""A pytest plugin for CI hygiene: under ``CI=true`` a skipped test fails the session, and so does
``IMAGECTL_UPDATE_GOLDEN`` (with it the golden-file tests rewrite their files and pass by construction).

A skip that is legitimate in CI goes into ``ALLOWED_SKIPS`` with the reason why.  Registered for the whole suite
by ``tests/conftest.py``; load it elsewhere with ``-p tests.skipguard`` (``tests/unit/test_skipguard.py`` does).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

import pytest

# nodeid, or a prefix of nodeids (a folder ``tests/unit/``, a module ``tests/unit/test_x.py``, a test with all its
# parameters ``tests/unit/test_x.py::test_y``) -> why skipping it under CI=true is legitimate.  Keep it empty: CI
# installs everything the tests need, so a skip there means a test that silently stopped testing.
ALLOWED_SKIPS: dict[str, str] = {}


def running_in_ci() -> bool:
    """Whether this is a CI run (``CI=true``, as GitHub Actions, GitLab CI and ``.ci/run`` set it)."""
    return os.environ.get("CI", "").lower() == "true"


def allowed_by(nodeid: str, allowed: Mapping[str, str]) -> str | None:
    """The allow-list key covering ``nodeid`` (itself, or a folder, module or test prefix of it), else None."""
    for key in allowed:
        if nodeid == key or nodeid.startswith(key if key.endswith("/") else (key + "/", key + "::", key + "[")):
            return key
    return None


class SkipGuard:
    """Collects the skips of one session and fails it, under CI, for each one the allow-list does not cover."""

    def __init__(self, allowed: Mapping[str, str]) -> None:
        self.allowed = allowed
        self.skips: dict[str, str] = {}  # nodeid -> skip reason, in the order seen

    def record(self, report: pytest.CollectReport | pytest.TestReport) -> None:
        """Remember ``report`` if it is a skip (an xfail is not) that the allow-list does not cover."""
        if report.skipped and not hasattr(report, "wasxfail") and allowed_by(report.nodeid, self.allowed) is None:
            self.skips.setdefault(report.nodeid, _reason(report))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Refuse ``IMAGECTL_UPDATE_GOLDEN`` under CI.  Raises pytest.UsageError (exit status 4)."""
        if os.environ.get("IMAGECTL_UPDATE_GOLDEN"):
            raise pytest.UsageError("IMAGECTL_UPDATE_GOLDEN is set under CI=true: the golden-file tests would "
                                    "rewrite their files and pass by construction; unset it")

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module-level skip (``pytest.importorskip`` at import, ``pytestmark = skipif``) is a skip too."""
        self.record(report)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Skips of each phase: setup (``skipif`` marks, a fixture that skips), call and teardown."""
        self.record(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Name each unexplained skip and turn a passing (or empty) session into a failed one."""
        if not self.skips:
            return
        lines = [f"{len(self.skips)} test(s) skipped under CI=true and not in ALLOWED_SKIPS of tests/skipguard.py:"]
        lines += [f"  unexplained skip: {nodeid}: {reason}" for nodeid, reason in self.skips.items()]
        _write(session.config, lines)
        if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """The skip message of ``report`` (its longrepr is ``(file, line, "Skipped: why")`` for a skip)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _write(config: pytest.Config, lines: list[str]) -> None:
    """Print ``lines`` through the terminal reporter, or to stderr when there is none (``-p no:terminal``)."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        sys.stderr.write("\n".join(lines) + "\n")
        return
    terminal.write_line("")  # ends the progress line
    terminal.section("unexplained skips", sep="=", red=True, bold=True)
    for line in lines:
        terminal.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    """Install the guard for this session when it runs under CI (it reads ``ALLOWED_SKIPS`` now)."""
    if running_in_ci():
        config.pluginmanager.register(SkipGuard(ALLOWED_SKIPS), "imagectl-skipguard")
