"""Profile names: parsing, resolving against the matrix, listing, and suggesting close names.

A name is ``FRAMEWORK-VERSION-CUDATAG`` followed by optional suffixes in any order: an OS
(``-ubuntu24.04``), a flavour (``-devel``) and a Python (``-py3.11``).  ``VERSION`` is a minor line
(``2.3``: its newest patch in the matrix) or a full release (``2.3.1``).  The canonical name writes the
suffixes that differ from the defaults, in the order OS, flavour, Python.  The default flavour depends on the
variant (:meth:`BaseImages.default_flavor`): ``[base] wheel_cuda_flavor`` (``base``) for a build whose pins
carry ``nvidia-*`` wheels, else the first of ``[base] flavors`` (``runtime``).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass

from ..errors import UnknownProfileError, ValidationError
from ..grammar import release_numbers, versions_equal
from ..reference import parse_reference
from .model import CudaToolkit, Framework, Matrix, OsInfo, Profile, Release, Variant
from .rules import MATRIX_RULES, run_rules

# The parts of a name, declared once: the matrix loader refuses a framework, CUDA tag, OS or flavour that
# these do not match (it would be listed but could not be resolved).
FRAMEWORK_NAME = r"[a-z][a-z0-9_]*"
CUDA_TAG = r"[a-z]+[0-9]+"
SUFFIX = r"[a-z0-9][a-z0-9.]*"  # an OS or a flavour
# A release version as immutable tags carry it (``+`` becomes ``_``): no ``-``, ``!`` or ``_`` of its own.
RELEASE_VERSION = r"[0-9][0-9A-Za-z.+]{0,63}"
_NAME_RE = re.compile(
    rf"^(?P<fw>{FRAMEWORK_NAME})"
    r"-(?P<version>[0-9]+(?:\.[0-9]+){1,3})"
    rf"(?:-(?P<cuda>{CUDA_TAG}))?"
    r"(?P<rest>(?:-[a-z0-9.]+)*)$"
)
_PY_RE = re.compile(r"^py(3\.[0-9]{1,2})$")
WORKING_SHOWN = 8  # names that work, listed when a name is refused
MAX_NAME_PART = 40  # characters of a framework, CUDA tag, OS or flavour: a name stays well inside a file name's 255


def check_name_part(value: str, kind: str, what: str) -> str:
    """``value`` if it can be part of a profile name as a ``kind`` (``framework``, ``cuda_tag``, ``suffix``:
    an OS or a flavour); raises ValidationError saying why it cannot."""
    pattern, expected = {
        "framework": (FRAMEWORK_NAME, "a lower-case name of [a-z0-9_] starting with a letter"),
        "cuda_tag": (CUDA_TAG, "letters then digits, like cu121"),
        "suffix": (SUFFIX, "a lower-case name of [a-z0-9.] (no '-' or '_': profile names join parts with '-')"),
    }[kind]
    if not re.fullmatch(pattern, value) or (kind == "suffix" and _PY_RE.match(value)):
        raise ValidationError(f"{what}: {value!r} is not {expected}")
    if len(value) > MAX_NAME_PART:
        raise ValidationError(f"{what}: {value[:20]!r}... is {len(value)} characters long; at most {MAX_NAME_PART}"
                              " (profile names become repository and lock file names)")
    return value


def check_release_version(value: str, what: str) -> str:
    """``value`` if immutable tags can carry it (``2.3.1``, ``2.3.1rc1``, ``2.3.1.post1``, ``2.3.1+cu121``);
    raises ValidationError for ``2.3.1-1``, ``2.3.1-rc1``, ``1!2.3.1`` and the like."""
    if not re.fullmatch(RELEASE_VERSION, value):
        raise ValidationError(f"{what}: {value!r} cannot be part of an image tag: write it without '-', '_' or"
                              " an epoch (2.3.1rc1, 2.3.1.post1), at most 64 characters")
    return value


@dataclass(frozen=True)
class ParsedName:
    """The parts of a profile name, not yet checked against the matrix."""

    framework: str
    version: str
    cuda_tag: str | None
    os: str | None = None
    flavor: str | None = None
    python: str | None = None


def parse_name(name: str, matrix: Matrix) -> ParsedName:
    """Split ``name`` into its parts; raises UnknownProfileError when it is not a profile name."""
    match = _NAME_RE.fullmatch(name or "")
    if not match:
        raise _unknown(name, matrix, "is not a profile name like torch-2.3-cu121")
    parts: dict[str, str] = {}
    for token in filter(None, match["rest"].split("-")):
        kind = _suffix_kind(token, matrix)
        if kind is None or kind in parts:
            raise _unknown(name, matrix, f"has an unknown or repeated suffix -{token}")
        parts[kind] = token if kind != "python" else _PY_RE.match(token)[1]  # type: ignore[index]
    return ParsedName(match["fw"], match["version"], match["cuda"], **parts)


def _suffix_kind(token: str, matrix: Matrix) -> str | None:
    if _PY_RE.match(token):
        return "python"
    if token in matrix.base.flavors:
        return "flavor"
    if token in matrix.os:
        return "os"
    return None


def resolve_profile(name: str, matrix: Matrix, python: str | None = None) -> Profile:
    """The profile ``name`` stands for (``python`` overrides a ``-pyX.Y`` suffix).  A name without an OS gets
    the first OS of its CUDA's base images that provides its Python.  Every profile it returns satisfies every
    rule of :data:`~imagectl.matrix.rules.MATRIX_RULES`.

    Raises UnknownProfileError (an InputError), listing the closest valid names, when nothing or several things
    match, and naming the reason and the names that work when the combination cannot be built (a Python no OS
    of its CUDA provides, a Python the release is unavailable on, a broken rule).
    """
    parsed = parse_name(name, matrix)
    fw = matrix.frameworks.get(parsed.framework)
    if fw is None:
        raise _unknown(name, matrix, f"names no framework in the matrix ({', '.join(sorted(matrix.frameworks))})")
    release = _release(fw, parsed.version, name, matrix)
    variant = _variant(fw, release, parsed.cuda_tag, name, matrix)
    wanted = python or parsed.python
    profile = build_profile(matrix, fw, release, variant, parsed.version, parsed.os, parsed.flavor, wanted)
    problems = python_problems(matrix, fw, release, variant, profile.python, parsed.os)
    if not problems:
        problems = [f"[{v.rule}] {v.message} (source: {v.source})" for v in run_rules([profile], MATRIX_RULES)]
    if problems:
        raise _refused(name, "; ".join(problems), working_names(matrix, fw, release, variant, parsed))
    return profile


def python_problems(  # noqa: PLR0913 - a build's coordinates in the matrix, then the Python and OS asked about
        matrix: Matrix, fw: Framework, release: Release, variant: Variant, python: str,
        os_name: str | None = None) -> list[str]:
    """Why an image of ``release``'s ``variant`` cannot have Python ``python`` (on ``os_name``, else on any OS of
    its CUDA's base images): the release has no wheels for it, is unavailable on it, or no such OS provides it
    (as python3 or from its archive).  Empty when it can (pure)."""
    if python not in release.python:
        return [f"{fw.name} {release.version} has no wheels for Python {python} (has: {', '.join(release.python)})"]
    reason = release.unavailable_reason(python)
    out = [f"{fw.name} {release.version} cannot be installed on Python {python}: {reason}"] if reason else []
    toolkit = matrix.cuda.get(variant.cuda)
    oses = [o for o in ([os_name] if os_name else toolkit.os if toolkit else ()) if o in matrix.os]
    if not any(_provides(matrix.os[o], python) for o in oses):
        have = "; ".join(f"{o} has {', '.join(_os_pythons(matrix.os[o]))}" for o in oses)
        where = os_name or f"any OS of CUDA {variant.cuda}'s base images"
        out.append(f"Python {python} comes neither as python3 nor from the archive of {where} ({have})")
    return out


def working_names(matrix: Matrix, fw: Framework, release: Release, variant: Variant, asked: ParsedName) -> list[str]:
    """The canonical names of ``variant`` (spelled with the version ``asked`` names) that resolve: each OS of its
    CUDA with each Python it provides for the release, in the flavour ``asked`` names (else the default), whose
    profile breaks no rule; at most :data:`WORKING_SHOWN`."""
    toolkit = matrix.cuda.get(variant.cuda)
    out: list[str] = []
    for os_name in toolkit.os if toolkit else ():
        for python in available_pythons(release, matrix.os[os_name]):
            try:
                profile = build_profile(matrix, fw, release, variant, asked.version, os_name, asked.flavor, python)
            except UnknownProfileError:
                continue
            if profile.name not in out and not run_rules([profile], MATRIX_RULES):
                out.append(profile.name)
    return out[:WORKING_SHOWN]


def _provides(os_info: OsInfo, python: str) -> bool:
    return python == os_info.python or python in os_info.apt_python


def _os_pythons(os_info: OsInfo) -> list[str]:
    return sorted({os_info.python, *os_info.apt_python}, key=release_numbers)


def _refused(name: str, why: str, working: list[str]) -> UnknownProfileError:
    hint = f"; names that work: {', '.join(working)}" if working else "; no name of this build works"
    return UnknownProfileError(f"profile {name!r} cannot be built: {why}{hint}")


def _release(fw: Framework, version: str, name: str, matrix: Matrix) -> Release:
    if len(version.split(".")) == 2:
        found = [r for r in fw.releases if r.minor == version]
    else:
        found = [r for r in fw.releases if versions_equal(r.version, version)]
    if not found:
        known = ", ".join(sorted({r.minor for r in fw.releases}, key=release_numbers))
        raise _unknown(name, matrix, f"names no {fw.name} release {version} (known: {known})")
    return found[0]


def _variant(fw: Framework, release: Release, cuda_tag: str | None, name: str, matrix: Matrix) -> Variant:
    tags = {fw.tag_of(v.cuda): v for v in release.variants}
    if cuda_tag in tags:
        return tags[cuda_tag]  # type: ignore[index]
    if cuda_tag is None and len(tags) == 1:
        return next(iter(tags.values()))
    what = "is ambiguous: name a CUDA build" if cuda_tag is None else f"names no CUDA build {cuda_tag}"
    raise _unknown(name, matrix, f"{what} of {fw.name} {release.version} ({', '.join(sorted(tags))})")


def available_pythons(release: Release, os_info: OsInfo) -> list[str]:
    """The Pythons the release has wheels for, is not unavailable on, and the OS provides (its python3 or its
    archive)."""
    return [p for p in release.python if _provides(os_info, p) and not release.unavailable_reason(p)]


def default_python(release: Release, os_info: OsInfo) -> str:
    """The Python a profile builds with: the OS's own when the release can use it, else the newest usable one
    the OS archive carries, else the newest the release supports (``resolve`` refuses it)."""
    usable = available_pythons(release, os_info)
    if os_info.python in usable:
        return os_info.python
    return max(usable or list(release.python), key=release_numbers)


def default_os(matrix: Matrix, release: Release, toolkit: CudaToolkit, python: str | None = None) -> str:
    """The first of the toolkit's OSes that provides ``python`` (else any Python the release can use) for the
    release; else its first OS (``resolve`` refuses such a name)."""
    for name in toolkit.os:
        usable = available_pythons(release, matrix.os[name])
        if (python in usable) if python else usable:
            return name
    return toolkit.os[0]


def build_profile(  # noqa: PLR0913 - a build's coordinates in the matrix, then the name's spelling and choices
        matrix: Matrix, fw: Framework, release: Release, variant: Variant, version: str,
        os_name: str | None = None, flavor: str | None = None, python: str | None = None) -> Profile:
    """Assemble a profile and its canonical name; raises UnknownProfileError for an unknown OS/flavour."""
    toolkit = matrix.cuda.get(variant.cuda)
    base_name = f"{fw.name}-{version}-{fw.tag_of(variant.cuda)}"
    if toolkit is None:
        raise UnknownProfileError(f"{base_name}: CUDA {variant.cuda} is not declared in the matrix's [cuda] tables")
    chosen_os = default_os(matrix, release, toolkit)
    os_name = os_name or default_os(matrix, release, toolkit, python)
    if os_name not in toolkit.os or os_name not in matrix.os:
        have = ", ".join(toolkit.os)
        raise UnknownProfileError(f"{base_name}: no {os_name} base image for CUDA {variant.cuda} (have: {have})")
    os_info = matrix.os[os_name]
    flavor = _flavor(matrix, variant, flavor, base_name)
    chosen = python or default_python(release, os_info)
    if chosen not in release.python:
        has = ", ".join(release.python)
        raise UnknownProfileError(
            f"{base_name}: {fw.name} {release.version} has no wheels for Python {chosen} (has: {has})"
        )
    default_flavor = matrix.base.default_flavor(variant)
    suffix = [s for s, default in ((os_name, chosen_os), (flavor, default_flavor)) if s != default]
    if python and python != default_python(release, os_info):
        suffix.append(f"py{python}")
    tag = matrix.base.tag.format(cuda_release=toolkit.release, cuda=variant.cuda, flavor=flavor, os=os_name)
    base = parse_reference(f"{matrix.base.repository}:{tag}")
    return Profile("-".join([base_name, *suffix]), fw, release, variant, toolkit, os_info, flavor, chosen, base)


def _flavor(matrix: Matrix, variant: Variant, flavor: str | None, base_name: str) -> str:
    """``flavor``, or the variant's default; raises UnknownProfileError for a flavour the variant cannot use
    (the wheel-CUDA flavour, which has no CUDA libraries, for a build whose pins bring none)."""
    usable = matrix.base.flavors_for(variant)
    if flavor is None or flavor in usable:
        return flavor or usable[0]
    why = ("has no CUDA libraries and the build's pins bring no nvidia-* wheels"
           if flavor == matrix.base.wheel_cuda_flavor else "is not in [base] flavors")
    raise UnknownProfileError(f"{base_name}: flavour {flavor} {why} (flavours: {', '.join(usable)})")


def list_profiles(matrix: Matrix, framework: str | None = None) -> list[Profile]:
    """Every listed profile: each minor line's newest release x CUDA variant x OS x flavour."""
    out: list[Profile] = []
    for name in sorted(matrix.frameworks):
        if framework and name != framework:
            continue
        fw = matrix.frameworks[name]
        seen: set[str] = set()
        for release in fw.releases:
            if release.minor in seen:
                continue
            seen.add(release.minor)
            for variant in release.variants:
                oses = [o for o in matrix.cuda[variant.cuda].os if available_pythons(release, matrix.os[o])]
                for os_name in oses or matrix.cuda[variant.cuda].os[:1]:
                    for flavor in matrix.base.flavors_for(variant):
                        out.append(build_profile(matrix, fw, release, variant, release.minor, os_name, flavor))
    return out


def resolvable_profiles(matrix: Matrix) -> list[Profile]:
    """Every profile a name can resolve to: each release (not only each line's newest) x CUDA variant x OS of its
    base images x Python that OS provides for it x flavour, named with the full release version.  ``validate``
    runs every rule over them; a variant none of whose Pythons any OS provides contributes nothing (see
    :func:`unbuildable_variants`)."""
    out: list[Profile] = []
    for name in sorted(matrix.frameworks):
        fw = matrix.frameworks[name]
        for release in fw.releases:
            for variant in release.variants:
                for os_name in matrix.cuda[variant.cuda].os:
                    for python in available_pythons(release, matrix.os[os_name]):
                        for flavor in matrix.base.flavors_for(variant):
                            out.append(build_profile(matrix, fw, release, variant, release.version, os_name, flavor,
                                                     python))
    return out


def unbuildable_variants(matrix: Matrix) -> list[tuple[Framework, Release, Variant]]:
    """The (framework, release, variant) triples no name resolves to: no OS of the variant's CUDA provides a
    Python the release can be installed on."""
    return [(fw, release, variant) for fw in matrix.frameworks.values() for release in fw.releases
            for variant in release.variants
            if not any(available_pythons(release, matrix.os[o]) for o in matrix.cuda[variant.cuda].os)]


def _unknown(name: str, matrix: Matrix, why: str) -> UnknownProfileError:
    try:
        names = [p.name for p in list_profiles(matrix)]
    except UnknownProfileError:
        names = []
    close = closest_names(name or "", names)
    hint = f"; closest: {', '.join(close)}" if close else ""
    return UnknownProfileError(f"profile {name!r} {why}{hint}")


def closest_names(name: str, names: list[str], n: int = 5) -> list[str]:
    """Up to ``n`` similar names, those sharing the longest prefix with ``name`` first."""
    similar = difflib.get_close_matches(name, names, n=3 * n, cutoff=0.5)
    shared = lambda other: len(os.path.commonprefix([name, other]))  # noqa: E731
    return sorted(similar, key=lambda other: (-shared(other), similar.index(other)))[:n]
