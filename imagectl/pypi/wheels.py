"""Wheel filenames: parse them, and pick the glibc Linux x86_64 wheels for a CPython version.

All functions are pure.  A CPython version is written ``"3.11"`` (or ``"3.13t"`` for the free-threaded
build); its wheel tag is ``cp311`` (``cp313t`` for the ABI of the free-threaded build).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import Version

from imagectl.errors import InputError, PackageIndexError
from imagectl.pypi.simple import DistFile

_PYTHON = re.compile(r"^3\.(\d+)(t?)$")
_CP_TAG = re.compile(r"^cp(\d)(\d+)(t?)$")


@dataclass(frozen=True)
class WheelName:
    """The parts of a wheel filename (PEP 427): project, version, build tag and compatibility tags."""

    name: NormalizedName
    version: Version
    build: tuple[int, str] | tuple[()]
    tags: frozenset[Tag]


def is_wheel(file: DistFile) -> bool:
    """Whether ``file`` is a wheel (by its filename); never raises."""
    return file.filename.endswith(".whl")


def parse_wheel(filename: str) -> WheelName:
    """Parse a wheel filename with :func:`packaging.utils.parse_wheel_filename`.

    Raises:
        PackageIndexError: ``filename`` is not a valid wheel filename.
    """
    try:
        name, version, build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise PackageIndexError(f"not a valid wheel filename: {filename!r} ({exc})") from exc
    return WheelName(name=name, version=version, build=build, tags=tags)


def cpython_tag(python: str) -> str:
    """Return the interpreter/ABI tag of a CPython version: ``"3.11"`` -> ``cp311``, ``"3.13t"`` -> ``cp313t``.

    Raises:
        InputError: ``python`` is not of the form ``3.N`` or ``3.Nt``.
    """
    match = _PYTHON.match(python)
    if not match:
        raise InputError(f"not a CPython version: {python!r} (expected e.g. 3.11 or 3.13t)")
    return f"cp3{match.group(1)}{match.group(2)}"


def is_glibc_linux_x86_64(tag: Tag) -> bool:
    """Whether ``tag``'s platform is glibc Linux on x86_64 (``manylinux*_x86_64`` or ``linux_x86_64``)."""
    return tag.platform.endswith("_x86_64") and tag.platform.startswith(("manylinux", "linux_"))


def tag_runs_on_cpython(tag: Tag, python: str) -> bool:
    """Whether a wheel tag can be installed by CPython ``python`` (cpXY/cpXY, abi3 from older cp, py3/none).

    Raises:
        InputError: ``python`` is not a CPython version.
    """
    wanted = cpython_tag(python)
    if tag.interpreter == wanted.rstrip("t"):
        return tag.abi in (wanted, "none") or (tag.abi == "abi3" and not wanted.endswith("t"))
    if tag.abi == "abi3" and not wanted.endswith("t") and _CP_TAG.match(tag.interpreter):
        return cpython_sort_key(tag.interpreter) <= cpython_sort_key(wanted)
    return tag.abi == "none" and tag.interpreter in ("py3", f"py{wanted[2:].rstrip('t')}")


def linux_x86_64_wheels(files: Iterable[DistFile], python: str | None = None) -> tuple[DistFile, ...]:
    """Return the glibc Linux x86_64 wheels among ``files`` (for CPython ``python`` when given), in order.

    Raises:
        InputError: ``python`` is not a CPython version.
        PackageIndexError: a file named ``*.whl`` whose name is not a valid wheel filename.
    """
    return tuple(
        file
        for file in files
        if is_wheel(file)
        and any(
            is_glibc_linux_x86_64(tag) and (python is None or tag_runs_on_cpython(tag, python))
            for tag in parse_wheel(file.filename).tags
        )
    )


def cpython_sort_key(tag: str) -> tuple[int, int, str]:
    """Sort key that orders ``cp38 < cp39 < cp310 < cp313 < cp313t``; other tags sort last."""
    match = _CP_TAG.match(tag)
    if not match:
        return (99, 0, tag)
    return (int(match.group(1)), int(match.group(2)), match.group(3))


def cpython_abis(files: Iterable[DistFile]) -> tuple[str, ...]:
    """Return the CPython ABI tags (``cp311``, ``cp313t``) of the glibc Linux x86_64 wheels, sorted.

    Raises:
        PackageIndexError: a file named ``*.whl`` whose name is not a valid wheel filename.
    """
    found = {
        tag.abi
        for file in files
        if is_wheel(file)
        for tag in parse_wheel(file.filename).tags
        if is_glibc_linux_x86_64(tag) and _CP_TAG.match(tag.abi)
    }
    return tuple(sorted(found, key=cpython_sort_key))
