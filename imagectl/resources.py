"""Where the shipped templates and matrices live: inside the installed package, or in a source checkout."""

from __future__ import annotations

from pathlib import Path

from typing import TYPE_CHECKING

from .errors import InputError

if TYPE_CHECKING:
    from .config import Config

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(kind: str) -> Path:
    """The shipped ``templates`` or ``matrices`` directory; raises InputError if the install lacks it.

    A wheel carries them as ``imagectl/_data/<kind>``; a source checkout (and an editable install) has them
    at the top of the repository.
    """
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise InputError(f"the shipped {kind} directory is missing from this installation of imagectl")


def template_dirs(config: "Config") -> list[Path]:
    """The configured template directories, then the shipped one (searched in that order)."""
    return [*config.template_dirs, shipped_dir("templates")]


def template_files(config: "Config") -> list[Path]:
    """Every file of the configured and shipped template directories."""
    return [f for d in template_dirs(config) for f in d.rglob("*") if f.is_file()]
