"""Following pip in a build log: what pip is doing now, what it downloaded, and one summary line per pip step.

pip is the image's own, often 22 or 23, so it cannot be asked for a raw progress bar: the log is read instead.
:class:`PipLog` knows pip's current activity, ``downloading FILE (SIZE)``, ``installing N packages`` or
``committing the layer`` (the silence after ``Successfully installed`` until the engine's next line), and
records each downloaded wheel as a :class:`PipDownload` (name, version, bytes as pip printed them, seconds from
its ``Downloading`` line to the next line).  At each ``Successfully installed`` it gives one summary line
(:func:`pip_summary`)::

    pip: 12 packages, 1.9 GB downloaded in 25 s, installed in 30 s: nvidia-cudnn-cu12 731.7 MB 8 s, ... +7 smaller

The packages are the installed ones; "downloaded in" runs from the step's first ``Collecting`` to
``Installing collected packages``, "installed in" from there to ``Successfully installed``.  At most the 5
largest downloads are listed (fewer where the line would pass 240 characters), then how many more; a download
pip gave no size for is listed without one and makes the total "at least X"; a step that downloaded nothing
(local files, pip's cache) says "nothing downloaded".  An unknown line is ignored, and so is any line the
parser fails on: it never raises into a build.

It takes its clock as an argument, so it is tested without sleeping.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..lock.lockfile import canonical_name
from . import Clock
from .units import count_of, human_bytes

STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")  # the engine's line that starts a Dockerfile step

_SIZE_UNITS = {"b": 1, "byte": 1, "bytes": 1, "kb": 1000, "mb": 1000 ** 2, "gb": 1000 ** 3, "tb": 1000 ** 4,
                  "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")
_DOWNLOADING_RE = re.compile(r"^\s*Downloading (\S+)(?: \(([^()]*)\))?\s*$")
_COLLECTING_RE = re.compile(r"^\s*Collecting ([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:===?\s*([^\s;,()]+))?")
_BAR_RE = re.compile(r"^\s*[^\w\s]+.*?(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)\s*[A-Za-z]+")
_INSTALLING = "Installing collected packages:"
_INSTALLED = "Successfully installed"
SUMMARY_LISTED = 5  # downloads named in a summary line, the largest
SUMMARY_WIDTH = 240  # ... fewer where the line would be longer
_FILE_WIDTH = 70  # of a file name in a heartbeat line


def _packages(count: int) -> str:
    return count_of(count, "package")


def parse_pip_size(text: str) -> int | None:
    """Bytes of a size as pip prints it (``823 kB``, ``410.6 MB``, ``1.2 GB``, ``512 bytes``: decimal units;
    ``MiB`` and the like binary), or None for anything else."""
    match = _SIZE_RE.match(text)
    factor = _SIZE_UNITS.get(match[2].lower()) if match else None
    return round(float(match[1]) * factor) if match and factor else None


def wheel_name_version(filename: str) -> tuple[str, str] | None:
    """``(name, version)`` of a wheel file name (PEP 427: ``{name}-{version}(-{build})?-{py}-{abi}-{plat}.whl``,
    the name made canonical), or None when ``filename`` is no wheel's."""
    parts = filename[:-4].split("-") if filename.endswith(".whl") else []
    if len(parts) not in (5, 6) or not parts[0] or not parts[1]:
        return None
    return canonical_name(parts[0]), parts[1]


def _file_of(target: str) -> str:
    """The file name in pip's ``Downloading`` target: a URL (its last path segment) or a bare file name."""
    return unquote(urlsplit(target).path.rstrip("/").rsplit("/", 1)[-1]) or target


@dataclass(frozen=True)
class PipDownload:
    """One wheel pip downloaded: ``bytes`` as pip printed its size (pip rounds: 0.1 MB, 1 kB), None when it
    printed none; ``seconds`` from its ``Downloading`` line to the next line."""

    name: str
    version: str
    bytes: int | None
    seconds: float


def pip_summary(installed: int, downloads: Sequence[PipDownload], download_seconds: float,
                install_seconds: float | None) -> str:
    """The line that ends a pip step (see the module's docstring for its wording)."""
    head = f"pip: {_packages(installed)}, "
    if downloads:
        total = sum(d.bytes or 0 for d in downloads)
        least = "at least " if any(d.bytes is None for d in downloads) else ""
        head += f"{least}{human_bytes(total)} downloaded in {download_seconds:.0f} s"
    else:
        head += "nothing downloaded"
    if install_seconds is not None:
        head += f", installed in {install_seconds:.0f} s"
    return head + _listed(downloads, len(head))


def _listed(downloads: Sequence[PipDownload], width: int) -> str:
    """``: NAME SIZE N s, ... +K smaller``: the largest downloads that fit."""
    ranked = sorted(downloads, key=lambda d: (d.bytes if d.bytes is not None else -1, d.seconds), reverse=True)
    entries = [" ".join([d.name, *([human_bytes(d.bytes)] if d.bytes is not None else []), f"{d.seconds:.0f} s"])
               for d in ranked]
    shown: list[str] = []
    for entry in entries[:SUMMARY_LISTED]:
        if shown and width + len(": " + ", ".join([*shown, entry])) + len(" +999 smaller") > SUMMARY_WIDTH:
            break
        shown.append(entry)
    if not shown:
        return ""
    more = f" +{len(entries) - len(shown)} smaller" if len(entries) > len(shown) else ""
    return ": " + ", ".join(shown) + more


@dataclass
class _Open:
    """The download pip is on: what it will be recorded as, since when, its heartbeat text."""

    name: str
    version: str
    size: int | None
    started: float
    text: str


class PipLog:
    """Follows pip through a build log, one line at a time (:meth:`feed`), a ``Step N/M`` line starting over:
    what pip is doing now (:meth:`activity`), the wheels it downloaded (:attr:`downloads`, the whole build's)
    and, at each ``Successfully installed``, the summary line of the step.  Not thread-safe (the caller
    locks)."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.downloads: list[PipDownload] = []
        self._reset()

    def _reset(self) -> None:
        self._step: list[PipDownload] = []
        self._open: _Open | None = None
        self._collecting: float | None = None  # the step's first Collecting
        self._wanted: tuple[str, str] | None = None  # name and version of the last Collecting
        self._installing: tuple[int, float] | None = None  # packages and since when
        self._committing = False

    def feed(self, line: str) -> str | None:
        """Take one log line; return the summary line when it ends a pip step.  Never raises."""
        try:
            return self._feed(line.rstrip(), self._clock())
        except Exception:  # a line the parser did not foresee must not break a build
            return None

    def activity(self) -> str | None:
        """What pip is doing now (``downloading FILE (SIZE)``, ``installing N packages``, ``committing the
        layer``), or None when nothing pip is known to be going on."""
        if self._open is not None:
            return self._open.text
        if self._committing:
            return "committing the layer"
        return f"installing {_packages(self._installing[0])}" if self._installing else None

    def _feed(self, line: str, now: float) -> str | None:
        if self._open is not None and not _bar_in_progress(line):
            self._close(now)
        if STEP_RE.match(line):
            self._reset()
        elif line.startswith(" ---> ") or line.startswith("Removing intermediate container"):
            self._committing = False  # the engine's own lines: the step's layer is committed
        elif line.lstrip().startswith(_INSTALLED):
            return self._installed(line, now)
        elif line.lstrip().startswith(_INSTALLING):
            names = [n for n in line.split(":", 1)[1].split(",") if n.strip()]
            self._installing = (len(names), now)
        elif match := _COLLECTING_RE.match(line):
            self._collecting = now if self._collecting is None else self._collecting
            self._wanted = (canonical_name(match[1]), match[2] or "")
        elif match := _DOWNLOADING_RE.match(line):
            self._downloading(match[1], match[2], now)
        return None

    def _downloading(self, target: str, size_text: str | None, now: float) -> None:
        filename = _file_of(target)
        if filename.endswith(".metadata"):
            return  # PEP 658 metadata, not the package
        name, version = wheel_name_version(filename) or self._wanted or (filename, "")
        shown = filename if len(filename) <= _FILE_WIDTH else filename[: _FILE_WIDTH - 3] + "..."
        text = f"downloading {shown}" + (f" ({size_text})" if size_text else "")
        self._collecting = now if self._collecting is None else self._collecting
        self._open = _Open(name, version, parse_pip_size(size_text or ""), now, text)

    def _close(self, now: float) -> None:
        done, self._open = self._open, None
        if done is not None:
            download = PipDownload(done.name, done.version, done.size, round(now - done.started, 1))
            self._step.append(download)
            self.downloads.append(download)

    def _installed(self, line: str, now: float) -> str:
        names = line.split(_INSTALLED, 1)[1].split()
        since = self._installing[1] if self._installing else None
        collected = (since if since is not None else now) - self._collecting if self._collecting is not None else 0.0
        summary = pip_summary(len(names) or len(self._step), self._step, collected,
                              None if since is None else now - since)
        self._installing, self._committing = None, True
        return summary


def _bar_in_progress(line: str) -> bool:
    """A progress bar line short of its total (``━━━ 200.1/410.6 MB``): the download goes on."""
    match = _BAR_RE.match(line)
    return bool(match) and float(match[1]) < float(match[2])
