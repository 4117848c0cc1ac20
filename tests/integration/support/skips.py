"""What an integration test does when a part it needs is missing: skip on a workstation, fail under ``CI=true``."""

from __future__ import annotations

import shutil
from typing import NoReturn

import pytest

from tests.skipguard import running_in_ci


def skip_or_fail(reason: str) -> NoReturn:
    """Fail the test under CI (``CI=true``), skip it elsewhere."""
    if running_in_ci():
        pytest.fail(reason)
    pytest.skip(reason)


def require_binary(binary: str) -> None:
    """Fail under CI, skip elsewhere, when ``binary`` is not on ``PATH``."""
    if shutil.which(binary) is None:
        skip_or_fail(f"{binary} is not installed")
