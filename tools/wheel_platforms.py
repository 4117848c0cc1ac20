"""Generate matrices/platforms.toml: per PyPI build of the matrix, the platforms its index has CUDA wheels for.

A development tool, run by hand when a release is added; imagectl never runs it (the generated file is data, read
like every matrix file), and neither does CI.

Source: the index's file lists (PEP 691 JSON, https://pypi.org/simple/<project>/) and each wheel's core metadata (PEP
658 ``.metadata``, else ``*.dist-info/METADATA`` read by HTTP Range: no wheel is downloaded).  For a build (a
framework release and one CUDA variant whose index is PyPI) and a platform (``linux/arm64``: ``aarch64``):

- every wheel the build pins (the framework, its companions, each pin) needs a wheel for that machine (or a
  platform-independent one) for every CPython of the release; the metadata is read from the representative CPython's
  wheels (3.12 where the release has it);
- the build is a CUDA build there only when the metadata of one of its non-CUDA wheels (the framework, triton, the
  JAX plugin with the extras the matrix asks for) requires ``nvidia-*`` or ``cuda-*`` wheels *on that machine*: torch
  2.8 .. 2.10 publish aarch64 wheels whose nvidia-* requirements hold only where ``platform_machine == "x86_64"``:
  CPU-only there, so not an arm64 platform of the CUDA build;
- the ``==`` pins the metadata gives on that machine, where they differ from those it gives on x86_64, are the
  platform's own pins.

``linux/amd64`` is every build's platform: the matrix's pins were read from the manylinux x86_64 wheels ([pypi-meta]
of matrices/torch.toml and matrices/jax.toml).  A build whose index is not PyPI (download.pytorch.org) is not read.

Usage::

    python tools/wheel_platforms.py                 # writes matrices/platforms.toml
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name, parse_wheel_filename  # noqa: E402
from packaging.version import Version  # noqa: E402

AMD64 = "linux/amd64"
MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}  # OCI platform -> uname -m / platform_machine
READ = ("linux/arm64",)
CUDA_PREFIXES = ("nvidia-", "cuda-")
SOURCE = "https://pypi.org/simple (PEP 691) and PEP 658 wheel metadata, tools/wheel_platforms.py"


def wheel_fits(filename: str, version: str, machine: str, python: str) -> bool:
    """Whether wheel ``filename`` of ``version`` installs on glibc Linux ``machine`` with CPython ``python`` (a
    ``manylinux*_<machine>``/``linux_<machine>`` tag or a platform-independent ``any`` one)."""
    try:
        _, found, _, tags = parse_wheel_filename(filename)
    except ValueError:
        return False
    if found != Version(version):  # PEP 440: cuda-toolkit 13.0.3.0 is 13.0.3
        return False
    cp = "cp" + python.replace(".", "")
    for tag in tags:
        on_machine = tag.platform == "any" or (tag.platform.endswith("_" + machine)
                                               and tag.platform.startswith(("manylinux", "linux_")))
        runs = (tag.interpreter == cp and tag.abi in (cp, "none")) or tag.interpreter in ("py3", "py" + cp[2:]) or (
            tag.abi == "abi3" and tag.interpreter.startswith("cp3") and int(tag.interpreter[3:]) <= int(cp[3:]))
        if on_machine and runs:
            return True
    return False


def _environment(machine: str, python: str, extra: str = "") -> dict[str, str]:
    return {"implementation_name": "cpython", "implementation_version": python + ".0", "os_name": "posix",
            "platform_machine": machine, "platform_python_implementation": "CPython", "platform_release": "",
            "platform_system": "Linux", "platform_version": "", "python_full_version": python + ".0",
            "python_version": python, "sys_platform": "linux", "extra": extra}


def applying(lines: list[str], machine: str, python: str, extras: tuple[str, ...] = ()) -> list[str]:
    """The ``Requires-Dist`` lines whose marker holds on glibc Linux ``machine`` with CPython ``python``, with no
    extra or one of ``extras`` selected (pure)."""
    out = []
    for line in lines:
        marker = Requirement(line).marker
        if marker is None or any(marker.evaluate(_environment(machine, python, e)) for e in ("", *extras)):
            out.append(line)
    return out


def cuda_lines(lines: list[str], machine: str, python: str, extras: tuple[str, ...] = ()) -> list[str]:
    """The applying requirements (:func:`applying`) of CUDA wheels (``nvidia-*``, ``cuda-*``)."""
    return [line for line in applying(lines, machine, python, extras)
            if canonicalize_name(Requirement(line).name).startswith(CUDA_PREFIXES)]


def pins_of(lines: list[str], machine: str, python: str, extras: tuple[str, ...] = ()) -> dict[str, str]:
    """name -> version of every applying ``==`` requirement (pure)."""
    out = {}
    for line in applying(lines, machine, python, extras):
        req = Requirement(line)
        exact = [s.version for s in req.specifier if s.operator == "==" and not s.version.endswith(".*")]
        if exact:
            out[canonicalize_name(req.name)] = exact[0]
    return out


@dataclass
class BuildFacts:
    """What was read for one build on one platform."""

    cuda: bool
    evidence: str
    pins: dict[str, str] = field(default_factory=dict)  # the platform's own pins, where they differ; else empty


def judge(framework_wheels: dict[str, tuple[str, list[str], list[str]]], missing: list[str], machine: str,  # noqa: PLR0913
          python: str, extras: dict[str, tuple[str, ...]], matrix_pins: dict[str, str]) -> BuildFacts:
    """The facts of a build on ``machine`` (pure): ``framework_wheels`` maps each non-CUDA pinned package to (the
    file read on ``machine``, its Requires-Dist there, the same of its x86_64 wheel); ``missing`` names the pinned
    wheels without a file for ``machine``."""
    found = {name: cuda_lines(lines, machine, python, extras.get(name, ()))
             for name, (_, lines, _) in framework_wheels.items()}
    carrier = next((name for name, lines in found.items() if lines), None)
    if missing or carrier is None:
        parts = [f"no {machine} wheel of {', '.join(missing)}"] if missing else []
        if carrier is None and framework_wheels:
            read = ", ".join(f for f, _, _ in framework_wheels.values())
            x86 = [n for n, (_, lines, x86_lines) in framework_wheels.items()
                   if cuda_lines(lines + x86_lines, "x86_64", python, extras.get(n, ()))]
            why = (" (its nvidia-* requirements hold only where platform_machine == \"x86_64\")" if x86 else "")
            parts.append(f"CPU-only on {machine}: no CUDA wheel required by {read}{why}")
        return BuildFacts(False, "; ".join(parts))
    filename = framework_wheels[carrier][0]
    first = found[carrier][0]
    evidence = f"{filename} requires {first}" + (f" and {len(found[carrier]) - 1} more CUDA wheels"
                                                 if len(found[carrier]) > 1 else "")
    pins = dict(matrix_pins)
    for name, (_, lines, x86_lines) in framework_wheels.items():
        here, there = (pins_of(lines, machine, python, extras.get(name, ())),
                       pins_of(x86_lines, "x86_64", python, extras.get(name, ())))
        for dropped in set(there) - set(here):
            pins.pop(dropped, None)
        pins.update({k: v for k, v in here.items() if k in matrix_pins or k not in there})
    return BuildFacts(True, evidence, pins if pins != matrix_pins else {})


# --- reading the index (network) -----------------------------------------------------------------------------


def _files(project: str, cache: dict, session):  # noqa: ANN001, ANN202 (dev tool)
    from imagectl.pypi import project_files

    if project not in cache:
        cache[project] = project_files("https://pypi.org/simple", project, session)
    return cache[project]


def _wheel(project: str, version: str, machine: str, python: str, cache: dict, session):  # noqa: ANN001, ANN202, PLR0913
    fits = [f for f in _files(project, cache, session) if f.filename.endswith(".whl")
            and wheel_fits(f.filename, version, machine, python) and not f.yanked]
    return fits[0] if fits else None


def read_build(fw, release, variant, platform: str, cache: dict, session) -> BuildFacts:  # noqa: ANN001, PLR0913
    """Read the index for one build on ``platform``; raises PackageIndexError when the index fails."""
    from imagectl.pypi import wheel_metadata

    machine = MACHINES[platform]
    python = "3.12" if "3.12" in release.python else release.python[-1]
    pins = dict(variant.pins_for(python))
    wanted = {fw.package: release.version, **dict(release.companions), **pins}
    lacking: dict[str, list[str]] = {}  # name==version -> the Pythons it has no wheel of that machine for
    framework_wheels = {}
    for name, version in sorted(wanted.items()):
        file = _wheel(name, version, machine, python, cache, session)
        if file is None:
            lacking.setdefault(f"{name}=={version}", []).append(python)
            continue
        if canonicalize_name(name).startswith(CUDA_PREFIXES) or name in dict(release.companions):
            continue
        x86 = _wheel(name, version, "x86_64", python, cache, session)
        lines = list(wheel_metadata(file, session).requires_dist_lines)
        x86_lines = list(wheel_metadata(x86, session).requires_dist_lines) if x86 else []
        framework_wheels[name] = (file.filename, lines, x86_lines)
    for other in (p for p in release.python if p != python):  # every Python of the release needs its wheels too
        wanted = {fw.package: release.version, **dict(release.companions), **dict(variant.pins_for(other))}
        for n, v in sorted(wanted.items()):
            if _wheel(n, v, machine, other, cache, session) is None:
                lacking.setdefault(f"{n}=={v}", []).append(other)
    missing = [f"{req} (Python {', '.join(sorted(pys, key=lambda p: tuple(map(int, p.split('.')))))})"
               for req, pys in lacking.items()]
    return judge(framework_wheels, missing, machine, python, dict(fw.pin_extras), pins)


def pypi_builds(matrix):  # noqa: ANN001, ANN201
    """(framework, release, variant) of every build whose index is PyPI."""
    from imagectl.matrix.load import iter_releases

    for fw, release in iter_releases(matrix):
        for variant in release.variants:
            pypi = variant.pypi or fw.index_url == fw.pypi_index_url
            if pypi and variant.pins:
                yield fw, release, variant


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(rows: list[tuple[str, str, str, dict[str, BuildFacts]]], day: str) -> str:
    """The TOML text of matrices/platforms.toml (pure)."""
    out = ["# GENERATED by tools/wheel_platforms.py; do not edit (re-run it when a release is added).",
           "# Source: https://pypi.org/simple/<project>/ (PEP 691 file lists) and each wheel's core metadata (PEP 658",
           "# .metadata, else *.dist-info/METADATA by HTTP Range), read " + day + ", of the CPython 3.12 wheels where",
           "# the release has them.  A build lists a platform when every wheel it pins has a file for that machine",
           "# (for every Python of the release) and",
           "# the metadata requires CUDA wheels there (a CPU-only aarch64 torch does not count; see the tool's",
           "# docstring).  linux/amd64 is every build's platform ([pypi-meta]: the pins were read from x86_64",
           "# wheels); builds of other indexes (download.pytorch.org) are not read: linux/amd64 only.",
           "[platforms]",
           "source = " + _quote(SOURCE),
           f"read = {_quote(day)}", ""]
    for fw, version, cuda, facts in rows:
        platforms = [AMD64] + [p for p, f in facts.items() if f.cuda]
        out.append(f"[platforms.{fw}.{_quote(version)}.{_quote(cuda)}]")
        out.append("platforms = [" + ", ".join(_quote(p) for p in platforms) + "]")
        out.append("evidence = { " + ", ".join(f"{_quote(p)} = {_quote(f.evidence)}" for p, f in facts.items()) + " }")
        for platform, f in facts.items():
            if f.cuda and f.pins:
                body = ", ".join(f"{_quote(k)} = {_quote(v)}" for k, v in sorted(f.pins.items()))
                out.append(f"pins.{_quote(platform)} = {{ {body} }}")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Read the index and write the file; exit 1 when the index fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "matrices" / "platforms.toml")
    args = parser.parse_args(argv)
    from imagectl.matrix.load import load_matrix
    from imagectl.pypi import new_session

    matrix = load_matrix([ROOT / "matrices"])
    rows, cache = [], {}
    with new_session() as session:
        for fw, release, variant in pypi_builds(matrix):
            facts = {p: read_build(fw, release, variant, p, cache, session) for p in READ}
            print(f"{fw.name} {release.version} {fw.tag_of(variant.cuda)}: "
                  + "; ".join(f"{p}: {'CUDA' if f.cuda else 'no'} ({f.evidence})" for p, f in facts.items()))
            rows.append((fw.name, release.version, variant.cuda, facts))
    args.out.write_text(render(rows, dt.datetime.now(dt.timezone.utc).date().isoformat()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
