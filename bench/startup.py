"""Start-up cost of imagectl's matrix commands against the bare interpreter, in one run.

    python bench/startup.py [--runs 20]

Runs ``python -c pass``, ``python -m imagectl validate`` (the shipped matrix, every rule, every template
shape) and ``python -m imagectl show torch-2.3-cu121`` interleaved, and prints the median wall time of each
and its ratio to the bare interpreter.  Target: each ratio under 2.5 (with the result cache warm, as after
the first run; the uncached runs are printed too).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 2.5
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "imagectl validate": [sys.executable, "-m", "imagectl", "validate"],
    "imagectl show torch-2.3-cu121": [sys.executable, "-m", "imagectl", "show", "torch-2.3-cu121"],
    # the same without the result cache (imagectl/cache.py): what a first run after a change costs
    "imagectl validate (no cache)": ["env", "IMAGECTL_NO_CACHE=1", sys.executable, "-m", "imagectl", "validate"],
    "imagectl show (no cache)": [
        "env", "IMAGECTL_NO_CACHE=1", sys.executable, "-m", "imagectl", "show", "torch-2.3-cu121"
    ],
}
TARGETED = ("imagectl validate", "imagectl show torch-2.3-cu121")


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode()[-500:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    # an installed wheel carries compiled bytecode; a source checkout under PYTHONDONTWRITEBYTECODE does not
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "imagectl")], check=True)
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for name, argv in COMMANDS.items():  # warm the OS caches once
        timed(argv)
    for _ in range(args.runs):
        for name, argv in COMMANDS.items():
            samples[name].append(timed(argv))
    base = statistics.median(samples["python -c pass"])
    worst = 0.0
    print(f"{'command':32} {'median ms':>10} {'ratio':>6}")
    for name, values in samples.items():
        ratio = statistics.median(values) / base
        worst = max(worst, ratio) if name in TARGETED else worst
        print(f"{name:32} {statistics.median(values) * 1000:10.1f} {ratio:6.2f}")
    print(f"worst ratio {worst:.2f} (target < {TARGET}): {'met' if worst < TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
