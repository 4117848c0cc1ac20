"""Which imagectl process made a thing, and whether that process is still running.

A build names what it leaves on the host while it runs (its work folder, its containers, a partial download) after
its process: :class:`Owner`, the process id and the process's start time (``/proc/PID/stat``, field 22: clock ticks
after boot), written ``PID.START`` (:attr:`Owner.token`).  A process id alone is not enough: after a reboot, or on a
busy host, another process gets the same id, and a killed build's leftovers would look alive forever.  With the start
time, :meth:`Owner.alive` is False as soon as the process that made a thing is gone, and the next build (or
``imagectl sweep``) removes what it left (:mod:`imagectl.images.sweep`).  Where ``/proc`` cannot be read (not Linux),
the start time is 0 and only the process id is compared.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

_TOKEN = re.compile(r"(?P<pid>[1-9][0-9]{0,9})\.(?P<start>[0-9]{1,20})")


@dataclass(frozen=True)
class Owner:
    """A process: its id and start time (clock ticks after boot; 0 where unknown)."""

    pid: int
    start: int

    @property
    def token(self) -> str:
        """``PID.START``, as names carry it (letters a container name allows)."""
        return f"{self.pid}.{self.start}"

    @classmethod
    def parse(cls, token: str) -> Owner | None:
        """The owner a :attr:`token` names, or None for text that is not one."""
        match = _TOKEN.fullmatch(token)
        return cls(int(match["pid"]), int(match["start"])) if match else None

    def alive(self) -> bool:
        """Whether this process still runs: its id is in use by a process that started when it did (a process that
        this one may not signal counts as alive)."""
        start = process_start(self.pid)
        if start is None:
            return _exists(self.pid)
        return start >= 0 and (self.start == 0 or start == self.start)


def this_process() -> Owner:
    """The running process as an :class:`Owner`."""
    pid = os.getpid()
    return Owner(pid, max(process_start(pid) or 0, 0))


def host_name() -> str:
    """This host's name as imagectl's names carry it (letters, digits and dots; no ``-``, so a name parses
    unambiguously): what a cache shared by several hosts (a home folder over NFS) tells apart."""
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (``/proc/PID/stat`` field 22), -1 when no such process runs, None when
    ``/proc`` cannot tell (not mounted, not Linux)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except FileNotFoundError:
        return -1 if os.path.isdir("/proc/self") else None
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()  # the name (field 2) may hold spaces and parentheses
    try:
        return int(fields[19])  # field 22: the third field after the name is field 3 (state)
    except (IndexError, ValueError):
        return None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True
