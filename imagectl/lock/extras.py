"""A team's extras (``build --extra`` / ``--requirements``) locked on top of a profile's lock.

The extras are resolved with the profile's lock as constraints, so nothing they pull in can move a locked
package.  An extra that names a locked package at another version (``torch==2.4.0`` on a 2.3 profile) is
refused before any resolution, naming both requirements; a conflict deeper in the tree is refused with the
resolver's own reason.  Both are input errors (exit 2).  PEP 508 markers are allowed: they are evaluated for
the image (its Python, Linux x86_64) and validated by ``packaging``; what reaches the Dockerfile is the
resolved ``name==version`` lines with their hashes only.
"""

from __future__ import annotations

from typing import Sequence

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import ExtrasConflictError, InputError
from ..pypi.metadata import marker_environment
from .lockfile import Lock, LockedPackage, canonical_name
from .resolve import ResolveError, resolve
from .target import Target


def parse_extra(text: str, what: str = "extra requirement") -> Requirement:
    """``text`` as a PEP 508 requirement from the index (markers allowed, no direct URL); raises InputError."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
        raise InputError(f"{what} {text!r}: not a PEP 508 requirement ({reason})") from None
    if req.url:
        raise InputError(f"{what} {text!r}: direct URLs are not allowed (requirements come from the index)")
    return req


def applies(req: Requirement, python: str) -> bool:
    """Whether ``req``'s marker holds in the image (CPython ``python`` on Linux x86_64)."""
    return req.marker is None or req.marker.evaluate(marker_environment(python))


def conflicts(extras: Sequence[str], lock: Lock) -> list[str]:
    """One message per extra that names a locked package at a version the lock does not have (pure)."""
    locked = lock.versions
    out = []
    for text in extras:
        req = parse_extra(text)
        name = canonical_name(req.name)
        if name in locked and applies(req, lock.header.python) \
                and not req.specifier.contains(locked[name], prereleases=True):
            out.append(f"extra {str(req)!r} conflicts with the lock of {lock.header.lock_id}: {name}=={locked[name]}")
    return out


def lock_extras(extras: Sequence[str], lock: Lock, target: Target) -> tuple[LockedPackage, ...]:
    """The extras' complete closure on top of ``lock`` (the lock's packages they need included, at the locked
    versions), sorted.  Raises ExtrasConflictError for an extra that names a locked package at another version,
    InputError for a conflict deeper in the tree, ResolveError/OperationError when the index or the resolver
    fails."""
    problems = conflicts(extras, lock)
    if problems:
        raise ExtrasConflictError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    wanted = sorted(str(parse_extra(e)) for e in extras)
    constraints = [f"{name}=={version}" for name, version in sorted(lock.versions.items())]
    try:
        packages = resolve(wanted, target, constraints=constraints)
    except ResolveError as exc:
        if exc.unsatisfiable:
            raise InputError(f"the extras cannot be installed with the lock of {lock.header.lock_id}: "
                             f"{str(exc).removeprefix('lock: ')}") from None
        raise
    return tuple(packages)
