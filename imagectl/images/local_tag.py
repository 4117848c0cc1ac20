"""Keeping this machine's local copy of a moving tag in step after the registry's tag moved.

A machine that pulled ``REPO:latest`` keeps its local ``REPO:latest`` where it was when ``rollback`` or
``promote`` moves the registry's tag: ``docker run REPO:latest`` would still run the image rolled back from.
:func:`follow_locally` therefore re-tags the local tag onto the new target when the engine has that image (by
its repository digest, ``REPO@sha256:...``), and removes the local tag when it has not (the next ``docker
pull`` then fetches the right image instead of running the wrong one).  It never fails the move: what it did,
or could not do, is a note.

It first asks the engine over its unix socket (``DOCKER_HOST=unix://...`` or the default socket), without the
Docker SDK (:func:`imagectl.engine.docker.inspect_over_socket`), whether there is such a local tag at all: on a
machine without an engine, or without a local copy of the tag, nothing is loaded and nothing changes (given a
:class:`imagectl.engine.select.LazyEngine`, which connects on first use).  Only an engine at a non-unix
``DOCKER_HOST`` is asked through the engine interface directly.
"""

from __future__ import annotations

import os

from ..engine import Engine
from ..engine.docker import engine_socket, inspect_over_socket
from ..errors import ImagectlError
from ..reference import Reference
from ..tags.naming import short_digest


def follow_locally(repository: Reference, tag: str, target: str, engine: Engine) -> str:
    """Make the local ``REPOSITORY:TAG``, if there is one, point to ``target`` (a manifest digest), or remove it
    when the engine does not have that image.  ``engine`` is used only when something must change (or the engine
    is at a non-unix ``DOCKER_HOST``).

    Returns a one-line note of what was done ("" when nothing was to do, or no engine answers); never raises.
    """
    name = repository.familiar
    try:
        digests = local_repo_digests(f"{name}:{tag}", engine)
    except (OSError, ValueError, ImagectlError):
        return ""  # no engine answers here: there is no local copy to keep in step
    if digests is None or f"{name}@{target}" in digests:
        return ""
    try:
        return _retag_or_drop(engine, name, tag, target)
    except ImagectlError as exc:
        return f"local {name}:{tag} not updated: {exc}"


def local_repo_digests(ref: str, engine: Engine) -> tuple[str, ...] | None:
    """The repository digests of the local image ``ref``, or None when the engine has no such image.

    Raises OSError (or ValueError for a garbled answer) when no engine answers on the unix socket, EngineError
    when an engine at a non-unix ``DOCKER_HOST`` cannot be reached.
    """
    path = engine_socket(os.environ.get("DOCKER_HOST", ""))
    if path is None:
        info = engine.inspect(ref)
        return info.repo_digests if info else None
    found = inspect_over_socket(path, ref)
    return tuple(found.get("RepoDigests") or ()) if found is not None else None


def _retag_or_drop(engine: Engine, name: str, tag: str, target: str) -> str:
    """Point local ``name:tag`` at the local image of ``name@target``, or remove the tag when there is none."""
    image = engine.inspect(f"{name}@{target}")
    if image is not None:
        engine.tag(image.id, name, tag)
        return f"local {name}:{tag} re-tagged to it"
    engine.untag(f"{name}:{tag}")
    return (f"local {name}:{tag} removed: this machine does not have {short_digest(target)}"
            f" (docker pull {name}:{tag} fetches it)")
