"""Progress lines: push byte counts, the heartbeat of a silent step, plain and live displays (no sleeping, no
terminal: the clock and the stream are given)."""

from __future__ import annotations

import io

from imagectl.cli.live_display import LiveDisplay, plain_sink
from imagectl.progress.heartbeat import Heartbeat
from imagectl.progress.piplog import PipDownload, PipLog, parse_pip_size, pip_summary, wheel_name_version
from imagectl.progress.push import PushProgress
from imagectl.progress.units import clock_text, human_bytes


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
    assert lines[-1] == "push: 5.0 GB uploaded in 2 layers, 1 layer the registry already had"


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


# A real non-TTY build log of a pip step (pip 24 in the image: rich bars, file names), as plain_sink stamped it.
REAL_LOG = """\
[00:59] Step 10/21 : RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: -r /opt/imagectl/lock-1-cuda.txt
[00:59]  ---> Running in 4f1c2a9b7d3e
[00:59] Collecting nvidia-cublas-cu12==12.1.3.1 (from -r /opt/imagectl/lock-1-cuda.txt (line 3))
[01:00]   Downloading nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl (410.6 MB)
[01:03]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 410.6/410.6 MB 252.8 MB/s eta 0:00:00
[01:04] Collecting nvidia-cuda-cupti-cu12==12.1.105
[01:04]   Downloading nvidia_cuda_cupti_cu12-12.1.105-py3-none-manylinux1_x86_64.whl (14.1 MB)
[01:04]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 14.1/14.1 MB 108.0 MB/s eta 0:00:00
[01:05] Collecting nvidia-cuda-runtime-cu12==12.1.105
[01:05]   Downloading nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl (823 kB)
[01:06]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 823.6/823.6 kB 40.1 MB/s eta 0:00:00
[01:06] Collecting nvidia-cudnn-cu12==8.9.2.26
[01:06]   Downloading nvidia_cudnn_cu12-8.9.2.26-py3-none-manylinux1_x86_64.whl (731.7 MB)
[01:14]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 731.7/731.7 MB 91.3 MB/s eta 0:00:00
[01:14] Collecting nvidia-nvtx-cu12==12.1.105
[01:14]   Downloading nvidia_nvtx_cu12-12.1.105-py3-none-manylinux1_x86_64.whl (99 kB)
[01:15] Collecting nvidia-nccl-cu12==2.20.5
[01:15]   Downloading nvidia_nccl_cu12-2.20.5-py3-none-manylinux2014_x86_64.whl (176.2 MB)
[01:17]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 176.2/176.2 MB 88.0 MB/s eta 0:00:00
[01:17] Collecting nvidia-cusparse-cu12==12.1.0.106
[01:17]   Downloading nvidia_cusparse_cu12-12.1.0.106-py3-none-manylinux1_x86_64.whl (196.0 MB)
[01:20]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 196.0/196.0 MB 70.2 MB/s eta 0:00:00
[01:20] Collecting nvidia-cufft-cu12==11.0.2.54
[01:20]   Downloading nvidia_cufft_cu12-11.0.2.54-py3-none-manylinux1_x86_64.whl (121.6 MB)
[01:24]      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 121.6/121.6 MB 30.4 MB/s eta 0:00:00
[01:24] Installing collected packages: nvidia-nvtx-cu12, nvidia-cuda-runtime-cu12, nvidia-cuda-cupti-cu12, nvidia-cublas-cu12, nvidia-cudnn-cu12, nvidia-nccl-cu12, nvidia-cusparse-cu12, nvidia-cufft-cu12
[01:39] still building step 10/21: RUN pip install --no-cache-dir --no-deps --require-hashes -- (15 s without output, 01:35 elapsed)
[01:54] Successfully installed nvidia-cublas-cu12-12.1.3.1 nvidia-cuda-cupti-cu12-12.1.105 nvidia-cuda-runtime-cu12-12.1.105 nvidia-cudnn-cu12-8.9.2.26 nvidia-cufft-cu12-11.0.2.54 nvidia-cusparse-cu12-12.1.0.106 nvidia-nccl-cu12-2.20.5 nvidia-nvtx-cu12-12.1.105
[01:55] WARNING: Running pip as the 'root' user can result in broken permissions and conflicting behaviour
[02:14] still building step 10/21: RUN pip install --no-cache-dir --no-deps --require-hashes -- (20 s without output, 02:10 elapsed)
[02:44] still building step 10/21: ...
[02:45]  ---> Removed intermediate container 4f1c2a9b7d3e
[02:45]  ---> 0c7d2e1f9a8b
[02:45] Step 11/21 : COPY lock-2-framework.txt /opt/imagectl/lock-2-framework.txt
"""  # noqa: E501 (the log as it is)

# pip 22/23 without a terminal: the URL of a non-PyPI index, no bar, small files printed in bytes.
OLD_PIP_LOG = """\
[00:10] Step 12/21 : RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: -r /opt/imagectl/lock-2-framework.txt
[00:10] Collecting torch==2.3.1
[00:11]   Downloading http://127.0.0.1:8080/files/torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl#sha256=ab12 (779.2 MB)
[00:41] Collecting triton==2.3.1
[00:42]   Downloading https://download.example.com/packages/triton-2.3.1-0-cp311-cp311-manylinux2014_x86_64.whl (1.2 GB)
[01:02] Collecting filelock==3.15.4
[01:02]   Downloading http://127.0.0.1:8080/files/filelock-3.15.4-py3-none-any.whl (512 bytes)
[01:03] Collecting Typing_Extensions==4.12.2
[01:03]   Downloading http://127.0.0.1:8080/files/typing_extensions-4.12.2-py3-none-any.whl
[01:05] Installing collected packages: typing-extensions, filelock, triton, torch
[01:35] Successfully installed filelock-3.15.4 torch-2.3.1 triton-2.3.1 typing-extensions-4.12.2
"""  # noqa: E501 (the log as it is)


def stamped(text: str) -> list[tuple[float, str]]:
    """``[mm:ss] line`` -> (seconds, line), the heartbeat's own lines left out (they are no engine output)."""
    out = []
    for row in text.splitlines():
        minutes, seconds, line = int(row[1:3]), int(row[4:6]), row[8:]
        if not line.startswith("still building"):
            out.append((minutes * 60.0 + seconds, line))
    return out


def follow(text: str, clock: Clock | None = None) -> tuple[PipLog, list[str | None], list[str | None]]:
    """Feed a stamped log to a PipLog: it, the summary after each line and the activity after each line."""
    clock = clock or Clock()
    pip, summaries, activities = PipLog(clock), [], []
    for when, line in stamped(text):
        clock.now = when
        summaries.append(pip.feed(line))
        activities.append(pip.activity())
    return pip, summaries, activities


def test_pip_log_records_each_download_with_its_version_size_and_seconds():
    pip, _, _ = follow(REAL_LOG)
    assert pip.downloads[:3] == [
        PipDownload("nvidia-cublas-cu12", "12.1.3.1", 410_600_000, 3.0),
        PipDownload("nvidia-cuda-cupti-cu12", "12.1.105", 14_100_000, 0.0),
        PipDownload("nvidia-cuda-runtime-cu12", "12.1.105", 823_000, 1.0),
    ]
    assert [d.name for d in pip.downloads][3:] == ["nvidia-cudnn-cu12", "nvidia-nvtx-cu12", "nvidia-nccl-cu12",
                                                  "nvidia-cusparse-cu12", "nvidia-cufft-cu12"]
    assert pip.downloads[4] == PipDownload("nvidia-nvtx-cu12", "12.1.105", 99_000, 1.0)  # no bar: to the next line


def test_pip_log_ends_the_step_with_one_summary_line_largest_first():
    _, summaries, _ = follow(REAL_LOG)
    lines = [line for _, line in stamped(REAL_LOG)]
    [summary] = [s for s in summaries if s]
    assert lines[summaries.index(summary)].startswith("Successfully installed")  # it follows that line
    assert summary == ("pip: 8 packages, 1.7 GB downloaded in 25 s, installed in 30 s: nvidia-cudnn-cu12 731.7 MB 8 s, "
                       "nvidia-cublas-cu12 410.6 MB 3 s, nvidia-cusparse-cu12 196.0 MB 3 s, "
                       "nvidia-nccl-cu12 176.2 MB 2 s, nvidia-cufft-cu12 121.6 MB 4 s +3 smaller")


def test_pip_log_knows_what_pip_is_doing():
    _, _, activities = follow(REAL_LOG)
    lines = [line for _, line in stamped(REAL_LOG)]

    def after(prefix: str) -> str | None:
        return activities[next(i for i, line in enumerate(lines) if line.startswith(prefix))]

    assert after("Step 10/21") is None and after("Collecting nvidia-cublas") is None
    assert after("  Downloading nvidia_cublas") == \
        "downloading nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl (410.6 MB)"
    assert after("     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 410.6") is None  # that download is done
    assert after("Installing collected packages") == "installing 8 packages"
    assert after("Successfully installed") == "committing the layer"
    assert after("WARNING: Running pip as the 'root'") == "committing the layer"
    assert after(" ---> Removed intermediate") is None and activities[-1] is None


def test_a_bar_short_of_its_total_keeps_the_download_going():
    clock = Clock()
    pip = PipLog(clock)
    pip.feed("  Downloading torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl (779.2 MB)")
    clock.now += 5
    pip.feed("     ━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━━━━━━━ 200.1/779.2 MB 40.0 MB/s eta 0:00:15")
    assert pip.activity() == "downloading torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl (779.2 MB)"
    clock.now += 15
    pip.feed("     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 779.2/779.2 MB 40.0 MB/s eta 0:00:00")
    assert pip.downloads == [PipDownload("torch", "2.3.1", 779_200_000, 20.0)] and pip.activity() is None


def test_old_pip_prints_urls_no_bars_and_sometimes_no_size():
    pip, summaries, activities = follow(OLD_PIP_LOG)
    assert pip.downloads == [
        PipDownload("torch", "2.3.1", 779_200_000, 30.0),
        PipDownload("triton", "2.3.1", 1_200_000_000, 20.0),  # a build tag (0) in the file name
        PipDownload("filelock", "3.15.4", 512, 1.0),
        PipDownload("typing-extensions", "4.12.2", None, 2.0),
    ]
    assert activities[2] == "downloading torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl (779.2 MB)"  # no URL
    assert activities[-3] == "downloading typing_extensions-4.12.2-py3-none-any.whl"
    assert summaries[-1] == ("pip: 4 packages, at least 2.0 GB downloaded in 55 s, installed in 30 s: "
                             "triton 1.2 GB 20 s, torch 779.2 MB 30 s, filelock 512 B 1 s, typing-extensions 2 s")


def test_pip_log_ignores_what_it_does_not_know_and_never_raises():
    clock = Clock()
    pip = PipLog(clock)
    for line in ["", "   ", "Processing ./wheels/einops-0.8.0-py3-none-any.whl", "Using cached x-1.0-py3-none-any.whl",
                 "Downloading", "Downloading ??? (lots)", "Downloading einops-0.8.0.whl.metadata (1.2 kB)",
                 "Requirement already satisfied: pip in /opt/venv/lib/python3.11/site-packages (23.0.1)",
                 "[notice] A new release of pip is available: 23.0.1 -> 24.1", "Installing collected packages:",
                 "Successfully installed", "\x00\udcff garbage ━━━ 1/0 MB", "Collecting", None]:
        clock.now += 1
        pip.feed(line)  # type: ignore[arg-type]  (None: a line that is no string at all)
    assert pip.downloads == [PipDownload("???", "", None, 1.0)]
    assert pip.activity() == "committing the layer"


def test_a_step_that_downloaded_nothing_says_so():
    clock = Clock()
    pip = PipLog(clock)
    pip.feed("Step 3/5 : RUN pip install /wheels/*.whl")
    pip.feed("Processing /wheels/einops-0.8.0-py3-none-any.whl")
    pip.feed("Installing collected packages: einops")
    clock.now += 2
    assert pip.feed("Successfully installed einops-0.8.0") == "pip: 1 package, nothing downloaded, installed in 2 s"


def test_sizes_wheel_names_and_a_long_summary():
    sizes = ("823 kB", "99 kB", "1.2 GB", "410.6 MB", "512 bytes", "1.5 MiB", "x", "3 parsecs")
    assert [parse_pip_size(t) for t in sizes] == [823_000, 99_000, 1_200_000_000, 410_600_000, 512, 1_572_864, None,
                                                  None]
    assert wheel_name_version("Nvidia_CUDNN_cu12-8.9.2.26-py3-none-manylinux1_x86_64.whl") == ("nvidia-cudnn-cu12",
                                                                                                  "8.9.2.26")
    assert wheel_name_version("einops-0.8.0.tar.gz") is None and wheel_name_version("a-b.whl") is None
    many = [PipDownload(f"package-with-a-rather-long-name-{n:02d}", "1.0", n * 10**6, 1.0) for n in range(30)]
    line = pip_summary(30, many, 10, 5)
    assert len(line) <= 240 and line.endswith(" smaller") and "package-with-a-rather-long-name-29 29.0 MB 1 s" in line


def test_the_heartbeat_names_what_pip_is_doing():
    clock, lines = Clock(), []
    beat = Heartbeat(lines.append, "building", every=15.0, clock=clock, pip=PipLog(clock))
    beat.sink("Step 10/21 : RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: -r x")
    beat.sink("Collecting torch==2.3.1")
    clock.now += 15
    assert beat.beat() == ("still building step 10/21: RUN pip install --no-cache-dir --no-deps --require-hashes -- "
                           "(15 s without output, 00:15 elapsed)")  # nothing of pip's known yet: the command
    name = "torch-2.3.1-cp311-cp311-manylinux1_x86_64.whl"
    beat.sink(f"  Downloading https://download.pytorch.org/whl/cu121/{name}?x=1#sha256=00 (779.2 MB)")
    clock.now += 20
    assert beat.beat() == (f"still building step 10/21: downloading {name} (779.2 MB) (20 s without output, "
                           "00:35 elapsed)")
    beat.sink("Installing collected packages: " + ", ".join(f"p{n}" for n in range(12)))
    clock.now += 15
    assert beat.beat() == "still building step 10/21: installing 12 packages (15 s without output, 00:50 elapsed)"
    beat.sink("Successfully installed torch-2.3.1")
    assert lines[-2:] == ["Successfully installed torch-2.3.1",
                          "pip: 1 package, 779.2 MB downloaded in 35 s, installed in 15 s: torch 779.2 MB 20 s"]
    clock.now += 20
    assert beat.beat() == "still building step 10/21: committing the layer (20 s without output, 01:10 elapsed)"
    beat.sink("  Downloading " + "x" * 300 + "-1.0-py3-none-any.whl (1.0 kB)")
    clock.now += 15
    assert len(beat.beat()) < 160


def test_build_json_lists_the_downloads():
    from imagectl.cli.build_views import result_dict
    from imagectl.images.builder import BuildResult

    built = BuildResult("torch-2.3-cu121", "built", downloads=[PipDownload("torch", "2.3.1", 779_200_000, 20.0),
                                                                PipDownload("einops", "0.8.0", None, 0.1)])
    assert result_dict(built)["downloads"] == [
        {"name": "torch", "version": "2.3.1", "bytes": 779_200_000, "seconds": 20.0},
        {"name": "einops", "version": "0.8.0", "bytes": None, "seconds": 0.1}]
    assert result_dict(BuildResult("torch-2.3-cu121", "reused"))["downloads"] == []
