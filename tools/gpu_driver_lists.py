"""Generate matrices/gpu-drivers.toml: per GPU, the Linux driver releases whose supported-GPU list names it.

A development tool, run by hand when NVIDIA tags new driver releases; imagectl never runs it (the generated file is
data, read like every matrix file), and neither does CI.

Source: NVIDIA/open-gpu-kernel-modules, which tags every Linux driver release since 515.43.04 (its README: "This
code base is shared with NVIDIA's proprietary drivers ... a snapshot of each driver release").  At each tag the
README's "Compatible GPUs" table is that release's supported-GPU list (product name and PCI ID).  A GPU of
matrices/cuda.toml's ``[gpus]`` with ``pci`` IDs is listed in a release when the table has a row for every one of
its IDs (an ID is a prefix of the row's PCI ID column: ``2335`` matches ``2335 10DE 18BE``, ``25B6 10DE 14A9``
only that board).  The resource manager's product table ``src/nvidia/generated/g_nv_name_released.h`` is not
used: it also names vGPU profiles (``NVIDIA L4-1B``) and placeholders (``NVIDIA GPU 27B8-172F``) under the
physical device's ID.  A tag whose README has no such table (515.43.04) is left out and named in the output.

Usage (a local clone or bare mirror of the repository, with its tags)::

    git clone --bare https://github.com/NVIDIA/open-gpu-kernel-modules okm.git
    python tools/gpu_driver_lists.py --repo okm.git            # writes matrices/gpu-drivers.toml

For each GPU the output has ``listed`` and ``missing``: ranges ``FIRST..LAST`` of consecutive releases (in
version order, within one driver branch) that do and do not list it, from the first release read.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = "README.md"
SECTION = "## Compatible GPUs"
_ROW = re.compile(r"^\|\s*(?P<name>[^|]+?)\s*\|\s*(?P<pci>[0-9A-F]{4}(?: [0-9A-F]{4} [0-9A-F]{4})?)\s*\|\s*$")
_TAG = re.compile(r"[0-9]+(\.[0-9]+){1,2}")


def version_key(version: str) -> tuple[int, ...]:
    """``(550, 54, 15)`` for ``550.54.15``: driver versions compare field by field."""
    return tuple(int(part) for part in version.split("."))


def branch(version: str) -> int:
    """The driver branch: 550 for 550.54.15."""
    return int(version.split(".")[0])


def readme_ids(text: str) -> list[str] | None:
    """The PCI ID column of the README's "Compatible GPUs" table (``2335 10DE 18BE`` or ``2684``), or None when
    the README has no such table."""
    if SECTION not in text:
        return None
    rows = [m["pci"] for line in text.split(SECTION, 1)[1].splitlines() if (m := _ROW.match(line.strip()))]
    return rows or None


def listed(ids: list[str], pci: tuple[str, ...]) -> bool:
    """Whether every one of a GPU's ``pci`` IDs has a row (a prefix match on whole fields)."""
    return all(any(row == want or row.startswith(want + " ") for row in ids) for want in pci)


@dataclass(frozen=True)
class Ranges:
    """A GPU's releases, as ``FIRST..LAST`` ranges within one branch, that list it and that do not."""

    listed: tuple[str, ...]
    missing: tuple[str, ...]


def ranges(releases: list[str], flags: list[bool]) -> Ranges:
    """Consecutive releases (in version order) with the same flag and the same branch, as ranges (pure)."""
    out: dict[bool, list[str]] = {True: [], False: []}
    start = 0
    for i in range(1, len(releases) + 1):
        if i == len(releases) or flags[i] != flags[start] or branch(releases[i]) != branch(releases[start]):
            out[flags[start]].append(f"{releases[start]}..{releases[i - 1]}")
            start = i
    return Ranges(tuple(out[True]), tuple(out[False]))


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (a work tree or a bare repository); raises CalledProcessError."""
    return subprocess.run(["git", "--git-dir", str(_git_dir(repo)), *args], capture_output=True, text=True,
                          check=True).stdout


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def release_tags(repo: Path) -> list[str]:
    """The repository's release tags (``550.54.15``), in version order."""
    return sorted((t for t in git(repo, "tag").split() if _TAG.fullmatch(t)), key=version_key)


def toml_loads(text: str) -> dict:
    """TOML text as data (tomllib, or tomli before Python 3.11)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def gpu_pci(matrix: Path) -> dict[str, tuple[str, ...]]:
    """``[gpus]`` of ``matrix`` (cuda.toml): GPU name -> its ``pci`` IDs, for the GPUs that have them."""
    table = toml_loads(matrix.read_text())["gpus"]
    return {name: tuple(v["pci"]) for name, v in table.items() if isinstance(v, dict) and v.get("pci")}


def render(gpus: dict[str, Ranges], read: list[str], skipped: list[str], head: str) -> str:
    """The TOML text of the generated file (pure, deterministic)."""
    lines = ["# GENERATED by tools/gpu_driver_lists.py; do not edit (re-run it when NVIDIA tags new releases).",
             "# Source: github.com/NVIDIA/open-gpu-kernel-modules, README.md \"Compatible GPUs\" at each release tag",
             f"# (read at {head}): a GPU is listed in a release when the table has a row for each of its",
             "# [gpus] pci IDs (matrices/cuda.toml).",
             f"# Releases read: {len(read)}, {read[0]} .. {read[-1]}"
             + (f"; left out (no Compatible GPUs table): {', '.join(skipped)}" if skipped else ""),
             "[driver_lists]",
             'source = "NVIDIA/open-gpu-kernel-modules README.md Compatible GPUs, one list per release tag"',
             f'first = "{read[0]}"', f'newest = "{read[-1]}"', ""]
    for key in ("listed", "missing"):
        lines.append(f"[driver_lists.{key}]")
        for name in sorted(gpus):
            values = getattr(gpus[name], key)
            lines.append(f'"{name}" = [' + ", ".join(f'"{v}"' for v in values) + "]")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a clone of NVIDIA/open-gpu-kernel-modules")
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrices" / "cuda.toml")
    parser.add_argument("--output", type=Path, default=ROOT / "matrices" / "gpu-drivers.toml")
    args = parser.parse_args(argv)
    pci = gpu_pci(args.matrix)
    read, skipped, flags = [], [], {name: [] for name in pci}
    for tag in release_tags(args.repo):
        ids = readme_ids(git(args.repo, "show", f"{tag}:{README}"))
        if ids is None:
            skipped.append(tag)
            continue
        read.append(tag)
        for name, wanted in pci.items():
            flags[name].append(listed(ids, wanted))
    gpus = {name: ranges(read, flags[name]) for name in pci}
    head = git(args.repo, "rev-parse", "--short", f"{read[-1]}^{{commit}}").strip()
    args.output.write_text(render(gpus, read, skipped, f"{read[-1]}, {head}"))
    print(f"{args.output}: {len(gpus)} GPUs over {len(read)} releases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
