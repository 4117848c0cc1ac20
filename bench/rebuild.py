"""Re-running ``imagectl build`` on an unchanged profile against ``docker build`` of the same rendered
context with a fully warm layer cache, in one run, with a large file in the context.

    python bench/rebuild.py [--sizes 200,800] [--runs 5]

For each size S (MB): a random S MB file is put in the build context ([paths] context, so imagectl's build
key covers it and ``render -o`` writes it), the profile is built once, ``docker build`` of the rendered
context is run once to warm its cache, then both are timed ``--runs`` times, interleaved.  Target: imagectl
at least 5x faster, and flat as the context grows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fixture  # noqa: E402

PROFILE = "torch-2.3-cu121-py3.11"


def run(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_fixture.env(), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return elapsed


def bench_size(setup: _fixture.Setup, size_mb: int, runs: int) -> tuple[float, float]:
    project = setup.workdir / f"project-{size_mb}"
    context = project / "ctx"
    context.mkdir(parents=True)
    with (context / "big.bin").open("wb") as handle:
        for _ in range(size_mb):
            handle.write(os.urandom(1 << 20))
    _fixture.write_config(setup, project, push=False, namespace=f"bench{size_mb}", context_dir=context,
                          build={"engine": '"docker"'})  # render -o must give what `docker build` reads
    run(_fixture.imagectl(project, "build", PROFILE), project)  # the real build, once
    rendered = project / "rendered"
    run(_fixture.imagectl(project, "render", PROFILE, "-o", str(rendered)), project)
    docker = ["docker", "build", "-q", "--network", "host", "-t", f"bench-docker/{size_mb}", str(rendered)]
    run(docker, project)  # warm docker's cache for this context
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(run(_fixture.imagectl(project, "build", PROFILE), project))
        theirs.append(run(docker, project))
    return statistics.median(ours), statistics.median(theirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,800", help="context file sizes in MB, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with ExitStack() as stack:
        setup = _fixture.start(stack, [PROFILE])
        rows = [(size, *bench_size(setup, size, args.runs)) for size in sizes]
    print(f"{'context MB':>10} {'imagectl build s':>17} {'docker build s':>15} {'speed-up':>9}")
    for size, ours, theirs in rows:
        print(f"{size:10d} {ours:17.2f} {theirs:15.2f} {theirs / ours:8.1f}x")
    flat = rows[-1][1] / rows[0][1]
    print(f"imagectl time at {sizes[-1]} MB / at {sizes[0]} MB: {flat:.2f} (flat = about 1)")
    print(f"target: >= 5x faster: {'met' if all(t / o >= 5 for _, o, t in rows) else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
