"""What the engine a configuration picks can do, known without connecting to it (render needs it before a build).

Cache mounts (``RUN --mount=type=cache``): buildah has them (1.24 and later); imagectl builds on Docker through the
Engine API's ``/build``, the legacy builder, which refuses ``--mount`` ("the --mount option requires BuildKit"), so a
Docker build renders the steps without them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable


def picks_buildah(choice: str, which: Callable[[str], str | None] = shutil.which) -> bool:
    """Whether ``[build] engine = choice`` builds with buildah: ``buildah``, or ``auto`` where it is installed (the
    rule of :func:`imagectl.engine.select.make_engine`)."""
    return choice == "buildah" or (choice == "auto" and which("buildah") is not None)


def has_cache_mounts(choice: str, which: Callable[[str], str | None] = shutil.which) -> bool:
    """Whether the engine ``choice`` picks runs ``RUN --mount=type=cache`` (buildah does; Docker's legacy builder
    does not)."""
    return picks_buildah(choice, which)
