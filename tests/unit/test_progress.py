"""Progress lines: push byte counts, the heartbeat of a silent step, plain and live displays (no sleeping, no
terminal: the clock and the stream are given)."""

from __future__ import annotations

import io

from imagectl.progress import Heartbeat, LiveDisplay, PushProgress, clock_text, human_bytes, plain_sink


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_push_progress_counts_bytes_of_every_layer_and_throttles():
    clock, lines = Clock(), []
    push = PushProgress(lines.append, every=5.0, clock=clock)
    push.event({"status": "The push refers to repository [x]"})  # no id: not a layer event
    push.event({"status": "Preparing", "id": "aaa"})
    push.event({"status": "Preparing", "id": "bbb"})
    push.event({"status": "Layer already exists", "id": "ccc"})
    push.event({"status": "Pushing", "id": "aaa", "progressDetail": {"current": 500_000_000, "total": 2_000_000_000}})
    assert lines == []  # nothing before 5 s
    clock.now += 6
    push.event({"status": "Pushing", "id": "bbb", "progressDetail": {"current": 1_000_000, "total": 3_000_000_000}})
    assert lines == ["push: 501.0 MB of 5.0 GB uploading (1 of 3 layers done)"]
    push.event({"status": "Pushed", "id": "aaa"})
    push.event({"status": "Pushed", "id": "bbb"})
    push.finish()
    assert lines[-1] == "push: 5.0 GB uploaded in 2 layers, 1 layers the registry already had"


def test_a_silent_step_gets_a_heartbeat_naming_the_step():
    clock, lines = Clock(), []
    beat = Heartbeat(lines.append, "building", every=15.0, clock=clock)
    beat.sink("Step 7/12 : RUN pip install --no-deps --require-hashes -r /opt/imagectl/lock-1-cuda.txt")
    clock.now += 10
    assert beat.beat() is None
    clock.now += 20
    line = beat.beat()
    assert line == ("still building step 7/12: RUN pip install --no-deps --require-hashes -r /opt/imagectl/ "
                    "(30 s without output, 00:30 elapsed)")
    assert beat.beat() is None  # the beat counts as output: the next one 15 s later
    clock.now += 15
    assert beat.beat().startswith("still building step 7/12")


def test_the_heartbeat_thread_stops_with_the_block():
    lines = []
    with Heartbeat(lines.append, "pushing", every=0.01) as beat:
        beat.sink("x")
    assert lines[0] == "x"


def test_plain_lines_are_timestamped_and_never_carry_a_carriage_return():
    clock, out = Clock(), io.StringIO()
    sink = plain_sink(out, "[torch-2.3-cu121] ", clock=clock)
    clock.now += 83
    sink("Downloading 731.7 MB\r 50%\r100%")
    assert out.getvalue() == "[01:23] [torch-2.3-cu121] Downloading 731.7 MB  50% 100%\n"
    assert "\r" not in out.getvalue()


def test_the_live_display_redraws_one_row_per_profile():
    clock, out = Clock(), io.StringIO()
    live = LiveDisplay(out, width=40, clock=clock)
    a, b = live.sink("a"), live.sink("b")
    a("building")
    b("locking")
    text = out.getvalue()
    assert text.count("\x1b[2K") == 4 and "\x1b[2F" in text  # two rows drawn twice, the second time in place
    assert text.endswith("\x1b[2Ka [00:00] building\n\x1b[2Kb [00:00] locking\n")
    b("x" * 100)
    assert max(len(row) for row in out.getvalue().split("\x1b[2K")) <= 41


def test_sizes_and_times():
    assert (human_bytes(999), human_bytes(5_740_839_214)) == ("999 B", "5.7 GB")
    assert (clock_text(59), clock_text(3725)) == ("00:59", "1:02:05")
