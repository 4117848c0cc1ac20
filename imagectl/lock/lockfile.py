"""The lock file: a pip requirements file in hash-checking mode, with a header that is its source.

Example::

    # imagectl lock: torch 2.3.1 (cu121), Python 3.11
    # index: https://pypi.org/simple
    # platform: x86_64-manylinux_2_28
    # as-of: 2024-06-12 (release: torch 2.3.1 uploaded 2024-06-05, plus 7 days)
    # floors: setuptools 65.4.1 -> 65.5.1 (CVE-2022-40897 ...)      (only when a security floor lifted a package)
    # inputs: torch==2.3.1 torchaudio==2.3.1 torchvision==0.18.1 nvidia-cudnn-cu12==8.9.2.26 ...
    # source: resolved by uv pip compile from the index's metadata; remake: imagectl lock torch-2.3.1-cu121-py3.11
    filelock==3.15.1 \\
        --hash=sha256:58a2549a...

A lock of another platform than linux/amd64 says it in the title (``..., Python 3.12, linux/arm64``), its platform line
(``aarch64-manylinux_2_28``) and its id (``torch-2.15.0-cu132-py3.12-aarch64``).

Every package line is ``name==version`` with its ``--hash=sha256:`` lines, sorted by name, hashes sorted: the
same inputs give the same bytes.  :func:`format_lock` and :func:`parse_lock` are pure and inverse.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property

from ..errors import InputError
from ..grammar import check_package_name, check_version

# as-of values that are no date (no cut-off): ``latest`` asked for, ``none`` for an index without upload times
UNDATED = ("latest", "none")
HEADER_KEYS = ("index", "platform", "as-of", "inputs", "source")  # after the first line, in this order
# optional header lines: "floors" (after as-of) says which security floor lifted which package past the as-of date
OPTIONAL_KEYS = ("floors",)
_TITLE_RE = re.compile(r"# imagectl lock: (?P<framework>[a-z0-9._-]+) (?P<version>[^ ]+) \((?P<build>[a-z0-9._-]+)\), "
                       r"Python (?P<python>[0-9]+\.[0-9]+)(?:, (?P<oci>linux/[a-z0-9]+))?")
# The resolver's platform of each OCI platform an image is built for (uv's --python-platform).  A lock of
# linux/amd64 (x86_64) keeps its id and title as before; another platform's lock says it in both
# (``torch-2.15.0-cu132-py3.12-aarch64``, ``..., Python 3.12, linux/arm64``).
RESOLVER_PLATFORMS = {"linux/amd64": "x86_64-manylinux_2_28", "linux/arm64": "aarch64-manylinux_2_28"}
DEFAULT_PLATFORM = "linux/amd64"


def oci_platform(resolver_platform: str) -> str:
    """The OCI platform of a lock's ``platform`` header (``aarch64-manylinux_2_28`` -> ``linux/arm64``): by its
    machine, so a lock for another manylinux level keeps its platform; ``linux/amd64`` for an unknown machine (the
    locks made before platforms were facts)."""
    machine = resolver_platform.split("-", 1)[0]
    return next((oci for oci, p in RESOLVER_PLATFORMS.items() if p.split("-", 1)[0] == machine), DEFAULT_PLATFORM)


def platform_suffix(platform: str) -> str:
    """``""`` for linux/amd64 (its locks keep their ids), else ``-`` and the machine: ``-aarch64``."""
    return "" if platform == DEFAULT_PLATFORM else "-" + RESOLVER_PLATFORMS[platform].split("-", 1)[0]
_LINE_RE = re.compile(r"(?P<name>[A-Za-z0-9._-]+)==(?P<version>[A-Za-z0-9.+!_-]+)")
_HASH_RE = re.compile(r"--hash=sha256:(?P<hex>[0-9a-f]{64})")
_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """The PEP 503 normalised name (``Typing_Extensions`` -> ``typing-extensions``): what packaging's
    ``canonicalize_name`` returns, without importing packaging.tags on every start of ``show``."""
    return _SEPARATORS.sub("-", name).lower()


@dataclass(frozen=True)
class LockedPackage:
    """One package of a lock: canonical name, exact version, the sha256 of every file it may install."""

    name: str
    version: str
    hashes: tuple[str, ...]

    def lines(self) -> list[str]:
        """The package's lines in a requirements file (hash-checking mode)."""
        hashes = [f"    --hash=sha256:{h}" for h in self.hashes]
        head = f"{self.name}=={self.version}"
        if not hashes:
            return [head]
        return [f"{head} \\", *[h + " \\" for h in hashes[:-1]], hashes[-1]]


@dataclass(frozen=True)
class LockHeader:
    """What a lock was resolved for: its identity and where it came from."""

    framework: str
    version: str
    build: str  # the CUDA build's tag: cu121, cuda12
    python: str
    index: str  # without credentials
    platform: str
    as_of: str  # a date YYYY-MM-DD, or "latest"
    as_of_note: str = ""  # why that date ("release: torch 2.3.1 uploaded 2024-06-05, plus 7 days")
    inputs: tuple[str, ...] = ()
    source: str = ""
    # the security floors that lifted a package past the as-of date ("setuptools 65.4.1 -> 65.5.1 (CVE-2022-40897
    # ...)"), "; "-separated; "" when none did
    floors: str = ""

    @property
    def oci_platform(self) -> str:
        """The OCI platform the lock is for (``linux/arm64`` for ``aarch64-manylinux_2_28``)."""
        return oci_platform(self.platform)

    @property
    def lock_id(self) -> str:
        """``torch-2.3.1-cu121-py3.11`` (``...-py3.12-aarch64`` for linux/arm64): the lock's file name without
        ``.txt``."""
        return lock_id(self.framework, self.version, self.build, self.python, self.oci_platform)


@dataclass(frozen=True)
class Lock:
    """A lock: its header and packages (sorted by name)."""

    header: LockHeader
    packages: tuple[LockedPackage, ...] = field(default=())

    @property
    def versions(self) -> dict[str, str]:
        """name -> version of every locked package."""
        return {p.name: p.version for p in self.packages}

    @property
    def text(self) -> str:
        """The file's bytes as text (:func:`format_lock`)."""
        return format_lock(self)

    @cached_property
    def sha256(self) -> str:
        """The sha256 of the file's bytes: what the build key and the image's label carry (computed once)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


def lock_id(framework: str, version: str, build: str, python: str, platform: str = DEFAULT_PLATFORM) -> str:
    """The identity of a lock: one per framework release, CUDA build, Python and platform (flavours and OSes share
    it); a linux/amd64 lock has no platform suffix (see :data:`RESOLVER_PLATFORMS`)."""
    return f"{framework}-{version}-{build}-py{python}{platform_suffix(platform)}"


def package(name: str, version: str, hashes: list[str] | tuple[str, ...]) -> LockedPackage:
    """A validated LockedPackage (canonical name, sorted unique hashes); raises ValidationError."""
    check_package_name(name, "locked package")
    check_version(version, f"locked {name} version")
    return LockedPackage(canonical_name(name), version, tuple(sorted(set(hashes))))


def format_lock(lock: Lock) -> str:
    """The lock file's text: header, then every package sorted by name (pure, deterministic)."""
    h = lock.header
    as_of = f"{h.as_of} ({h.as_of_note})" if h.as_of_note else h.as_of
    oci = "" if h.oci_platform == DEFAULT_PLATFORM else f", {h.oci_platform}"
    lines = [f"# imagectl lock: {h.framework} {h.version} ({h.build}), Python {h.python}{oci}",
             f"# index: {h.index}", f"# platform: {h.platform}", f"# as-of: {as_of}",
             *([f"# floors: {h.floors}"] if h.floors else []),
             f"# inputs: {' '.join(h.inputs)}", f"# source: {h.source}"]
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        lines += pkg.lines()
    return "\n".join(lines) + "\n"


def requirement_lines(packages: tuple[LockedPackage, ...] | list[LockedPackage]) -> str:
    """The package lines of ``packages`` (sorted), without a header: one install layer's requirements."""
    return "".join(line + "\n" for pkg in sorted(packages, key=lambda p: p.name) for line in pkg.lines())


def added_packages(closure: tuple[LockedPackage, ...] | list[LockedPackage], lock: Lock) -> dict[str, str]:
    """name -> version of the packages of ``closure`` (a team's extras, locked on top of ``lock``) that ``lock``
    does not have (pure)."""
    locked = lock.versions
    return {p.name: p.version for p in closure if p.name not in locked}


def constraints_text(versions: dict[str, str]) -> str:
    """``name==version`` per line, sorted: a pip constraints file (``PIP_CONSTRAINT``) of a lock."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(versions.items()))


def parse_lock(text: str, where: str) -> Lock:
    """Read a lock file; raises InputError naming ``where`` and the line for anything it cannot read."""
    lines = text.splitlines()
    if not lines:
        raise InputError(f"{where}: empty lock file")
    title = _TITLE_RE.fullmatch(lines[0].strip())
    if not title:
        raise InputError(f"{where}:1: not an imagectl lock (expected '# imagectl lock: FRAMEWORK VERSION (BUILD), "
                         "Python X.Y')")
    fields: dict[str, str] = {}
    body_start = 1
    for number, line in enumerate(lines[1:], start=2):
        if not line.startswith("# "):
            break
        key, sep, value = line[2:].partition(": ")
        if not sep or key not in HEADER_KEYS + OPTIONAL_KEYS:
            raise InputError(f"{where}:{number}: unknown header line (known: {', '.join(HEADER_KEYS + OPTIONAL_KEYS)})")
        fields[key] = value.strip()
        body_start = number
    missing = [k for k in HEADER_KEYS if k not in fields]
    if missing:
        raise InputError(f"{where}:{body_start + 1}: expected the header line '# {missing[0]}: ...' (the header "
                         f"lacks {', '.join(missing)})")
    if (title["oci"] or DEFAULT_PLATFORM) != oci_platform(fields["platform"]):
        raise InputError(f"{where}:1: the title says {title['oci'] or DEFAULT_PLATFORM}, the platform line "
                         f"{fields['platform']} ({oci_platform(fields['platform'])})")
    as_of, _, note = fields["as-of"].partition(" (")
    header = LockHeader(framework=title["framework"], version=title["version"], build=title["build"],
                        python=title["python"], index=fields["index"], platform=fields["platform"], as_of=as_of,
                        as_of_note=note[:-1] if note.endswith(")") else note,
                        inputs=tuple(fields["inputs"].split()), source=fields["source"],
                        floors=fields.get("floors", ""))
    return Lock(header, tuple(parse_packages(lines[body_start:], body_start + 1, where)))


def parse_packages(lines: list[str], first: int, where: str) -> list[LockedPackage]:
    """The packages of requirement lines in hash-checking mode (comments and blank lines skipped), sorted by
    name; raises InputError naming ``where`` and the line for anything else, a package locked twice or one
    without a hash."""
    out: list[LockedPackage] = []
    current: tuple[str, str, list[str], int] | None = None
    for number, raw in enumerate(lines, start=first):
        line = raw.strip().removesuffix("\\").strip()
        if not line or line.startswith("#"):
            continue
        hashed = _HASH_RE.fullmatch(line) if line.startswith("--") else None  # most lines: test that one first
        match = None if hashed else _LINE_RE.fullmatch(line)
        if match:
            if current:
                out.append(package(current[0], current[1], current[2]))
            current = (match["name"], match["version"], [], number)
        elif hashed and current:
            current[2].append(hashed["hex"])
        else:
            raise InputError(f"{where}:{number}: expected 'name==version' or '--hash=sha256:HEX'")
    if current:
        out.append(package(current[0], current[1], current[2]))
    names = [p.name for p in out]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})[0]
        raise InputError(f"{where}: {twice} is locked twice")
    for pkg in out:
        if not pkg.hashes:
            raise InputError(f"{where}: {pkg.name}=={pkg.version} has no --hash (a lock holds every file's sha256)")
    return sorted(out, key=lambda p: p.name)
