"""Start-up cost of imagectl's matrix commands against the bare interpreter, in one run.

    python bench/startup.py [--runs 20]

Runs ``python -c pass``, ``python -c "import click"`` (the baseline: the least a click CLI costs),
``python -m imagectl validate`` (the shipped matrix, every rule, every template shape) and
``python -m imagectl show torch-2.3-cu121`` interleaved, and prints the median wall time of each and its ratio
to the baseline.  Target (issue 12): each ratio under 1.5 with the result cache warm, as after the first run;
the uncached runs are printed too.  Every command is the interpreter itself (``sys.executable``, never a
launcher shim such as pyenv's or ``env``): the cache switch goes in the child's environment.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 1.5
BASELINE = "python -c 'import click'"
NO_CACHE = {"IMAGECTL_NO_CACHE": "1"}
# name -> (argv, extra environment)
COMMANDS: dict[str, tuple[list[str], dict[str, str]]] = {
    "python -c pass": ([sys.executable, "-c", "pass"], {}),
    BASELINE: ([sys.executable, "-c", "import click"], {}),
    "imagectl validate": ([sys.executable, "-m", "imagectl", "validate"], {}),
    "imagectl show torch-2.3-cu121": ([sys.executable, "-m", "imagectl", "show", "torch-2.3-cu121"], {}),
    # the same without the result cache (imagectl/cache.py): what a first run after a change costs
    "imagectl validate (no cache)": ([sys.executable, "-m", "imagectl", "validate"], NO_CACHE),
    "imagectl show (no cache)": ([sys.executable, "-m", "imagectl", "show", "torch-2.3-cu121"], NO_CACHE),
}
TARGETED = ("imagectl validate", "imagectl show torch-2.3-cu121")


def timed(command: tuple[list[str], dict[str, str]]) -> float:
    import os

    argv, extra = command
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")} | extra
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
    base = statistics.median(samples[BASELINE])
    worst = 0.0
    print(f"{'command':32} {'median ms':>10} {'ratio':>6}")
    for name, values in samples.items():
        ratio = statistics.median(values) / base
        worst = max(worst, ratio) if name in TARGETED else worst
        print(f"{name:32} {statistics.median(values) * 1000:10.1f} {ratio:6.2f}")
    print(f"worst ratio {worst:.2f} to {BASELINE} (target < {TARGET}): {'met' if worst < TARGET else 'NOT met'}")
    print(f"interpreter: {sys.executable}")
    return 0 if worst < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
