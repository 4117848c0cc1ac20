"""Where the shipped templates and matrices live, and the one list of matrix and template directories.

The shipped directories are inside the installed package (a wheel carries them as ``imagectl/_data/<kind>``)
or, in a source checkout and an editable install, at the top of the repository.  The configured
``[paths] matrices`` and ``[paths] templates`` come with them: :func:`matrix_dirs` and :func:`template_dirs`
are the only places that put the two together.
"""

from __future__ import annotations

from pathlib import Path

from . import paths
from .config import Config
from .errors import InputError

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(kind: str) -> Path:
    """The shipped ``templates`` or ``matrices`` directory; raises InputError if the install lacks it."""
    for candidate in (_PACKAGE / "_data" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise InputError(f"the shipped {kind} directory is missing from this installation of imagectl")


def matrix_dirs(config: Config) -> list[Path]:
    """The shipped matrix directory, then the configured ones (later files extend earlier ones)."""
    return [shipped_dir("matrices"), *config.matrix_dirs]


def template_dirs(config: Config) -> list[Path]:
    """The configured template directories, then the shipped one (searched in that order)."""
    return [*config.template_dirs, shipped_dir("templates")]


def template_files(config: Config) -> list[Path]:
    """Every file of the configured and shipped template directories."""
    return [f for d in template_dirs(config) for f in d.rglob("*") if paths.is_file(f, InputError, "the template")]
