"""PEP 508 requirements: the grammar every requirement passes (:func:`check_requirement`, with ``packaging``'s
parser, which only the modules that take requirements load), and reading a team's requirements file: PEP 508
lines only, every one validated.

A bad line is quoted in the error only when the rest of the file reads as requirements (every other line is
one, and at least one of them has a version specifier or marker, which a lone word such as a token does not):
``--requirements`` can be pointed at any file (``/etc/shadow``, a key), and an error must not print a line of
it.  Otherwise the error names ``FILE:LINE`` only.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from . import paths
from .errors import InputError, ValidationError
from .grammar import is_safe_text, refusal

_OPTION_RE = re.compile(r"^--?[A-Za-z][A-Za-z-]*$")
_SPECIFIER_RE = re.compile(r"[=<>~!;\[]")


def check_requirement(value: object, what: str = "requirement", markers: bool = False) -> str:
    """Return a PEP 508 requirement (no direct URL), normalised by ``packaging``; raises ValidationError
    otherwise.  With ``markers`` the requirement may carry a marker (``; python_version < "3.12"``), whose
    quotes are then the only quotes allowed: such a requirement goes to a requirements file and the resolver,
    never into a Dockerfile or a shell."""
    if not isinstance(value, str) or not value.strip():
        raise refusal(what, value, "a PEP 508 requirement")
    try:
        req = Requirement(value)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
        raise refusal(what, value, f"a PEP 508 requirement ({reason})") from None
    if req.url:
        raise refusal(what, value, "a requirement from the index (direct URLs are not allowed)")
    quoted_marker = markers and req.marker is not None and "\\" not in value \
        and is_safe_text(value.replace('"', "").replace("'", ""))
    if not is_safe_text(value) and not quoted_marker:
        allowed = "quotes only in a marker, no" if markers else "free of quotes,"
        raise refusal(what, value, f"{allowed} backslashes, '$' and control characters")
    return str(req)


def _lines(text: str) -> list[tuple[int, str]]:
    """``(number, line)`` of every line that is not blank or a comment, the trailing `` #`` comment cut."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append((number, line))
    return out


def _parse(line: str, what: str) -> str:
    """The requirement on ``line``; raises InputError for an option line, ValidationError for anything else."""
    if line.startswith("-") and _OPTION_RE.match(line.split()[0]):
        raise InputError(f"{what}: options such as {line.split()[0]} are not allowed"
                         " (configure indexes in imagectl.toml)")
    return check_requirement(line, what, markers=True)


def parse_requirements(text: str, where: str) -> tuple[str, ...]:
    """The requirements of ``text`` (blank lines and ``#`` comments skipped).

    Raises InputError naming ``where`` and the line for an option line (``-r``, ``--index-url``: the index
    comes from the configuration) or a line that is not a PEP 508 requirement; the line itself is quoted only
    when the rest of the file reads as requirements (see the module docstring).
    """
    parsed: list[str] = []
    failures: list[tuple[int, InputError]] = []
    for number, line in _lines(text):
        try:
            parsed.append(_parse(line, f"{where}:{number}"))
        except InputError as exc:
            failures.append((number, exc))
    if not failures:
        return tuple(parsed)
    number, exc = failures[0]
    quotable = len(failures) == 1 and any(_SPECIFIER_RE.search(req) for req in parsed)
    if quotable or not isinstance(exc, ValidationError):  # an option line shows its option only
        raise exc
    raise InputError(f"{where}:{number}: not a PEP 508 requirement (the line is not shown: {where} does not read "
                     "as a requirements file)")


def read_requirements(path: str | None) -> tuple[str, ...]:
    """The requirements in the file at ``path`` (none for None); raises InputError if unreadable or not
    requirements."""
    if path is None:
        return ()
    return parse_requirements(paths.read_text(Path(path), InputError, "the --requirements file"), path)
