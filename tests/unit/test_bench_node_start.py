"""The pure parts of bench/node_start.py: ratios against the hand-written image on the same engine, the run of
median total, the layers by compression, the line that says why a pull failed, and the table."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import node_start as ns  # noqa: E402
from node_start import Layer, Pushed, Timing  # noqa: E402


def _pushed() -> dict[str, Pushed]:
    layers = {"handwritten": (Layer(60_000_000, "gzip", "base"), Layer(3_000_000_000, "gzip", "RUN pip install")),
              "imagectl": (Layer(60_000_000, "gzip", "base"), Layer(900_000_000, "gzip", "lock-2")),
              "imagectl-zstd": (Layer(50_000_000, "zstd", "base"), Layer(900_000_000, "gzip", "lock-2"),
                                Layer(40_000_000, "gzip", "lock-3"))}
    return {image.key: Pushed(image, f"127.0.0.1:5000/{image.key}:latest", layers[image.key]) for image in ns.IMAGES}


TIMINGS = [Timing("docker", "handwritten", 30.0, 2.0, 6_000_000_000),
           Timing("docker", "imagectl", 14.0, 2.0, 6_000_000_000),
           Timing("docker", "imagectl-zstd", error="pull exit 1: unsupported media type"),
           Timing("containerd", "handwritten", 20.0, 0.0, 6_000_000_000),
           Timing("containerd", "imagectl", 9.0, 1.0, 6_000_000_000),
           Timing("containerd", "imagectl-zstd", 8.0, 1.0, 6_000_000_000)]


def test_ratio_is_against_the_hand_written_image_on_the_same_engine():
    assert ns.ratio(TIMINGS[1], TIMINGS) == 0.5  # 16 / 32 (docker), not 16 / 20 (containerd)
    assert ns.ratio(TIMINGS[4], TIMINGS) == 0.5  # 10 / 20
    assert ns.ratio(TIMINGS[2], TIMINGS) is None  # failed: no total
    assert ns.ratio(TIMINGS[1], TIMINGS[1:]) is None  # no baseline measured on docker


def test_median_timing_takes_the_run_of_median_total_and_a_failure_stands_for_the_row():
    runs = [Timing("docker", "imagectl", 5.0, 1.0), Timing("docker", "imagectl", 1.0, 1.0),
            Timing("docker", "imagectl", 3.0, 1.0), Timing("docker", "imagectl", 9.0, 1.0)]
    assert ns.median_timing(runs) is runs[2]  # totals 2, 4, 6, 10: the lower median, 4
    failed = Timing("docker", "imagectl", 2.0, error="run exit 1: boom")
    assert ns.median_timing([*runs, failed]) is failed


def test_layer_summary_counts_each_compression_most_first():
    assert ns.layer_summary(_pushed()["imagectl-zstd"].layers) == "2 gzip + 1 zstd"
    assert ns.layer_summary(()) == ""


def test_error_line_prefers_the_line_that_names_an_error():
    output = "docker: Error response from daemon: no such media type\n\nRun 'docker run --help' for more information\n"
    assert ns.error_line(output) == "docker: Error response from daemon: no such media type"
    assert ns.error_line("just this\n") == "just this"
    assert ns.error_line("") == "(no output)"


def test_table_rows_and_verdicts():
    lines = ns.table(TIMINGS, _pushed(), 2)
    assert len(lines) == 1 + len(TIMINGS)
    docker_imagectl = lines[2].split()
    assert docker_imagectl[:6] == ["docker", "imagectl", "(buildah)", "14.0", "2.0", "16.0"]
    assert "0.50" in docker_imagectl and "960.0" in docker_imagectl  # the ratio; compressed MB
    assert lines[3].endswith("FAILED: pull exit 1: unsupported media type")
    assert "2 gzip + 1 zstd" in lines[6]
    verdicts = ns.verdicts(TIMINGS, _pushed(), real=True)
    assert verdicts[0] == "target: node start at most 0.5x the hand-written image's, on each engine"
    assert verdicts[1].split()[-2:] == ["0.50x", "met"]
    assert verdicts[2].endswith("failed: pull exit 1 (see its row)")
    assert verdicts[4].split()[-3:] == ["zstd", "0.45x", "met"]
    assert ns.verdicts(TIMINGS, _pushed(), real=False)[0].endswith("(stand-in figures: the target is defined on "
                                                                    "the real image)")
