"""What the engine a configuration picks can do, known without connecting to it (render needs it before a build).

Cache mounts (``RUN --mount=type=cache``): buildah has them (1.24 and later); imagectl builds on Docker through the
Engine API's ``/build``, the legacy builder, which refuses ``--mount`` ("the --mount option requires BuildKit"), so a
Docker build renders the steps without them.
"""

from __future__ import annotations

import platform as host
import shutil
from collections.abc import Callable

from ..matrix.platforms import platform_of_machine


Which = Callable[[str], "str | None"]


def _installed(program: str) -> str | None:
    """Where ``program`` is on PATH (looked up at each call; unit tests pin it to "not installed")."""
    return shutil.which(program)


def picks_buildah(choice: str, which: Which | None = None) -> bool:
    """Whether ``[build] engine = choice`` builds with buildah: ``buildah``, or ``auto`` (the default) where it is
    installed (the rule of :func:`imagectl.engine.select.make_engine`)."""
    return choice == "buildah" or (choice == "auto" and (which or _installed)("buildah") is not None)


def has_cache_mounts(choice: str, which: Which | None = None) -> bool:
    """Whether the engine ``choice`` picks runs ``RUN --mount=type=cache`` (buildah does; Docker's legacy builder
    does not)."""
    return picks_buildah(choice, which)


def assembles_wheels(choice: str, install: str, platform: str, which: Which | None = None,
                     machine: Callable[[], str] | None = None) -> bool:
    """Whether a build writes the lock's layers itself (``[build] install = "assembled"``, :mod:`imagectl.assemble`)
    instead of ``RUN pip install`` steps: on buildah (it loads an OCI layout and runs a container with a bind mount;
    imagectl builds on Docker through the legacy builder, which the pip steps keep), for an image of this host's
    ``platform`` (the ``.pyc`` files are made by the image's Python, natively)."""
    here = platform_of_machine((machine or host.machine)())
    return install == "assembled" and picks_buildah(choice, which) and platform == here
