"""Generate matrices/gpu-drivers.toml: per GPU, the Linux driver releases whose own supported-GPU list names it.

A development tool, run by hand when new driver releases are packaged; imagectl never runs it (the generated file is
data, read like every matrix file), and neither does CI.

Source: the driver's own README, Appendix A "Supported NVIDIA GPU Products" (published per release as
``README/supportedchips.html`` beside the driver, and as ``README.txt`` inside it).  Its PCI device IDs are read
release by release from Debian's packaging of the driver (salsa.debian.org/nvidia-team/nvidia-graphics-drivers, read
through a GitHub mirror of its history): ``debian/rules`` extracts the IDs of ``README.txt``'s "A1. CURRENT NVIDIA
GPUS" table and of its "GSP Firmware" chapter into ``debian/nv-readme.ids`` and fails the build when the committed
file differs, so at the last commit of each upstream version that file is exactly the ID column of that release's
README.  (The GSP chapter matters: some data-center boards, Tesla T4 among them, appear in the README's GSP table
while NVIDIA's machine-readable copy of Appendix A, ``supported-gpus.json``, omits them.)  The open-gpu-kernel-modules
README's "Compatible GPUs" table is NOT used: it lists the GPUs of the open kernel modules, not what the driver
supports (T4 appears there only from 575.51.02; Volta and Pascal never).

A GPU of matrices/cuda.toml's ``[gpus]`` with ``pci`` IDs is listed in a release when that release's IDs hold the
device part (the first four hex digits) of every one of its IDs: Debian's extraction keeps device IDs only, so the
boards that share a device (A2 and A16 on 25B6) are judged by their device.

Usage (a clone or bare mirror of the packaging repository with all its branches)::

    git clone --mirror <mirror of nvidia-graphics-drivers> ngd.git
    python tools/gpu_driver_lists.py --repo ngd.git            # writes matrices/gpu-drivers.toml

For each GPU the output has ``listed`` and ``missing``: ranges ``FIRST..LAST`` of consecutive releases (in
version order, within one driver branch) that do and do not list it, from the first release read (``--first``,
default 450.51: the oldest branch CUDA 11's minor-version compatibility admits); ``[driver_lists.releases]`` names
the commit each release's list was read at.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IDS = "debian/nv-readme.ids"
RULES = "debian/rules"
GSP = "GSP Firmware"  # debian/rules reads the README's GSP-firmware table too (from 510.60.02)
CHANGELOG = "debian/changelog"
FIRST = "450.51"
# the top line of debian/changelog: "nvidia-graphics-drivers (550.54.14-1) unstable; ..." (also -tesla, -tesla-470)
_TOP = re.compile(r"^nvidia-graphics-drivers(?:-tesla)?(?:-[0-9]+)? "
                  r"\((?:[0-9]+:)?(?P<version>[0-9]+(?:\.[0-9]+){1,2})-")
_ID = re.compile(r"^10DE(?P<device>[0-9A-F]{4})$")


def version_key(version: str) -> tuple[int, ...]:
    """``(550, 54, 15)`` for ``550.54.15``: driver versions compare field by field."""
    return tuple(int(part) for part in version.split("."))


def branch(version: str) -> int:
    """The driver branch: 550 for 550.54.15."""
    return int(version.split(".")[0])


def changelog_version(text: str) -> str | None:
    """The upstream driver version a debian/changelog is at (its top entry), or None when it is not one of ours."""
    match = _TOP.match(text.split("\n", 1)[0])
    return match["version"] if match else None


def readme_ids(text: str) -> frozenset[str]:
    """The device IDs of a ``nv-readme.ids`` file (``10DE1EB8`` lines -> ``1EB8``), the README's ID column."""
    return frozenset(m["device"] for line in text.upper().split() if (m := _ID.match(line.strip())))


def listed(ids: frozenset[str], pci: tuple[str, ...]) -> bool:
    """Whether every one of a GPU's ``pci`` IDs has its device in ``ids`` (``25B6 10DE 14A9`` -> ``25B6``)."""
    return all(want.split()[0] in ids for want in pci)


@dataclass(frozen=True)
class Ranges:
    """A GPU's releases, as ``FIRST..LAST`` ranges within one branch, that list it and that do not."""

    listed: tuple[str, ...]
    missing: tuple[str, ...]
    gaps: tuple[str, ...] = ()  # releases whose list leaves it out although an older branch lists it: not judged


def judged(releases: list[str], seen: list[bool]) -> list[bool | None]:
    """Per release: listed (True), missing (False: the release predates the GPU -- it comes before the GPU's first
    listing in its own branch, or its branch is older than every branch that lists it) or a gap (None: a later branch,
    or a later release of a branch, leaves out a GPU an earlier one listed).  NVIDIA ends a GPU's support by moving it
    to a legacy branch (``last_branch``), never by leaving it out of one release, so a gap is the README's format, not
    the driver: Tesla T4 is in the README's GSP-firmware table only, and the R555 README's table leaves it out
    (pure)."""
    first_in: dict[int, str] = {}
    for version, flag in zip(releases, seen, strict=True):
        if flag and branch(version) not in first_in:
            first_in[branch(version)] = version
    oldest = min(first_in, default=None)
    out: list[bool | None] = []
    for version, flag in zip(releases, seen, strict=True):
        own = first_in.get(branch(version))
        before = (version_key(version) < version_key(own) if own else oldest is None or branch(version) < oldest)
        out.append(True if flag else False if before else None)
    return out


def ranges(releases: list[str], flags: list[bool | None]) -> Ranges:
    """Consecutive releases (in version order) with the same flag and the same branch, as ranges (pure)."""
    out: dict[bool | None, list[str]] = {True: [], False: [], None: []}
    start = 0
    for i in range(1, len(releases) + 1):
        if i == len(releases) or flags[i] != flags[start] or branch(releases[i]) != branch(releases[start]):
            out[flags[start]].append(f"{releases[start]}..{releases[i - 1]}")
            start = i
    return Ranges(tuple(out[True]), tuple(out[False]), tuple(out[None]))


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (a work tree or a bare repository); raises CalledProcessError."""
    return subprocess.run(["git", "--git-dir", str(_git_dir(repo)), *args], capture_output=True, text=True,
                          check=True).stdout


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def release_commits(repo: Path, first: str = FIRST) -> dict[str, str]:
    """Upstream version (``first`` or later) -> the newest commit, on any branch, whose debian/changelog is at it and
    that has ``nv-readme.ids`` extracted from both Appendix A and the GSP-firmware table (debian/rules): the commit
    whose IDs that version's package was built against."""
    out: dict[str, tuple[int, str]] = {}
    for line in git(repo, "log", "--all", "--format=%H %ct", "--", CHANGELOG, IDS).split("\n"):
        if not line.strip():
            continue
        commit, stamp = line.split()
        version = changelog_version(_show(repo, commit, CHANGELOG))
        if version is None or version_key(version) < version_key(first) or not _show(repo, commit, IDS).strip():
            continue
        if GSP not in _show(repo, commit, RULES):  # an older extraction: Appendix A only, without the GSP table
            continue
        if version not in out or int(stamp) > out[version][0]:
            out[version] = (int(stamp), commit)
    return {version: out[version][1] for version in sorted(out, key=version_key)}


def _show(repo: Path, commit: str, path: str) -> str:
    try:
        return git(repo, "show", f"{commit}:{path}")
    except subprocess.CalledProcessError:
        return ""


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


def render(gpus: dict[str, Ranges], commits: dict[str, str], where: str) -> str:
    """The TOML text of the generated file (pure, deterministic)."""
    read = list(commits)
    lines = ["# GENERATED by tools/gpu_driver_lists.py; do not edit (re-run it when new driver releases are packaged).",
             "# Source: the driver's own README, Appendix A \"Supported NVIDIA GPU Products\" (README.txt /",
             "# README/supportedchips.html of each release), its PCI device IDs as Debian's packaging extracts",
             f"# them per release into debian/nv-readme.ids (read from {where}; each release's commit below).",
             "# A GPU is listed in a release when the release's IDs hold every one of its [gpus] pci devices",
             "# (matrices/cuda.toml).  The open-gpu-kernel-modules \"Compatible GPUs\" table is not a source here: it",
             "# lists the GPUs of the open kernel modules, not what the driver supports.",
             f"# Releases read: {len(read)}, {read[0]} .. {read[-1]} (those whose extraction reads the GSP table too).",
             "# Not judged (a later release leaves out a GPU an earlier branch lists: the README's format changed,",
             "# NVIDIA ends support by a legacy branch, [gpus] last_branch):"]
    lines += [f"#   {name}: {', '.join(gpus[name].gaps)}" for name in sorted(gpus) if gpus[name].gaps] or ["#   none"]
    lines += ["[driver_lists]",
              'source = "the driver README\'s Appendix A supported GPUs (debian/nv-readme.ids of each release)"',
              f'first = "{read[0]}"', f'newest = "{read[-1]}"', "",
              "[driver_lists.releases]  # release -> the packaging commit its list was read at"]
    lines += [f'"{version}" = "{commit[:12]}"' for version, commit in commits.items()]
    lines.append("")
    for key in ("listed", "missing"):
        lines.append(f"[driver_lists.{key}]")
        for name in sorted(gpus):
            values = getattr(gpus[name], key)
            lines.append(f'"{name}" = [' + ", ".join(f'"{v}"' for v in values) + "]")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a clone of Debian's nvidia-graphics-drivers")
    parser.add_argument("--where", default="a GitHub mirror of Debian's nvidia-graphics-drivers",
                        help="how the output names the repository read")
    parser.add_argument("--first", default=FIRST, help="the oldest release to read")
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrices" / "cuda.toml")
    parser.add_argument("--output", type=Path, default=ROOT / "matrices" / "gpu-drivers.toml")
    args = parser.parse_args(argv)
    pci = gpu_pci(args.matrix)
    commits = release_commits(args.repo, args.first)
    if not commits:
        print(f"{args.repo}: no release at or after {args.first} has {IDS}", file=sys.stderr)
        return 1
    flags: dict[str, list[bool]] = {name: [] for name in pci}
    for commit in commits.values():
        ids = readme_ids(_show(args.repo, commit, IDS))
        for name, wanted in pci.items():
            flags[name].append(listed(ids, wanted))
    gpus = {name: ranges(list(commits), judged(list(commits), flags[name])) for name in pci}
    args.output.write_text(render(gpus, commits, args.where))
    print(f"{args.output}: {len(gpus)} GPUs over {len(commits)} releases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
