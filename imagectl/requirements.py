"""Reading a team's requirements file: PEP 508 lines only, every one validated."""

from __future__ import annotations

from pathlib import Path

from .errors import InputError
from .grammar import check_requirement


def parse_requirements(text: str, where: str) -> tuple[str, ...]:
    """The requirements of ``text`` (blank lines and ``#`` comments skipped).

    Raises InputError naming ``where`` and the line for an option line (``-r``, ``--index-url``: the index
    comes from the configuration) or a line that is not a PEP 508 requirement.
    """
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise InputError(f"{where}:{number}: options such as {line.split()[0]} are not allowed"
                             " (configure indexes in imagectl.toml)")
        out.append(check_requirement(line, f"{where}:{number}"))
    return tuple(out)


def read_requirements(path: str | None) -> tuple[str, ...]:
    """The requirements in the file at ``path`` (none for None); raises InputError if unreadable."""
    if path is None:
        return ()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--requirements {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    return parse_requirements(text, path)
