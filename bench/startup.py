"""Start-up cost of imagectl's matrix commands against the bare interpreter, cold and warm, in one run.

    python bench/startup.py [--runs 20]

Runs ``python -c pass``, ``python -c "import click"`` (the baseline: the least a click CLI costs) and
``python -m imagectl show torch-2.3-cu121``, ``validate`` and ``list`` interleaved, each twice: **cold** (a fresh,
empty ``XDG_CACHE_HOME`` for every run) and **warm** (one ``XDG_CACHE_HOME`` that earlier runs filled).  It prints
the median wall time of each and its ratio to the baseline.  Target (issue 18): ``show`` cold under 2x the
baseline; imagectl keeps no result of these commands between runs (imagectl/cache.py), so cold and warm should
agree.  Every command is the interpreter itself (``sys.executable``, never a launcher shim such as pyenv's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = 2.0
TARGETED = "imagectl show torch-2.3-cu121 (cold)"
BASELINE = "python -c 'import click'"
IMAGECTL = {
    "imagectl show torch-2.3-cu121": ["show", "torch-2.3-cu121"],
    "imagectl validate": ["validate"],
    "imagectl list": ["list"],
}


# show with packaging.specifiers imported first: what the matrix model's own comparison of Python ranges saves
# (imagectl/matrix/model.py, _admits) over importing packaging's specifier parser at start-up
WITH_SPECIFIERS = ("import packaging.specifiers, runpy, sys; sys.argv = ['imagectl', 'show', 'torch-2.3-cu121']; "
                   "runpy.run_module('imagectl', run_name='__main__')")


def commands() -> dict[str, tuple[list[str], bool]]:
    """name -> (argv, cold): the baselines, then each imagectl command cold and warm."""
    out = {"python -c pass": ([sys.executable, "-c", "pass"], False),
           BASELINE: ([sys.executable, "-c", "import click"], False)}
    for name, args in IMAGECTL.items():
        for cold in (True, False):
            out[f"{name} ({'cold' if cold else 'warm'})"] = ([sys.executable, "-m", "imagectl", *args], cold)
    out["imagectl show, packaging.specifiers loaded (warm)"] = ([sys.executable, "-c", WITH_SPECIFIERS], False)
    return out


def timed(argv: list[str], cache_home: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMAGECTL_")} | {"XDG_CACHE_HOME": cache_home}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode()[-500:]}")
    return elapsed


def run(argv: list[str], cold: bool, warm_home: str) -> float:
    """One timed run: cold in an empty cache folder of its own, warm in the shared one."""
    if not cold:
        return timed(argv, warm_home)
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-cold-") as home:
        return timed(argv, home)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    # an installed wheel carries compiled bytecode; a source checkout under PYTHONDONTWRITEBYTECODE does not
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "imagectl")], check=True)
    table = commands()
    samples: dict[str, list[float]] = {name: [] for name in table}
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-warm-") as warm_home:
        for argv, cold in table.values():  # warm the OS caches and the warm cache folder once
            run(argv, cold, warm_home)
        for _ in range(args.runs):
            for name, (argv, cold) in table.items():
                samples[name].append(run(argv, cold, warm_home))
    base = statistics.median(samples[BASELINE])
    print(f"{'command':40} {'median ms':>10} {'ratio':>6}")
    for name, values in samples.items():
        print(f"{name:40} {statistics.median(values) * 1000:10.1f} {statistics.median(values) / base:6.2f}")
    ratio = statistics.median(samples[TARGETED]) / base
    print(f"{TARGETED} is {ratio:.2f}x {BASELINE} (target < {TARGET}): {'met' if ratio < TARGET else 'NOT met'}")
    print(f"interpreter: {sys.executable}")
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
