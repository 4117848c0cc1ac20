"""Loading matrix TOML files into a :class:`Matrix`: the only code that reads matrix TOML.

Files are read in order (the shipped matrices first, then each user directory); a later file adds
frameworks, toolkits, OSes and GPUs, and replaces entries with the same key (a release with the same version
replaces the earlier one).  Every schema error names the file and the line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from packaging.version import Version

from ..errors import MatrixError, ValidationError
from ..reference import parse_reference
from ..tomlfile import line_of, load_toml
from ..grammar import (
    check_driver,
    check_package_name,
    check_python,
    check_token,
    check_url,
    check_version,
)
from .model import BaseImages, CudaToolkit, Framework, Matrix, OsInfo, Release, Variant

_TOP_KEYS = {"base", "os", "cuda", "gpus", "framework", "release"}


class _Source:
    """A file being read: turns a problem into ``FILE:LINE: message``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, message: str, needle: str = "") -> MatrixError:
        line = line_of(self.path, needle) if needle else 1
        return MatrixError(f"{self.path}:{line}: {message}")

    def check(self, func: Any, value: Any, what: str, needle: str) -> Any:
        try:
            return func(value, what)
        except ValidationError as exc:
            raise self.error(str(exc), needle) from None


def matrix_files(dirs: Sequence[Path]) -> list[Path]:
    """The ``*.toml`` files of each directory, sorted within a directory, in directory order."""
    files: list[Path] = []
    for directory in dirs:
        if not directory.is_dir():
            raise MatrixError(f"{directory}: matrix directory not found")
        files.extend(sorted(directory.glob("*.toml")))
    return files


def load_matrix(dirs: Sequence[Path]) -> Matrix:
    """Read and merge the matrices of ``dirs``; raises MatrixError naming file and line."""
    parts: dict[str, dict[str, Any]] = {"os": {}, "cuda": {}, "gpus": {}, "frameworks": {}}
    base: BaseImages | None = None
    files = matrix_files(dirs)
    for path in files:
        src = _Source(path)
        data = load_toml(path, MatrixError)
        unknown = set(data) - _TOP_KEYS
        if unknown:
            name = sorted(unknown)[0]
            raise src.error(f"unknown top-level key {name!r} (known: {', '.join(sorted(_TOP_KEYS))})", name)
        if "base" in data:
            base = _base(src, data["base"])
        parts["os"].update(_table(src, data, "os", _os))
        parts["cuda"].update(_table(src, data, "cuda", _cuda))
        parts["gpus"].update(_gpus(src, data.get("gpus", {})))
        if "framework" in data or "release" in data:
            fw = _framework(src, data)
            parts["frameworks"][fw.name] = _merge_framework(parts["frameworks"].get(fw.name), fw)
    if base is None:
        raise MatrixError(f"{', '.join(str(d) for d in dirs)}: no matrix file declares [base]")
    matrix = Matrix(base=base, files=tuple(files), **parts)
    _check_references(matrix)
    return matrix


def _check_references(matrix: Matrix) -> None:
    """Every CUDA a variant names and every OS a toolkit names must be declared somewhere."""
    for toolkit in matrix.cuda.values():
        for os_name in toolkit.os:
            if os_name not in matrix.os:
                raise MatrixError(f"[cuda.{toolkit.version}] os {os_name!r} is not declared in any [os] table")
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


def _base(src: _Source, body: Any) -> BaseImages:
    body = _as_table(src, body, "base")
    repo = _require(src, body, "repository", "base")
    src.check(lambda v, w: parse_reference(v), repo, "base repository", "repository")
    flavor_names = _strings(src, _require(src, body, "flavors", "base"), "flavors", "flavors")
    flavors = tuple(src.check(check_token, f, "flavor", "flavors") for f in flavor_names)
    tag = _require(src, body, "tag", "base")
    if not isinstance(tag, str) or not flavors:
        raise src.error("[base] tag must be a string and flavors non-empty", "tag")
    return BaseImages(repository=repo, flavors=flavors, tag=tag)


def _os(src: _Source, name: str, body: dict[str, Any]) -> OsInfo:
    needle = f'os."{name}"'
    src.check(check_token, name, "OS name", needle)
    python = src.check(check_python, _require(src, body, "python", needle), f"[os.{name}] python", needle)
    apt_pythons = _strings(src, body.get("apt_python", [python]), "apt_python", needle)
    apt = tuple(src.check(check_python, p, f"[os.{name}] apt_python", needle) for p in apt_pythons)
    return OsInfo(name=name, python=python, apt_python=apt)


def _cuda(src: _Source, name: str, body: dict[str, Any]) -> CudaToolkit:
    needle = f'cuda."{name}"'
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
    return CudaToolkit(name, release, drivers[0], drivers[1], archs, oses)


def _gpus(src: _Source, body: Any) -> dict[str, str]:
    if not isinstance(body, dict):
        raise src.error("[gpus] must be a table of GPU name = sm_XY", "gpus")
    for gpu, arch in body.items():
        if not isinstance(arch, str) or not arch.startswith("sm_") or not arch[3:].isdigit():
            raise src.error(f"[gpus] {gpu!r}: {arch!r} is not sm_XY", gpu)
    return dict(body)


def _framework(src: _Source, data: dict[str, Any]) -> Framework:
    body = _as_table(src, data.get("framework"), "framework") if "framework" in data else None
    if body is None:
        raise src.error("a file with [[release]] entries needs a [framework] table", "release")
    get = lambda key: _require(src, body, key, "framework")  # noqa: E731
    name = src.check(check_token, get("name"), "framework name", "name")
    releases = data.get("release", [])
    if not isinstance(releases, list):
        raise src.error("release must be an array of tables ([[release]])", "release")
    return Framework(
        name=name,
        label=str(body.get("label", name)),
        package=src.check(check_package_name, get("package"), "framework package", "package"),
        companions=tuple(
            src.check(check_package_name, c, "companion", "companions")
            for c in _strings(src, body.get("companions", []), "companions", "companions")
        ),
        cuda_tag=_pattern(src, get("cuda_tag")),
        index_url=src.check(check_url, get("index_url"), "framework index_url", "index_url"),
        pypi_index_url=src.check(
            check_url, body.get("pypi_index_url", "https://pypi.org/simple"), "pypi_index_url", "pypi_index_url"
        ),
        check=src.check(check_token, get("check"), "framework check", "check"),
        releases=tuple(sorted((_release(src, r) for r in releases), key=lambda r: Version(r.version), reverse=True)),
        source=src.path,
    )


def _pattern(src: _Source, value: Any) -> str:
    try:
        probe = value.format(major=12, minor=1)
    except (AttributeError, KeyError, IndexError, ValueError):
        raise src.error(f"cuda_tag {value!r} may only use {{major}} and {{minor}}", "cuda_tag") from None
    src.check(check_token, probe, "cuda_tag", "cuda_tag")
    return value


def _release(src: _Source, body: Any) -> Release:
    body = _as_table(src, body, "release")
    version = src.check(check_version, _require(src, body, "version", "release"), "release version", "version")
    needle = f'version = "{version}"'
    python_names = _strings(src, _require(src, body, "python", needle), "python", needle)
    pythons = tuple(src.check(check_python, p, f"release {version} python", needle) for p in python_names)
    companions = _pins(src, body.get("companions", {}), f"release {version} companions", needle)
    variants = body.get("variant", [])
    if not isinstance(variants, list) or not variants:
        raise src.error(f"release {version} has no [[release.variant]]", needle)
    built = tuple(_variant(src, v, version) for v in variants)
    if sum(v.pypi for v in built) > 1:
        raise src.error(f"release {version}: more than one variant has pypi = true", needle)
    if len({v.cuda for v in built}) != len(built):
        raise src.error(f"release {version}: two variants share one CUDA version", needle)
    return Release(version=version, python=pythons, companions=companions, variants=built)


def _pins(src: _Source, body: Any, what: str, needle: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(body, dict):
        raise src.error(f"{what} must be a table of package = version", needle)
    return tuple(sorted(
        (src.check(check_package_name, k, what, needle), src.check(check_version, v, f"{what} {k}", needle))
        for k, v in body.items()
    ))


def _variant(src: _Source, body: Any, version: str) -> Variant:
    body = _as_table(src, body, "release.variant")
    cuda = src.check(check_version, _require(src, body, "cuda", "release.variant"),
                     f"release {version} variant cuda", f'version = "{version}"')
    where = f"release {version} cuda {cuda}"
    needle = f'cuda = "{cuda}"'
    optional = {k: src.check(check_version, body[k], f"{where} {k}", needle) if k in body else None
                for k in ("cudnn", "nccl")}
    pypi = body.get("pypi", False)
    if not isinstance(pypi, bool):
        raise src.error(f"{where}: pypi must be true or false", needle)
    archs = _strings(src, body.get("archs", []), f"{where} archs", needle)
    pins = _pins(src, body.get("pins", {}), f"{where} pins", needle)
    return Variant(cuda=cuda, pypi=pypi, pins=pins, archs=archs, **optional)


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
