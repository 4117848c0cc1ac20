"""The system lock: the exact Debian/Ubuntu packages the apt steps of an image install, beside the Python lock.

A profile's image runs apt in two steps when its base lacks what they install (``templates/partials/python.j2``:
Python with ``venv`` and ``ensurepip``; ``jit.j2``: the framework's ``jit_packages``).  Unpinned, those steps install
whatever the archive serves on the day of the build.  A system lock records, per step, every package apt installs
there (the whole closure, not only the names asked for) as ``name=version`` with the archive it came from, made by
asking apt in the pinned base image itself (``apt-get install --simulate``); a build with one installs exactly those
versions (``apt-get install name=version ...``) and fails with one line naming a version the archive no longer serves.

Example (``torch-12.1.1-base-ubuntu22.04-py3.11.apt.lock``, next to the Python locks)::

    # imagectl system lock: torch on nvidia/cuda:12.1.1-base-ubuntu22.04, Python 3.11
    # base: nvidia/cuda:12.1.1-base-ubuntu22.04@sha256:34782f34...
    # platform: linux/amd64
    # archive: the base image's apt sources       (or: mirror URL / snapshot YYYYMMDDTHHMMSSZ)
    # asked: 2026-12-02 (apt-get install --simulate in the base image)
    # source: imagectl lock torch-2.3.1-cu121-py3.11 --system (buildah)
    [python]
    libpython3.11-minimal=3.11.0~rc1-1~22.04 Ubuntu:22.04/jammy-updates amd64
    ...
    [jit]
    # none: the base image has every package of this step

A step without package lines installs nothing (the comment says why: the base has them).  The file is pure data:
:func:`format_system_lock` and :func:`parse_system_lock` are inverse, and every name, version and archive passes a
strict grammar before it can reach a Dockerfile.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cached_property

from ..errors import InputError, ValidationError
from ..grammar import check_deb_package
from .lockfile import DEFAULT_PLATFORM, platform_suffix

SUFFIX = ".apt.lock"  # never "*.txt": the Python locks' directory listing (lock --check) must not read it
STEPS = ("python", "jit")  # the apt steps, in build order
HEADER_KEYS = ("base", "platform", "archive", "asked", "source")
_TITLE_RE = re.compile(r"# imagectl system lock: (?P<framework>[a-z][a-z0-9_]*) on (?P<base>[^ ]+), "
                       r"Python (?P<python>3\.[0-9]{1,2})")
# Debian policy 5.6.12: [epoch:]upstream[-revision]; upstream starts with a digit, no shell metacharacters
_DEB_VERSION_RE = re.compile(r"(?:[0-9]{1,9}:)?[0-9][A-Za-z0-9.+~]*(?:-[A-Za-z0-9.+~]+)*")
# apt's "Origin:Version/Suite" of each archive that offers the version (comma-separated), e.g. Debian:12.5/stable
_ARCHIVE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.:/_+~-]*(?:,[A-Za-z0-9][A-Za-z0-9.:/_+~-]*)*")
_ARCH_RE = re.compile(r"[a-z0-9]+")
# one line of `apt-get install --simulate`: "Inst NAME [OLD] (VERSION ARCHIVE[, ARCHIVE...] [ARCH])"
_INST_RE = re.compile(r"Inst (?P<name>\S+) (?:\[[^\]]*\] )?"
                      r"\((?P<version>\S+) (?P<archive>[^\[]*?) ?\[(?P<arch>[^\]]+)\]\)(?: \[[^\]]*\])?")


def check_deb_version(value: object, what: str = "OS package version") -> str:
    """A Debian package version (``4:11.2.0-1ubuntu1``, ``3.11.0~rc1-1~22.04``); raises ValidationError otherwise."""
    if not isinstance(value, str) or len(value) > 128 or not _DEB_VERSION_RE.fullmatch(value):
        shown = repr(value)[:60]
        raise ValidationError(f"{what}: {shown} is not a Debian version ([epoch:]upstream[-revision] of "
                              "[A-Za-z0-9.+~])")
    return value


@dataclass(frozen=True)
class AptPackage:
    """One package an apt step installs: name, exact version, the archive(s) apt took it from and its architecture."""

    name: str
    version: str
    archive: str
    arch: str

    @property
    def pin(self) -> str:
        """``name=version``: what ``apt-get install`` is given."""
        return f"{self.name}={self.version}"

    @property
    def line(self) -> str:
        """The package's line in the file."""
        return f"{self.pin} {self.archive} {self.arch}"


def apt_package(name: str, version: str, archive: str, arch: str, where: str = "system lock") -> AptPackage:
    """A validated AptPackage; raises ValidationError naming ``where``."""
    check_deb_package(name, f"{where}: package")
    check_deb_version(version, f"{where}: {name} version")
    if not _ARCHIVE_RE.fullmatch(archive):
        raise ValidationError(f"{where}: {name}: archive {archive[:60]!r} is not Origin:Version/Suite[,...]")
    if not _ARCH_RE.fullmatch(arch):
        raise ValidationError(f"{where}: {name}: architecture {arch[:20]!r} is not [a-z0-9]+")
    return AptPackage(name, version, archive, arch)


@dataclass(frozen=True)
class SystemLockHeader:
    """What a system lock was made for and from: the framework (its ``jit_packages``), the base image as the matrix
    names it and the digest apt was asked in, the Python, the platform, the archive apt read, the day and the
    command that remakes it."""

    framework: str
    base: str  # the public base reference, without a digest (nvidia/cuda:12.1.1-base-ubuntu22.04)
    digest: str  # sha256:... of the base the lock was made in
    python: str
    platform: str = DEFAULT_PLATFORM
    archive: str = "the base image's apt sources"
    asked: str = ""
    source: str = ""

    @property
    def lock_id(self) -> str:
        """``torch-12.1.1-base-ubuntu22.04-py3.11`` (``-aarch64`` for linux/arm64): the file name without
        :data:`SUFFIX`."""
        return system_lock_id(self.framework, self.base, self.python, self.platform)


@dataclass(frozen=True)
class SystemLock:
    """A system lock: its header and, per apt step (:data:`STEPS`), the packages apt installs there (empty: none)."""

    header: SystemLockHeader
    steps: tuple[tuple[str, tuple[AptPackage, ...], str], ...]  # (step, packages, why none) in STEPS order

    def packages(self, step: str) -> tuple[AptPackage, ...]:
        """The packages ``step`` installs (sorted by name); () when it installs none."""
        return next((packages for name, packages, _ in self.steps if name == step), ())

    def note(self, step: str) -> str:
        """Why ``step`` installs nothing ("" when it installs something)."""
        return next((why for name, _, why in self.steps if name == step), "")

    @property
    def text(self) -> str:
        """The file's text (:func:`format_system_lock`)."""
        return format_system_lock(self)

    @cached_property
    def sha256(self) -> str:
        """The sha256 of the file's bytes."""
        return hashlib.sha256(self.text.encode()).hexdigest()


def base_tag_id(base: str) -> str:
    """The file-name part of a base reference: its tag (``12.1.1-base-ubuntu22.04``), else its last path part."""
    name, _, tag = base.rpartition(":")
    return tag if name and "/" not in tag else base.rsplit("/", 1)[-1]


def system_lock_id(framework: str, base: str, python: str, platform: str = DEFAULT_PLATFORM) -> str:
    """The identity of a system lock: one per framework (its JIT packages), base image, Python and platform."""
    return f"{framework}-{base_tag_id(base)}-py{python}{platform_suffix(platform)}"


def format_system_lock(lock: SystemLock) -> str:
    """The file's text: header, then each step's section (pure, deterministic)."""
    h = lock.header
    lines = [f"# imagectl system lock: {h.framework} on {h.base}, Python {h.python}",
             f"# base: {h.base}@{h.digest}", f"# platform: {h.platform}", f"# archive: {h.archive}",
             f"# asked: {h.asked}", f"# source: {h.source}"]
    for step, packages, why in lock.steps:
        lines.append(f"[{step}]")
        lines += [p.line for p in sorted(packages, key=lambda p: p.name)] or [f"# none: {why}"]
    return "\n".join(lines) + "\n"


def parse_system_lock(text: str, where: str) -> SystemLock:
    """Read a system lock file; raises InputError naming ``where`` and the line for anything it cannot read."""
    lines = text.splitlines()
    title = _TITLE_RE.fullmatch(lines[0].strip()) if lines else None
    if not title:
        raise InputError(f"{where}:1: not an imagectl system lock (expected '# imagectl system lock: FRAMEWORK on "
                         "BASE, Python X.Y')")
    fields, number = _header_fields(lines, where)
    base, _, digest = fields["base"].partition("@")
    if base != title["base"] or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise InputError(f"{where}:2: expected '# base: {title['base']}@sha256:<64 hex>'")
    header = SystemLockHeader(title["framework"], base, digest, title["python"], fields["platform"],
                              fields["archive"], fields["asked"], fields["source"])
    return SystemLock(header, _parse_steps(lines[number:], number + 1, where))


def _header_fields(lines: list[str], where: str) -> tuple[dict[str, str], int]:
    fields: dict[str, str] = {}
    number = 1
    for number, line in enumerate(lines[1:], start=1):
        if not line.startswith("# "):
            break
        key, sep, value = line[2:].partition(": ")
        if not sep or key not in HEADER_KEYS:
            raise InputError(f"{where}:{number + 1}: unknown header line (known: {', '.join(HEADER_KEYS)})")
        fields[key] = value.strip()
    else:
        number = len(lines)
    missing = [k for k in HEADER_KEYS if k not in fields]
    if missing:
        raise InputError(f"{where}:{number + 1}: the header lacks '# {missing[0]}: ...'")
    return fields, number


def _parse_steps(lines: list[str], first: int, where: str) -> tuple[tuple[str, tuple[AptPackage, ...], str], ...]:
    found: dict[str, tuple[list[AptPackage], list[str]]] = {}
    current: str | None = None
    for number, raw in enumerate(lines, start=first):
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            if current not in STEPS or current in found:
                raise InputError(f"{where}:{number}: expected one section of each of {', '.join(STEPS)}, got {line}")
            found[current] = ([], [])
        elif current is None or not line:
            if line:
                raise InputError(f"{where}:{number}: a package line before the first [step] section")
        elif line.startswith("# none: "):
            found[current][1].append(line.removeprefix("# none: "))
        elif not line.startswith("#"):
            found[current][0].append(_package_line(line, f"{where}:{number}"))
    if tuple(found) != STEPS:
        raise InputError(f"{where}: expected the sections {', '.join(f'[{s}]' for s in STEPS)} in that order")
    return tuple((step, tuple(sorted(pkgs, key=lambda p: p.name)), " ".join(why))
                 for step, (pkgs, why) in found.items())


def _package_line(line: str, where: str) -> AptPackage:
    parts = line.split()
    name, sep, version = parts[0].partition("=") if parts else ("", "", "")
    if len(parts) != 3 or not sep:
        raise InputError(f"{where}: expected 'name=version ARCHIVE ARCH'")
    try:
        return apt_package(name, version, parts[1], parts[2], where)
    except ValidationError as exc:
        raise InputError(str(exc)) from None


def parse_simulation(output: str, where: str = "apt-get --simulate") -> tuple[AptPackage, ...]:
    """The packages of the ``Inst`` lines of ``apt-get install --simulate`` output (other lines skipped), sorted;
    raises ValidationError for an ``Inst`` line whose parts fail the grammar."""
    out = {}
    for line in output.splitlines():
        match = _INST_RE.fullmatch(line.strip())
        if match:
            # a label may hold spaces ("NVIDIA CUDA"): one word per archive in the file
            archive = ",".join(part.strip().replace(" ", "_") for part in match["archive"].split(","))
            out[match["name"]] = apt_package(match["name"], match["version"], archive, match["arch"], where)
        elif line.startswith("Inst "):
            raise ValidationError(f"{where}: cannot read apt's line {line.strip()[:100]!r}")
    return tuple(sorted(out.values(), key=lambda p: p.name))
