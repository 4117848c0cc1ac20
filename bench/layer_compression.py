"""The cost of zstd lock layers (``[registry] compression = "zstd"``, issue 35 item 5) on real wheels: the layer
writer's time and bytes with gzip (the wheels' deflate streams copied as they are, imagectl.assemble.layer) and with
zstd (every member inflated and compressed again, imagectl.assemble.zstd_stream), and what a node then spends
decompressing each layer, single-threaded as the engines do it (containerd and Docker's Go gzip and zstd readers
are single-threaded; ``unpigz``, where on PATH, also only inflates on one core).

    python3 bench/layer_compression.py WHEEL [WHEEL ...] [--writers 2]

Every member of each wheel is written as a file under ``/opt/venv/lib/python3.11/site-packages`` of one layer per
compression (the lock layer's shape, without RECORD and scripts).  ``--writers N``: the wheels are split over N
layers written at once on N threads, as the assembled build writes two install layers at a time (the wall time then
shows whether the compressors run in parallel: the C extension lets go of the GIL).

Columns: compression, write s (wall), blob MB, tar MB, ratio (tar / blob), then the decompression of the blobs to
/dev/null: ``gzip -dc`` or ``zstd -dc`` (GNU gzip and the zstd program), and in Python (the gzip module, the
zstandard module).  Prints the machine's core count and load average first: on a shared VM every row is noisy.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from imagectl.assemble.layer import (EXEC_MODE, FILE_MODE, Compression, LayerBlob, LayerWriter,  # noqa: E402
                                     blob_name, writer_name)
from imagectl.assemble.wheel import read_wheel  # noqa: E402

SITE = "/opt/venv/lib/python3.11/site-packages"


def write(wheels: list[Path], dest: Path, compression: Compression) -> LayerBlob:
    with LayerWriter(dest, compression) as out:
        for path in wheels:
            for member in read_wheel(path).members:
                out.add_member(f"{SITE}/{member.name}", path, member, EXEC_MODE if member.executable else FILE_MODE)
    return out.close()


def timed_command(argv: list[str], blob: Path) -> float | None:
    if shutil.which(argv[0]) is None:
        return None
    started = time.monotonic()
    with blob.open("rb") as source:
        subprocess.run(argv, stdin=source, stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - started


def reader(raw: BinaryIO, compression: Compression) -> BinaryIO:
    """``raw`` decompressed, with the gzip module or the zstandard module."""
    import zstandard

    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    return zstandard.ZstdDecompressor().stream_reader(raw)  # type: ignore[return-value]


def timed_python(blob: Path, compression: Compression) -> float:
    started = time.monotonic()
    with blob.open("rb") as raw:
        stream = reader(raw, compression)
        while stream.read(1 << 20):
            pass
    return time.monotonic() - started


def row(wheels: list[Path], folder: Path, compression: Compression, writers: int) -> str:
    groups = [wheels[n::writers] for n in range(writers)]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=writers) as pool:
        blobs = list(pool.map(lambda n: write(groups[n], folder / blob_name(f"layer-{n}", compression), compression),
                              range(writers)))
    seconds = time.monotonic() - started
    size = sum(b.size for b in blobs)
    tar = sum(len_of_tar(b, compression) for b in blobs)
    cli = ["gzip", "-dc"] if compression == "gzip" else ["zstd", "-dcq"]
    times = [timed_command(cli, b.path) for b in blobs]
    cli_s = "n/a" if None in times else f"{sum(t for t in times if t is not None):.1f}"
    python_s = sum(timed_python(b.path, compression) for b in blobs)
    for blob in blobs:
        blob.path.unlink()
    return (f"{compression:<5} {seconds:8.1f} {size / 1e6:9.1f} {tar / 1e6:9.1f} {tar / size:6.2f} "
            f"{cli_s:>10} {python_s:10.1f}")


def len_of_tar(blob: LayerBlob, compression: Compression) -> int:
    total = 0
    with blob.path.open("rb") as raw:
        stream = reader(raw, compression)
        while chunk := stream.read(1 << 20):
            total += len(chunk)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--writers", type=int, default=2)
    args = parser.parse_args()
    print(f"cores {os.cpu_count()}, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"writers {args.writers}; gzip: {writer_name('gzip')}, zstd: {writer_name('zstd')}")
    print(f"wheels: {sum(w.stat().st_size for w in args.wheels) / 1e6:.1f} MB: {' '.join(w.name for w in args.wheels)}")
    print(f"{'comp':<5} {'write s':>8} {'blob MB':>9} {'tar MB':>9} {'ratio':>6} {'cli dec s':>10} {'py dec s':>10}")
    with tempfile.TemporaryDirectory(prefix="imagectl-bench-") as tmp:
        for compression in ("gzip", "zstd"):
            print(row(args.wheels, Path(tmp), compression, args.writers), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
