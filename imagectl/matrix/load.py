"""Loading matrix TOML files into a :class:`Matrix`: the only code that reads matrix TOML.

Files are read in order (the shipped matrices first, then each user directory); a later file adds
frameworks, toolkits, OSes and GPUs, and replaces entries with the same key (a release with the same version
replaces the earlier one).  Every schema error names the file and the line; a key no table of that kind
has (a typo like ``pin =``) is an error naming the nearest valid key, never silently ignored.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from datetime import date
from pathlib import Path
from string import Formatter
from typing import Any, Callable, Iterable, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from ..errors import MatrixError, ValidationError
from ..reference import check_tag, parse_reference
from ..requirements import check_requirement
from ..tomlfile import key_line, line_of, parse_toml, table_line
from ..grammar import (
    check_byte_size,
    check_deb_package,
    check_driver,
    driver_key,
    check_package_name,
    check_python,
    check_token,
    check_url,
    check_version,
)
from .model import BaseImages, CudaToolkit, Framework, Gpu, LockFloor, Matrix, OsInfo, Release, Variant
from .names import check_name_part, check_release_version
from .platforms import PlatformFacts, build_platforms, with_platforms
from .sources import MatrixSources, read_sources

_TOP_KEYS = {"base", "os", "cuda", "gpus", "driver_lists", "lock", "framework", "release", "platforms"}
# table -> the keys it may have: the one declaration of the matrix schema's keys.
KEYS: dict[str, frozenset[str]] = {
    "base": frozenset({"repository", "flavors", "tag", "wheel_cuda_flavor", "forward_compat_brands"}),
    "os": frozenset({"python", "apt_python"}),
    "cuda": frozenset({"release", "min_driver", "min_driver_compat", "archs", "os", "forward_compat", "end_of_life",
                       "eol_since", "require_brands"}),
    "gpus": frozenset({"arch", "min_driver", "last_branch", "segment", "pci", "host", "names"}),
    "driver_lists": frozenset({"source", "first", "newest", "releases", "listed", "missing"}),
    "lock": frozenset({"floors"}),
    "lock.floors": frozenset({"package", "version", "uploaded", "source"}),
    "framework": frozenset({"name", "label", "package", "companions", "cuda_tag", "index_url", "pypi_index_url",
                            "check", "jit_packages", "layers", "pin_extras", "lock_requires", "size_budget"}),
    "release": frozenset({"version", "python", "companions", "variant", "unavailable"}),
    "release.variant": frozenset({"cuda", "pypi", "cudnn", "nccl", "archs", "pins", "unverified"}),
    "platforms.build": frozenset({"platforms", "evidence", "pins"}),  # [platforms.FW."VERSION"."CUDA"]
}
BASE_TAG_FIELDS = ("cuda_release", "cuda", "flavor", "os")
CUDA_TAG_FIELDS = ("major", "minor")
JIT_PACKAGE_FIELDS = ("python",)
CHECK_MAIN = "main"  # templates/check/main.py.j2 includes check/<check>.py.j2: a framework cannot use it
# the check partials that are not a framework's own (main.py.j2 or torch.py.j2 include them): not a check name
RESERVED_CHECKS = frozenset({CHECK_MAIN, "libraries", "torch_compile", "cuda_toolchain"})
Start = Callable[[], int]  # where a table starts in its file: looked up only when there is an error to report
_SM_ARCH = re.compile(r"sm_[0-9]{2,3}")
# a build's GPU code (a variant's archs): a cubin sm_XY or PTX compute_XY, as torch.cuda.get_arch_list() prints them
_BUILD_ARCH = re.compile(r"(sm|compute)_[0-9]{2,3}")
SEGMENTS = ("datacenter", "workstation", "consumer")
HOSTS = ("x86_64", "aarch64")  # uname -m of a host
_PCI = re.compile(r"[0-9A-F]{4}( [0-9A-F]{4} [0-9A-F]{4})?")  # a device ID, or device, subsystem vendor and device
_BRAND = re.compile(r"[a-z][a-z0-9]*")  # an NVML brand as the container runtime names it: tesla, nvidiartx


def _first_line() -> int:
    return 1


class _Source:
    """A file being read: turns a problem into ``FILE:LINE: message``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, message: str, needle: str = "", start: Start = _first_line) -> MatrixError:
        line = line_of(self.path, needle, start()) if needle else start()
        return MatrixError(f"{self.path}:{line}: {message}")

    def line(self, needle: str) -> Start:
        """Where the first line with ``needle`` is (line 1 when none has it)."""
        return lambda: line_of(self.path, needle)

    def table_start(self, header: str, needle: str, start: Start = _first_line) -> Start:
        """Where the ``header`` table starts that holds the first line from ``start`` on with ``needle``."""
        return lambda: table_line(self.path, header, line_of(self.path, needle, start())) if needle else start()

    def known_keys(self, body: dict[str, Any], table: str, where: str, start: Start = _first_line) -> None:
        """Raise MatrixError at the line of the first key of ``body`` that ``KEYS[table]`` lacks, naming the
        nearest valid key (or all of them)."""
        allowed = sorted(KEYS[table])
        for key in body:
            if key not in KEYS[table]:
                close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(allowed)}"
                line = key_line(self.path, key, start())
                raise MatrixError(f"{self.path}:{line}: unknown key {key!r} in {where} ({hint})")

    def check(self, func: Any, value: Any, what: str, needle: str) -> Any:
        try:
            return func(value, what)
        except ValidationError as exc:
            raise self.error(str(exc), needle) from None


def load_matrix(dirs: Sequence[Path]) -> Matrix:
    """Read and merge the matrices of ``dirs``; raises MatrixError naming file and line."""
    return load_sources(read_sources(dirs))


def load_sources(sources: MatrixSources) -> Matrix:
    """Parse and merge the matrix files of ``sources`` (read by :func:`~.sources.read_sources`); raises MatrixError
    naming file and line."""
    parts: dict[str, dict[str, Any]] = {"os": {}, "cuda": {}, "gpus": {}, "frameworks": {}}
    lists: dict[str, tuple[_Source, tuple[str, ...], tuple[str, ...]]] = {}
    floors: dict[str, LockFloor] = {}
    platforms: dict[tuple[str, str, str], tuple[Any, PlatformFacts]] = {}
    base: BaseImages | None = None
    for path, content in sources.files:
        src = _Source(path)
        data = parse_toml(content, path, MatrixError)
        unknown = set(data) - _TOP_KEYS
        if unknown:
            name = sorted(unknown)[0]
            raise src.error(f"unknown top-level key {name!r} (known: {', '.join(sorted(_TOP_KEYS))})", name)
        if "base" in data:
            base = _base(src, data["base"])
        parts["os"].update(_table(src, data, "os", _os))
        parts["cuda"].update(_table(src, data, "cuda", _cuda))
        parts["gpus"].update(_gpus(src, data.get("gpus", {})))
        lists.update(_driver_lists(src, data["driver_lists"]) if "driver_lists" in data else {})
        floors.update(_lock_floors(src, data["lock"]) if "lock" in data else {})
        platforms.update(build_platforms(src, data["platforms"]) if "platforms" in data else {})
        if "framework" in data or "release" in data:
            fw = _framework(src, data)
            parts["frameworks"][fw.name] = _merge_framework(parts["frameworks"].get(fw.name), fw)
    if base is None:
        raise MatrixError(f"{', '.join(str(d) for d in sources.dirs)}: no matrix file declares [base]")
    parts["gpus"] = _with_lists(parts["gpus"], lists)
    parts["cuda"] = {k: replace(t, forward_compat_brands=t.forward_compat_brands or base.forward_compat_brands)
                     for k, t in parts["cuda"].items()}
    lock_floors = tuple(floors[name] for name in sorted(floors))
    parts["frameworks"] = {k: replace(fw, lock_floors=lock_floors) for k, fw in parts["frameworks"].items()}
    parts["frameworks"] = with_platforms(parts["frameworks"], platforms)
    matrix = Matrix(base=base, files=tuple(path for path, _ in sources.files), lock_floors=lock_floors, **parts)
    _check_references(matrix)
    return matrix


def _with_lists(gpus: dict[str, Gpu], lists: dict[str, tuple[_Source, tuple[str, ...], tuple[str, ...]]]
                ) -> dict[str, Gpu]:
    """``gpus`` with the generated driver lists (``[driver_lists]``) of each GPU; raises MatrixError for a list of a
    GPU no ``[gpus]`` table declares."""
    out = dict(gpus)
    for name, (src, listed, missing) in lists.items():
        if name not in out:
            raise src.error(f"[driver_lists] {name!r} is not a GPU of any [gpus] table", f'"{name}"')
        out[name] = replace(out[name], listed=listed, missing=missing)
    return out


def _driver_lists(src: _Source, body: Any) -> dict[str, tuple[_Source, tuple[str, ...], tuple[str, ...]]]:
    """``[driver_lists]`` (matrices/gpu-drivers.toml, generated by tools/gpu_driver_lists.py): per GPU the release
    ranges ``FIRST..LAST`` (one branch each) whose supported-GPU list does and does not name it; raises
    MatrixError naming the line."""
    body = _as_table(src, body, "driver_lists")
    src.known_keys(body, "driver_lists", "[driver_lists]", src.line("[driver_lists]"))
    tables = {key: _as_table(src, body.get(key, {}), f"driver_lists.{key}") for key in ("listed", "missing")}
    for version, where in _as_table(src, body.get("releases", {}), "driver_lists.releases").items():
        src.check(check_driver, version, "[driver_lists.releases]", f'"{version}"')
        if not isinstance(where, str) or not where:
            raise src.error(f"[driver_lists.releases] {version!r}: where its list was read must be a string",
                            f'"{version}"')
    out = {}
    for name in sorted(set(tables["listed"]) | set(tables["missing"])):
        ranges = [tuple(_driver_range(src, r, name) for r in
                        _strings(src, tables[key].get(name, []), f"[driver_lists.{key}] {name!r}", f'"{name}"'))
                  for key in ("listed", "missing")]
        out[name] = (src, ranges[0], ranges[1])
    return out


def _driver_range(src: _Source, text: str, name: str) -> str:
    """``FIRST..LAST``: two driver versions of one branch, in order; raises MatrixError otherwise."""
    first, sep, last = text.partition("..")
    if not sep:
        raise src.error(f"[driver_lists] {name!r}: {text!r} is not FIRST..LAST within one driver branch", f'"{name}"')
    ends = [src.check(check_driver, v, f"[driver_lists] {name!r} range {text!r}", f'"{name}"') for v in (first, last)]
    if ends[0].split(".")[0] != ends[1].split(".")[0] or driver_key(ends[0]) > driver_key(ends[1]):
        raise src.error(f"[driver_lists] {name!r}: {text!r} is not FIRST..LAST within one driver branch", f'"{name}"')
    return text


def _lock_floors(src: _Source, body: Any) -> dict[str, LockFloor]:
    """``[lock] floors = [{ package = "setuptools", version = "65.5.1", source = "CVE-..." }]``: the security floors of
    every lock, each with its advisory; raises MatrixError naming the line."""
    body = _as_table(src, body, "lock")
    start = src.line("[lock]")
    src.known_keys(body, "lock", "[lock]", start)
    floors = body.get("floors", [])
    if not isinstance(floors, list) or not all(isinstance(f, dict) for f in floors):
        raise src.error("[lock] floors must be a list of { package, version, source } tables", "floors", start)
    out = {}
    for floor in floors:
        src.known_keys(floor, "lock.floors", "[lock] floors", start)
        package = canonical(src.check(check_package_name, _require(src, floor, "package", "lock"), "floor", "floors"))
        version = src.check(check_version, _require(src, floor, "version", "lock"), f"floor {package}", "floors")
        source = _require(src, floor, "source", "lock")
        if not isinstance(source, str) or not source.strip():
            raise src.error(f"[lock] floor {package}: source must name the advisory (CVE-...)", "floors", start)
        uploaded = _require(src, floor, "uploaded", "lock")
        if not isinstance(uploaded, str) or not _valid_day(uploaded):
            raise src.error(f"[lock] floor {package}: uploaded must be the day {version} was uploaded (YYYY-MM-DD)",
                            "floors", start)
        out[package] = LockFloor(package, version, uploaded, " ".join(source.split()))
    return out


def _valid_day(text: str) -> bool:
    try:
        return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text)) and date.fromisoformat(text) is not None
    except ValueError:
        return False


def canonical(name: str) -> str:
    """The PEP 503 normalised name of a package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _check_references(matrix: Matrix) -> None:
    """Every CUDA a variant names and every OS a toolkit names must be declared somewhere."""
    for toolkit in matrix.cuda.values():
        for os_name in toolkit.os:
            if os_name not in matrix.os:
                raise MatrixError(f"[cuda.{toolkit.version}] os {os_name!r} is not declared in any [os] table")
    for flavor in matrix.base.flavors:
        if flavor in matrix.os:
            raise MatrixError(f"[base] flavor {flavor!r} is also an OS name: profile names could not tell them apart")
    for fw, release in iter_releases(matrix):
        for variant in release.variants:
            if variant.cuda not in matrix.cuda:
                line = line_of(fw.source, f'cuda = "{variant.cuda}"')
                raise MatrixError(f"{fw.source}:{line}: {fw.name} {release.version} names CUDA {variant.cuda},"
                                  " which no [cuda] table declares")


def _table(src: _Source, data: dict[str, Any], key: str, build: Any) -> dict[str, Any]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise src.error(f"[{key}] must be a table", f"{key}")
    return {name: build(src, name, _as_table(src, body, f"{key}.{name}")) for name, body in table.items()}


def _as_table(src: _Source, body: Any, where: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise src.error(f"[{where}] must be a table", where.split(".")[-1])
    return body


def _require(src: _Source, body: dict[str, Any], key: str, where: str) -> Any:
    if key not in body:
        raise src.error(f"[{where}] is missing {key!r}", where.split(".")[-1].strip('"'))
    return body[key]


def _strings(src: _Source, value: Any, what: str, needle: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise src.error(f"{what} must be a list of strings", needle)
    return tuple(value)


def _placeholders(src: _Source, value: Any, fields: Sequence[str], what: str, start: Start) -> str:
    """``value`` if it is a str.format pattern using only ``{field}`` of ``fields`` (no index, attribute,
    conversion or format spec); raises MatrixError naming the line otherwise."""
    known = ", ".join(f"{{{f}}}" for f in fields)
    if not isinstance(value, str):
        raise src.error(f"{what} must be a string using {known}", what.split()[-1], start)
    try:
        parts = [(name, conv, spec) for _, name, spec, conv in Formatter().parse(value) if name is not None]
    except ValueError as exc:
        raise src.error(f"{what} {value!r}: {exc} (write a literal brace as {{{{ or }}}})",
                        what.split()[-1], start) from None
    for name, conv, spec in parts:
        if name not in fields or conv or spec:
            field = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise src.error(f"{what} {value!r} uses {field}; it may only use {known}", what.split()[-1], start)
    return value


def _base(src: _Source, body: Any) -> BaseImages:
    body = _as_table(src, body, "base")
    start = src.line("[base]")
    src.known_keys(body, "base", "[base]", start)
    repo = _require(src, body, "repository", "base")
    src.check(lambda v, w: parse_reference(v), repo, "base repository", "repository")
    flavor_names = _strings(src, _require(src, body, "flavors", "base"), "flavors", "flavors")
    flavors = tuple(src.check(check_token, f, "flavor", "flavors") for f in flavor_names)
    for flavor in flavors:
        src.check(lambda v, w: check_name_part(v, "suffix", w), flavor, "[base] flavor", "flavors")
    tag = _placeholders(src, _require(src, body, "tag", "base"), BASE_TAG_FIELDS, "[base] tag", start)
    if not flavors:
        raise src.error("[base] flavors must not be empty", "flavors", start)
    probe = tag.format(cuda_release="12.1.1", cuda="12.1", flavor=flavors[0], os="ubuntu22.04")
    try:
        parse_reference(f"{repo}:{check_tag(probe)}")
    except ValidationError as exc:
        raise src.error(f"[base] tag {tag!r} makes no valid reference: {exc}", "tag", start) from None
    wheel_flavor = _wheel_cuda_flavor(src, body.get("wheel_cuda_flavor"), flavors, start)
    brands = _brands(src, body.get("forward_compat_brands", []), "[base] forward_compat_brands",
                     "forward_compat_brands", start)
    return BaseImages(repository=repo, flavors=flavors, tag=tag, wheel_cuda_flavor=wheel_flavor,
                      forward_compat_brands=brands)


def _brands(src: _Source, value: Any, what: str, needle: str, start: Start = _first_line) -> tuple[str, ...]:
    """A list of NVML brand names (``tesla``, ``nvidiartx``); raises MatrixError naming the line."""
    brands = _strings(src, value, what, needle)
    for brand in brands:
        if not _BRAND.fullmatch(brand):
            raise src.error(f"{what}: {brand!r} is not a brand name such as tesla", needle, start)
    return brands


def _wheel_cuda_flavor(src: _Source, value: Any, flavors: tuple[str, ...], start: Start) -> str | None:
    """``[base] wheel_cuda_flavor``: one of ``flavors`` other than the first (the first stays the default of
    builds whose pins bring no ``nvidia-*`` wheels, which cannot use it), or None; raises MatrixError."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in flavors[1:]:
        raise src.error(f"[base] wheel_cuda_flavor {value!r} must be one of flavors after the first"
                        f" ({', '.join(flavors[1:]) or 'none'})", "wheel_cuda_flavor", start)
    return value


def _os(src: _Source, name: str, body: dict[str, Any]) -> OsInfo:
    needle = f'os."{name}"'
    src.known_keys(body, "os", f"[os.{name}]", src.line(needle))
    src.check(check_token, name, "OS name", needle)
    src.check(lambda v, w: check_name_part(v, "suffix", w), name, "OS name", needle)
    python = src.check(check_python, _require(src, body, "python", needle), f"[os.{name}] python", needle)
    apt_pythons = _strings(src, body.get("apt_python", [python]), "apt_python", needle)
    apt = tuple(src.check(check_python, p, f"[os.{name}] apt_python", needle) for p in apt_pythons)
    return OsInfo(name=name, python=python, apt_python=apt)


def _cuda(src: _Source, name: str, body: dict[str, Any]) -> CudaToolkit:
    needle = f'cuda."{name}"'
    src.known_keys(body, "cuda", f"[cuda.{name}]", src.line(needle))
    src.check(check_version, name, "CUDA version", needle)
    if len(Version(name).release) != 2:
        raise src.error(f"CUDA key {name!r} must be MAJOR.MINOR", needle)
    release = src.check(check_version, _require(src, body, "release", needle), f"[cuda.{name}] release", needle)
    drivers = [src.check(check_driver, _require(src, body, k, needle), f"[cuda.{name}] {k}", k)
               for k in ("min_driver", "min_driver_compat")]
    archs = _strings(src, _require(src, body, "archs", needle), f"[cuda.{name}] archs", "archs")
    for arch in archs:
        if not arch.startswith("sm_") or not arch[3:].isdigit():
            raise src.error(f"[cuda.{name}] archs: {arch!r} is not sm_XY", arch)
    os_names = _strings(src, _require(src, body, "os", needle), "os", "os")
    oses = tuple(src.check(check_token, o, "OS", needle) for o in os_names)
    branches = body.get("forward_compat", [])
    if not isinstance(branches, list) or not all(_is_branch(b) for b in branches) or branches != sorted(set(branches)):
        raise src.error(f"[cuda.{name}] forward_compat must list driver branches such as 535, ascending", needle)
    eol = body.get("end_of_life")
    if eol is not None and (not isinstance(eol, str) or not eol.strip()):
        raise src.error(f"[cuda.{name}] end_of_life must say why and cite the source", needle)
    since = body.get("eol_since")
    if since is not None and (not eol or not isinstance(since, str) or not _valid_day(since)):
        raise src.error(f"[cuda.{name}] eol_since must be the day (YYYY-MM-DD) the release went end of life, "
                        "given with end_of_life", "eol_since")
    brands = _brands(src, body.get("require_brands", []), f"[cuda.{name}] require_brands", needle)
    return CudaToolkit(name, release, drivers[0], drivers[1], archs, oses, forward_compat=tuple(branches),
                       end_of_life=" ".join(eol.split()) if eol else None, eol_since=since,
                       forward_compat_brands=brands)


def _is_branch(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10000


def _gpus(src: _Source, body: Any) -> dict[str, Gpu]:
    """``[gpus]``: ``"NAME" = "sm_XY"`` or ``"NAME" = { arch = "sm_XY", min_driver = "570.86.16", last_branch = 580 }``;
    raises MatrixError naming the line."""
    if not isinstance(body, dict):
        raise src.error("[gpus] must be a table of GPU name = sm_XY", "gpus")
    return {name: _gpu(src, name, value) for name, value in body.items()}


def _gpu(src: _Source, name: str, value: Any) -> Gpu:
    needle = f'"{name}"'
    fields = value if isinstance(value, dict) else {"arch": value}
    src.known_keys(fields, "gpus", f"[gpus] {name!r}", src.line(needle))
    arch = fields.get("arch")
    if not isinstance(arch, str) or not _SM_ARCH.fullmatch(arch):
        raise src.error(f"[gpus] {name!r}: {arch!r} is not sm_XY", needle)
    floor = fields.get("min_driver")
    if floor is not None:
        floor = src.check(check_driver, floor, f"[gpus] {name!r} min_driver", needle)
    last = fields.get("last_branch")
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last <= 0):
        raise src.error(f"[gpus] {name!r}: last_branch {last!r} is not a driver branch number such as 580", needle)
    if floor is not None and last is not None and int(floor.split(".")[0]) > last:
        raise src.error(f"[gpus] {name!r}: min_driver {floor} is past its last_branch R{last}", needle)
    segment = fields.get("segment")
    if segment is not None and segment not in SEGMENTS:
        raise src.error(f"[gpus] {name!r}: segment {segment!r} is not one of {', '.join(SEGMENTS)}", needle)
    pci = _strings(src, fields.get("pci", []), f"[gpus] {name!r} pci", needle)
    for value in pci:
        if not _PCI.fullmatch(value):
            raise src.error(f"[gpus] {name!r}: pci {value!r} is not a PCI ID such as 2335 or 25B6 10DE 14A9", needle)
    host = fields.get("host")
    if host is not None and host not in HOSTS:
        raise src.error(f"[gpus] {name!r}: host {host!r} is not one of {', '.join(HOSTS)}", needle)
    names = _strings(src, fields.get("names", []), f"[gpus] {name!r} names", needle)
    return Gpu(name=name, arch=arch, min_driver=floor, last_branch=last, segment=segment, pci=pci, host=host,
               names=names)


def _framework(src: _Source, data: dict[str, Any]) -> Framework:
    body = _as_table(src, data.get("framework"), "framework") if "framework" in data else None
    if body is None:
        raise src.error("a file with [[release]] entries needs a [framework] table", "release")
    start = src.line("[framework]")
    src.known_keys(body, "framework", "[framework]", start)
    get = lambda key: _require(src, body, key, "framework")  # noqa: E731
    name = src.check(check_token, get("name"), "framework name", "name")
    src.check(lambda v, w: check_name_part(v, "framework", w), name, "framework name", "name")
    releases = data.get("release", [])
    if not isinstance(releases, list):
        raise src.error("release must be an array of tables ([[release]])", "release")
    check = src.check(check_token, get("check"), "framework check", "check")
    if check in RESERVED_CHECKS:
        raise src.error(f"framework check {check!r} is reserved: templates/check/{check}.py.j2 is included by"
                        " the check of every image; name the framework's own partial", "check", start)
    return Framework(
        name=name,
        label=str(body.get("label", name)),
        package=src.check(check_package_name, get("package"), "framework package", "package"),
        companions=tuple(
            src.check(check_package_name, c, "companion", "companions")
            for c in _strings(src, body.get("companions", []), "companions", "companions")
        ),
        cuda_tag=_pattern(src, get("cuda_tag"), start),
        index_url=src.check(check_url, get("index_url"), "framework index_url", "index_url"),
        pypi_index_url=src.check(
            check_url, body.get("pypi_index_url", "https://pypi.org/simple"), "pypi_index_url", "pypi_index_url"
        ),
        check=check,
        releases=tuple(sorted((_release(src, r) for r in releases), key=lambda r: Version(r.version), reverse=True)),
        source=src.path,
        jit_packages=_jit_packages(src, body.get("jit_packages", []), start),
        lock_requires=_lock_requires(src, body.get("lock_requires", []), start),
        size_budget=(src.check(check_byte_size, body["size_budget"], "[framework] size_budget", "size_budget")
                     if "size_budget" in body else None),
        **_lock_shape(src, body, start),
    )


_LAYER_PATTERN = re.compile(r"[a-z0-9*?][a-z0-9*?._-]*")


def _lock_shape(src: _Source, body: dict[str, Any], start: Start) -> dict[str, Any]:
    """The framework's ``layers`` (``[{name = "cuda", packages = ["nvidia-*"]}, ...]``: names that are tokens,
    lower-case name patterns; optionally ``own_layer_mib``, a whole number of MiB from 1 to 4096) and
    ``pin_extras`` (``{"jax-cuda12-plugin" = ["with-cuda"]}``), as given or defaulted; raises MatrixError naming
    the line otherwise."""
    out: dict[str, Any] = {}
    if "layers" in body:
        layers = body["layers"]
        if not isinstance(layers, list) or not layers or not all(isinstance(x, dict) for x in layers):
            raise src.error("layers must be a list of {name = ..., packages = [...]} tables", "layers", start)
        built, own = [], []
        for layer in layers:
            if not {"name", "packages"} <= set(layer) <= {"name", "packages", "own_layer_mib"}:
                raise src.error("each layer has the keys name and packages, and may have own_layer_mib", "layers",
                                start)
            name = src.check(check_token, layer["name"], "layer name", "layers")
            if "own_layer_mib" in layer:
                mib = layer["own_layer_mib"]
                if isinstance(mib, bool) or not isinstance(mib, int) or not 1 <= mib <= 4096:
                    raise src.error(f"layer {name}: own_layer_mib must be a whole number of MiB from 1 to 4096, "
                                    f"not {mib!r}", "own_layer_mib", start)
                own.append((name, mib))
            patterns = _strings(src, layer["packages"], "layer packages", "layers")
            for pattern in patterns:
                if not _LAYER_PATTERN.fullmatch(pattern):
                    raise src.error(f"layer {name}: {pattern!r} is not a lower-case package name pattern", "layers",
                                    start)
            built.append((name, patterns))
        if len({n for n, _ in built}) != len(built):
            raise src.error("two layers share one name", "layers", start)
        out["layers"] = tuple(built)
        out["own_layers"] = tuple(own)
    if "pin_extras" in body:
        table = body["pin_extras"]
        if not isinstance(table, dict):
            raise src.error("pin_extras must be a table of package = [extras]", "pin_extras", start)
        out["pin_extras"] = tuple(sorted(
            (src.check(check_package_name, k, "pin_extras", "pin_extras"),
             tuple(src.check(check_token, e, f"pin_extras {k}", "pin_extras")
                   for e in _strings(src, v, f"pin_extras {k}", "pin_extras")))
            for k, v in table.items()))
    return out


def _jit_packages(src: _Source, value: Any, start: Start) -> tuple[str, ...]:
    """The framework's ``jit_packages``: OS package names that may use ``{python}`` (``python{python}-dev``),
    each a Debian package name once formatted; raises MatrixError naming the line otherwise."""
    patterns = _strings(src, value, "jit_packages", "jit_packages")
    for pattern in patterns:
        _placeholders(src, pattern, JIT_PACKAGE_FIELDS, "jit_packages", start)
        src.check(check_deb_package, pattern.format(python="3.11"), f"jit_packages {pattern!r} makes", "jit_packages")
    return patterns


def _lock_requires(src: _Source, value: Any, start: Start) -> tuple[str, ...]:
    """The framework's ``lock_requires``: PEP 508 requirements without markers or spaces (they go into a lock's
    ``# inputs:`` line, which is split on spaces); raises MatrixError naming the line otherwise."""
    out = []
    for item in _strings(src, value, "lock_requires", "lock_requires"):
        requirement = src.check(check_requirement, item, "lock_requires", "lock_requires")
        if " " in requirement or ";" in requirement:
            raise src.error(f"lock_requires {item!r}: write it without spaces or a marker (numpy, numpy>=2)",
                            "lock_requires", start)
        out.append(requirement)
    return tuple(out)


def _pattern(src: _Source, value: Any, start: Start) -> str:
    """The framework's ``cuda_tag`` pattern if every CUDA version makes a tag profile names can carry."""
    value = _placeholders(src, value, CUDA_TAG_FIELDS, "cuda_tag", start)
    for major, minor in ((12, 1), (11, 8), (13, 0)):
        probe = value.format(major=major, minor=minor)
        src.check(lambda v, w: check_name_part(v, "cuda_tag", w), probe, f"cuda_tag {value!r} makes", "cuda_tag")
    return value


def _release(src: _Source, body: Any) -> Release:
    body = _as_table(src, body, "release")
    version = body.get("version")
    start = src.table_start("[[release]]", f'version = "{version}"' if isinstance(version, str) else "")
    src.known_keys(body, "release", f"[[release]] {version or ''}".rstrip(), start)
    version = src.check(check_version, _require(src, body, "version", "release"), "release version", "version")
    needle = f'version = "{version}"'
    src.check(check_release_version, version, "release version", needle)
    python_names = _strings(src, _require(src, body, "python", needle), "python", needle)
    pythons = tuple(src.check(check_python, p, f"release {version} python", needle) for p in python_names)
    if not pythons:
        raise src.error(f"release {version}: python lists no Python (name at least one, such as \"3.11\")", needle)
    companions = _pins(src, body.get("companions", {}), f"release {version} companions", needle)
    variants = body.get("variant", [])
    if not isinstance(variants, list) or not variants:
        raise src.error(f"release {version} has no [[release.variant]]", needle)
    built = tuple(_variant(src, v, version, start) for v in variants)
    if sum(v.pypi for v in built) > 1:
        raise src.error(f"release {version}: more than one variant has pypi = true", needle)
    if len({v.cuda for v in built}) != len(built):
        raise src.error(f"release {version}: two variants share one CUDA version", needle)
    unavailable = _unavailable(src, body.get("unavailable", {}), pythons, f"release {version}", needle)
    return Release(version=version, python=pythons, companions=companions, variants=built, unavailable=unavailable)


def _unavailable(src: _Source, body: Any, pythons: tuple[str, ...], what: str,
                 needle: str) -> tuple[tuple[str, str], ...]:
    """A release's ``unavailable`` table (``{"3.13" = "why"}``): each key one of its ``python`` (a Python it
    has no wheels for is simply not listed), each reason a non-empty string; raises MatrixError otherwise."""
    if not isinstance(body, dict):
        raise src.error(f"{what} unavailable must be a table of Python = reason", needle)
    for python, reason in body.items():
        if python not in pythons:
            raise src.error(f"{what} unavailable: Python {python!r} is not in its python list"
                            f" ({', '.join(pythons)}); list only Pythons its own wheels exist for", needle)
        if not isinstance(reason, str) or not reason.strip():
            raise src.error(f"{what} unavailable {python}: the reason must be a non-empty string", needle)
    return tuple(sorted((p, " ".join(r.split())) for p, r in body.items()))


def _pins(src: _Source, body: Any, what: str, needle: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(body, dict):
        raise src.error(f"{what} must be a table of package = version", needle)
    return tuple(sorted(
        (src.check(check_package_name, k, what, needle), src.check(check_version, v, f"{what} {k}", needle))
        for k, v in body.items()
    ))


def _variant(src: _Source, body: Any, version: str, release_start: Start) -> Variant:
    body = _as_table(src, body, "release.variant")
    cuda_needle = f'cuda = "{body["cuda"]}"' if isinstance(body.get("cuda"), str) else ""
    start = src.table_start("[[release.variant]]", cuda_needle, release_start)
    src.known_keys(body, "release.variant", f"[[release.variant]] of release {version}", start)
    cuda = src.check(check_version, _require(src, body, "cuda", "release.variant"),
                     f"release {version} variant cuda", f'version = "{version}"')
    where = f"release {version} cuda {cuda}"
    needle = f'cuda = "{cuda}"'
    optional = {k: src.check(check_version, body[k], f"{where} {k}", needle) if k in body else None
                for k in ("cudnn", "nccl")}
    pypi = body.get("pypi", False)
    if not isinstance(pypi, bool):
        raise src.error(f"{where}: pypi must be true or false", needle)
    archs = _build_archs(src, body.get("archs", []), where, needle)
    pins, pin_python = _variant_pins(src, body.get("pins", {}), f"{where} pins", needle)
    unverified = body.get("unverified")
    if unverified is not None and (not isinstance(unverified, str) or not unverified.strip()):
        raise src.error(f"{where}: unverified must be a non-empty string saying what could not be sourced", needle)
    return Variant(cuda=cuda, pypi=pypi, pins=pins, archs=archs, pin_python=pin_python,
                   unverified=" ".join(unverified.split()) if unverified else None, **optional)


def _build_archs(src: _Source, value: Any, where: str, needle: str) -> tuple[str, ...]:
    """A variant's ``archs``: distinct ``sm_XY`` (cubin) / ``compute_XY`` (PTX) entries, at least one cubin, in
    ascending order of XY (``TORCH_CUDA_ARCH_LIST="7.5;8.0;12.0+PTX"`` is ``["sm_75", "sm_80", "sm_120",
    "compute_120"]``); raises MatrixError naming the line otherwise."""
    archs = _strings(src, value, f"{where} archs", needle)
    for arch in archs:
        if not _BUILD_ARCH.fullmatch(arch):
            raise src.error(f"{where} archs: {arch!r} is neither sm_XY (a cubin) nor compute_XY (PTX)", needle)
    if len(set(archs)) != len(archs):
        raise src.error(f"{where} archs: an entry is given twice", needle)
    if archs and not any(a.startswith("sm_") for a in archs):
        raise src.error(f"{where} archs: no sm_XY cubin (PTX alone is not how any build here ships)", needle)
    numbers = [int(a.split("_")[1]) for a in archs if a.startswith("sm_")]
    if numbers != sorted(numbers):
        raise src.error(f"{where} archs: list the sm_XY entries in ascending order", needle)
    return archs


def _variant_pins(src: _Source, body: Any, what: str,
                  needle: str) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """A variant's ``pins``: ``name = "version"`` (every Python) or ``name = { version = "...", python = "<3.12" }``
    (only the Pythons a PEP 440 specifier admits, as the wheel's ``python_version`` marker says); returns
    ``(pins, pin_python)``.  Raises MatrixError naming the line."""
    if not isinstance(body, dict):
        raise src.error(f"{what} must be a table of package = version", needle)
    plain: dict[str, str] = {}
    only: dict[str, str] = {}
    for name, value in body.items():
        if isinstance(value, dict):
            if set(value) != {"version", "python"}:
                raise src.error(f"{what} {name}: a table pin has exactly the keys version and python", needle)
            only[name] = _python_specifier(src, value["python"], f"{what} {name} python", needle)
            value = value["version"]
        plain[name] = value
    pins = _pins(src, plain, what, needle)
    return pins, tuple(sorted((check_package_name(n, what), spec) for n, spec in only.items()))


def _python_specifier(src: _Source, value: Any, what: str, needle: str) -> str:
    """``value`` if it is a PEP 440 specifier set over Python versions (``<3.12``, ``>=3.9,<3.13``); raises
    MatrixError otherwise."""
    try:
        if not isinstance(value, str) or not value.strip():
            raise InvalidSpecifier(repr(value))
        return str(SpecifierSet(value))
    except InvalidSpecifier:
        raise src.error(f"{what}: {value!r} is not a PEP 440 specifier such as <3.12", needle) from None


def _merge_framework(old: Framework | None, new: Framework) -> Framework:
    if old is None:
        return new
    releases = {r.version: r for r in old.releases}
    releases.update({r.version: r for r in new.releases})
    merged = sorted(releases.values(), key=lambda r: Version(r.version), reverse=True)
    return replace(new, releases=tuple(merged))


def iter_releases(matrix: Matrix) -> Iterable[tuple[Framework, Release]]:
    """Every (framework, release) pair, frameworks by name, releases newest first."""
    for name in sorted(matrix.frameworks):
        fw = matrix.frameworks[name]
        for release in fw.releases:
            yield fw, release
