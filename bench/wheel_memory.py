"""Peak memory of installing a wheel on the assembled path, whatever its members hold (issue 36 item 5: under 300 MB
over the baseline; a 1 GiB member took 2.1 GB and a 300 MiB entry_points.txt 1.56 GB).

    python3 bench/wheel_memory.py [--size-mib 1024] [--entry-points-mib 300] [--code PATH]

Each row runs in a child process of its own (``sys.executable``): the lock's path check
(:class:`imagectl.assemble.conflicts.LockPaths`, where the code has it) and
:func:`imagectl.images.assembled.group_layer` (read_wheel, install_wheel into a LayerWriter, the ``.py`` files staged
for compiling), then reports its peak resident set (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and whether the
wheel was installed or refused.  The baseline row installs a small wheel (a few files) the same way, so the delta of
a row is what its big member costs over the interpreter and imports.  Rows:

- a member of N MiB of NULs, deflated (a MiB of stream expands a thousandfold: the worst case of one read);
- the same as a ``.py`` file (also staged for compiling), and as a ``.data/scripts`` file with no ``#!python`` line;
- N MiB of random bytes, stored (the layer holds it whole: disk, not memory);
- an ``entry_points.txt`` of M MiB (over the metadata cap: refused), and one whose zip entry says 40 bytes.

The wheels are made in a temporary folder (removed at the end; up to 3 GiB of disk at the default size).  ``--code``
measures another checkout of imagectl (e.g. ``git archive`` of an older commit) with the same wheels.  Asserts
nothing; exits 1 when a row is over the target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1 << 20
TARGET_MB = 300
WHEEL_FILE = b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
CHILD = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from imagectl.assemble.install import venv_scheme
from imagectl.errors import ImagectlError
from imagectl.images.assembled import LayerGroup, group_layer
from imagectl.lock.lockfile import LockedPackage
wheel, work = Path(sys.argv[2]), Path(sys.argv[3])
scheme = venv_scheme("/opt/venv", "3.11")
started, outcome = time.monotonic(), "installed"
try:
    try:
        from imagectl.assemble.conflicts import LockPaths
        LockPaths(scheme).add([wheel])
    except ImportError:
        pass
    group = LayerGroup("rest", "lock-4-rest.txt", (LockedPackage("bench", "1.0", ()),))
    (work / "blobs").mkdir()
    (work / "stage").mkdir()
    group_layer(group, {"bench": wheel}, scheme, b"bench==1.0\\n", work / "blobs", work / "stage", lambda line: None)
except (ImagectlError, RecursionError, MemoryError) as exc:
    outcome = f"refused: {type(exc).__name__}: {str(exc)[:90]}"
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_mb": peak_kib * 1024 / 1e6, "seconds": time.monotonic() - started, "outcome": outcome}))
"""


def make_wheel(folder: Path, name: str, members: dict[str, tuple[int, bytes | None, int]]) -> Path:
    """``bench-1.0`` holding METADATA, WHEEL, a small module and ``members``: name -> (size, a block repeated to that
    size or None for random bytes, zip compression), each written a MiB at a time."""
    path = folder / name / "bench-1.0-py3-none-any.whl"
    path.parent.mkdir()
    small = {"bench/__init__.py": b"VALUE = 1\n", "bench-1.0.dist-info/WHEEL": WHEEL_FILE,
             "bench-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: bench\nVersion: 1.0\n"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in small.items():
            archive.writestr(member, data)
        for member, (size, block, compression) in members.items():
            info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type, info.external_attr = compression, 0o100755 << 16
            with archive.open(info, "w", force_zip64=size >= 1 << 31) as out:
                for start in range(0, size, MIB):
                    n = min(MIB, size - start)
                    out.write(os.urandom(n) if block is None else (block * (MIB // len(block) + 1))[:n])
        archive.writestr("bench-1.0.dist-info/RECORD", "")
    return path


def claim_size(wheel: Path, name: str, size: int) -> None:
    """Make the zip's central directory (what readers go by) say that member ``name`` inflates to ``size`` bytes."""
    data = bytearray(wheel.read_bytes())  # small: the member deflates a thousandfold
    entry = data.find(b"PK\x01\x02")
    while entry != -1:
        name_len, extra, comment = (int.from_bytes(data[entry + k:entry + k + 2], "little") for k in (28, 30, 32))
        if data[entry + 46:entry + 46 + name_len] == name.encode():
            data[entry + 24:entry + 28] = size.to_bytes(4, "little")
            wheel.write_bytes(bytes(data))
            return
        entry = data.find(b"PK\x01\x02", entry + 46 + name_len + extra + comment)
    raise SystemExit(f"no central directory entry for {name} in {wheel}")


def measure(code: Path, wheel: Path, work: Path) -> dict[str, object]:
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", CHILD, str(code), str(wheel), str(work)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"peak_mb": float("nan"), "seconds": float("nan"), "outcome": f"child failed: {tail[:90]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="the big member's size (default 1024)")
    parser.add_argument("--entry-points-mib", type=int, default=300, help="entry_points.txt's size (default 300)")
    parser.add_argument("--code", type=Path, default=REPO, help="the imagectl checkout to measure (default: this one)")
    args = parser.parse_args()
    size, entry_size = args.size_mib * MIB, args.entry_points_mib * MIB
    deflated, stored = zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED
    comments = b"# " + b"x" * 60 + b"\n"
    rows = {
        "small wheel (baseline)": {},
        f"{args.size_mib} MiB member of NULs, deflated": {"bench/zeros.bin": (size, b"\0", deflated)},
        f"{args.size_mib} MiB .py member of NULs, deflated": {"bench/zeros.py": (size, b"\0", deflated)},
        f"{args.size_mib} MiB script (no #!python), deflated": {"bench-1.0.data/scripts/zeros":
                                                               (size, b"\0", deflated)},
        f"{args.size_mib} MiB member of random bytes, stored": {"bench/random.bin": (size, None, stored)},
        f"{args.entry_points_mib} MiB entry_points.txt": {"bench-1.0.dist-info/entry_points.txt":
                                                          (entry_size, b"[console_scripts]\n" + comments, deflated)},
        f"{args.entry_points_mib} MiB entry_points.txt, the zip says 40 B": {
            "bench-1.0.dist-info/entry_points.txt": (entry_size, b"[console_scripts]\n" + comments, deflated)},
    }
    print(f"imagectl at {args.code}; Python {sys.version.split()[0]}; {os.cpu_count()} cores; "
          f"target: peak under {TARGET_MB} MB over the baseline")
    print(f"{'wheel':52} {'peak MB':>8} {'over base':>9} {'s':>6}  outcome")
    over, base = False, None
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-wheel-") as temp:
        for n, (label, members) in enumerate(rows.items()):
            folder = Path(temp) / f"row{n}"
            folder.mkdir()
            wheel = make_wheel(folder, "wheel", members)
            if "the zip says" in label:
                claim_size(wheel, "bench-1.0.dist-info/entry_points.txt", 40)
            result = measure(args.code, wheel, folder / "work")
            peak = float(result["peak_mb"])  # type: ignore[arg-type]
            base = peak if base is None else base
            delta = peak - base
            over = over or delta > TARGET_MB or peak != peak
            print(f"{label:52} {peak:8.1f} {delta:9.1f} {float(result['seconds']):6.1f}  "  # type: ignore[arg-type]
                  f"{result['outcome']}", flush=True)
            subprocess.run(["rm", "-rf", str(folder)], check=False)  # before the next row: disk
    print(f"target (every row under {TARGET_MB} MB over the baseline): {'NOT met' if over else 'met'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
