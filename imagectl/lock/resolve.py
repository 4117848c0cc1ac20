"""``uv pip compile`` behind one function: requirements in, the complete hashed closure out.

uv is a real resolver (PubGrub) that reads PEP 658 metadata files, or the wheel's METADATA by HTTP range
requests where an index has none, so a resolution downloads no whole wheel; ``--python-version`` and
``--python-platform`` resolve for the image, not for this machine; ``--exclude-newer`` resolves as of a date.
It runs with ``--no-config`` (a user's uv.toml changes nothing) and only binary distributions (an image never
builds an sdist), and it gets the index URLs with their credentials from its environment, never its argv.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..errors import OperationError
from ..redact import redact, userinfo_secrets
from .lockfile import UNDATED, LockedPackage, parse_packages, requirement_lines
from .target import Target

TIMEOUT_S = 600  # one resolution, the whole closure of the largest profile takes seconds


class ResolveError(OperationError):
    """The resolver failed; ``unsatisfiable`` when the requirements conflict (not the network or the index)."""

    def __init__(self, message: str, unsatisfiable: bool = False) -> None:
        super().__init__(message)
        self.unsatisfiable = unsatisfiable


_UV_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _find_uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def uv_binary() -> str:
    """The path of the uv binary (the ``uv`` dependency ships it); raises OperationError when it is missing.
    Looked up once, under a lock: ``find_uv_bin`` reads sysconfig, which is not safe from several threads."""
    try:
        with _UV_LOCK:
            return _find_uv()
    except (ImportError, FileNotFoundError):
        raise OperationError("uv, the resolver imagectl locks with, is not installed (pip install uv)") from None


def uv_arguments(target: Target, as_of: str | None, constraints: bool) -> list[str]:
    """The ``uv pip compile`` arguments for ``target`` (pure; no URL: those go in the environment).  The output
    file, when it exists beforehand, holds the preferred versions (a previous lock), as with pip-compile."""
    args = ["pip", "compile", "requirements.in", "-o", "lock.out", "--no-config", "--no-progress", "--quiet",
            "--no-header",
            "--no-annotate", "--generate-hashes", "--only-binary", ":all:", "--python-version", target.python,
            "--python-platform", target.platform,
            # this interpreter for uv's own needs (else it searches the machine for a Python of the target's
            # version, seconds each time), never a download: the target Python is --python-version's alone
            "--python", sys.executable, "--no-python-downloads"]
    for host in target.trusted_hosts:
        args += ["--allow-insecure-host", host]
    if constraints:
        args += ["--constraints", "constraints.txt"]
    if as_of and as_of not in UNDATED:
        args += ["--exclude-newer", as_of]
        for package in target.exclude_newer_packages:  # a security floor: that package as of a later day
            args += ["--exclude-newer-package", package]
    return args


def uv_environment(target: Target, base: dict[str, str] | None = None) -> dict[str, str]:
    """The resolver's environment: the indexes (with credentials), the CA bundle, no uv settings of the user's."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("UV_")
           or k in ("UV_CACHE_DIR", "UV_HTTP_TIMEOUT")}
    env["UV_DEFAULT_INDEX"] = target.index_secret
    if target.extra_secret:
        env["UV_INDEX"] = " ".join(target.extra_secret)
    if target.ca_bundle:
        env["SSL_CERT_FILE"] = str(target.ca_bundle)
    return env


def resolve(requirements: Sequence[str], target: Target, as_of: str | None = None,
            constraints: Sequence[str] = (), prefer: Sequence[LockedPackage] = ()) -> list[LockedPackage]:
    """The complete closure of ``requirements`` for ``target``, each package with every file's sha256, sorted;
    the versions of ``prefer`` (a previous lock) are kept where they still fit.

    Raises ResolveError with uv's own cause in one line (``unsatisfiable`` for conflicting requirements),
    OperationError when uv is missing or runs out of time."""
    secrets = [*userinfo_secrets(target.index_secret), *(s for u in target.extra_secret for s in userinfo_secrets(u))]
    with tempfile.TemporaryDirectory(prefix="imagectl-lock-") as tmp:
        Path(tmp, "requirements.in").write_text("".join(f"{r}\n" for r in requirements))
        if constraints:
            Path(tmp, "constraints.txt").write_text("".join(f"{c}\n" for c in constraints))
        if prefer:
            Path(tmp, "lock.out").write_text(requirement_lines(prefer))
        argv = [uv_binary(), *uv_arguments(target, as_of, bool(constraints))]
        try:
            done = subprocess.run(argv, cwd=tmp, env=uv_environment(target), capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise OperationError(f"lock: uv did not finish within {TIMEOUT_S} s (index {target.index})") from None
        if done.returncode != 0:
            raise ResolveError(redact(f"lock: {uv_cause(done.stderr)} (index {target.index})", secrets),
                               unsatisfiable="No solution found" in done.stderr)
        output = Path(tmp, "lock.out").read_text()
    return parse_packages(output.splitlines(), 1, "uv pip compile output")


_NOISE = re.compile(r"^(error|caused by|cause|hint|help|warning):\s*", re.IGNORECASE)


def uv_cause(stderr: str) -> str:
    """uv's failure in one line: for a resolution failure the sentence that says why, else the innermost
    ``cause:`` line (pure)."""
    lines = [line.strip().lstrip("╰─▶ ").strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "uv failed and said nothing"
    for index, line in enumerate(lines):
        if "No solution found" in line:
            reasons = [raw for raw in lines[index + 1:] if not raw.lower().startswith(("hint", "help"))]
            why = reasons[0] if reasons else line
            return "the requirements cannot all be met: " + _NOISE.sub("", why).removeprefix("Because ")
    causes = [_NOISE.sub("", line) for line in lines if not line.lower().startswith(("hint", "help", "warning"))]
    return causes[-1] if causes else _NOISE.sub("", lines[0])
