"""An assembled image's layer blobs uploaded to the repository its push goes to as soon as each one is written.

The push after the check then finds them there and sends only the config and the manifest: the 3 GB of a torch
image's layers go up while the system image builds and the check runs, instead of after it.  Only blobs move
before the check passes, never a manifest or a tag, so nothing a user sees changes until then.  A build that
fails after some uploads leaves blobs that no manifest names; the registry's garbage collection removes them
(they are not deleted here: another image may use the same blob).  Blobs are content-addressed, so another writer
pushing the same ones at the same moment is harmless.

An upload that fails is not the build's failure: the first error is logged, the rest are skipped, and the push
sends whatever is missing (and fails then, with its own message, if the registry is really unreachable).

A build that fails or is interrupted stops the uploads at once (:meth:`EarlyUpload.abort`, which the build's stop
calls): the upload under way ends before its next piece, its session cancelled, and nothing more is sent.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from ..config import Config
from ..engine import LineSink
from ..progress.units import count_of, human_bytes
from ..reference import Reference
from ..registry.access import client_for
from ..registry.client import RegistryClient
from ..registry.layout_push import BlobSender, LayoutPush
from ..registry.manifest import Descriptor
from ..stop import Stop, Stopped

ClientFor = Callable[[], AbstractContextManager[RegistryClient]]


class EarlyUpload:
    """Uploads blobs handed to :meth:`add` to ``repository`` (``host/path``'s path) in a thread of its own, with a
    client ``connect()`` opens there; :meth:`finish` waits for them and says what was sent."""

    def __init__(self, connect: ClientFor, repository: str, log: LineSink) -> None:
        self._connect, self._repository, self._log = connect, repository, log
        self._queue: queue.SimpleQueue[tuple[Path, Descriptor] | None] = queue.SimpleQueue()
        self._abort = Stop()
        self._sent: LayoutPush | None = None
        self.failed, self.seconds = "", 0.0
        self._thread = threading.Thread(target=self._work, name="imagectl-upload", daemon=True)
        self._thread.start()

    @classmethod
    def to(cls, repository: Reference, config: Config, log: LineSink) -> EarlyUpload:
        """Uploads to ``repository`` of ``config``'s registry, with the credentials a push uses."""
        return cls(lambda: client_for(repository.domain, config.insecure_hosts, config.registry_timeout),
                   repository.path, log)

    def add(self, path: Path, digest: str, size: int) -> None:
        """Upload the blob of ``digest`` and ``size`` whose file is ``path`` (which must stay until :meth:`finish`)."""
        self._queue.put((path, Descriptor("", digest, size)))

    def finish(self) -> LayoutPush | None:
        """Wait until every blob added is in the repository (or skipped after a failure); what was sent (None when
        the first upload could not start), with a log line of it."""
        self._stop()
        sent = self._sent
        if sent is not None and sent.total:
            self._log(f"uploaded while the image was made: {human_bytes(sent.uploaded)} uploaded, "
                      f"{human_bytes(sent.mounted)} mounted from other repositories "
                      f"({count_of(len(sent.mounted_from), 'blob')}), {human_bytes(sent.present)} already there, of "
                      f"{human_bytes(sent.total)} in {self.seconds:.0f} s")
        return sent

    def abort(self) -> None:
        """Stop the uploads (a build that failed, or an interrupt): the one under way ends before its next piece and
        nothing more is sent; returns at once (:meth:`close` waits for the thread)."""
        self._abort.set()

    def close(self) -> None:
        """:meth:`abort`, and wait for the thread to end."""
        self.abort()
        self._stop()

    def _stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _work(self) -> None:
        with contextlib.suppress(OSError):  # the uploads have until the push: what the build waits for comes first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        try:
            with self._connect() as client:
                sender = BlobSender(client, self._repository, stop=self._abort)
                while (item := self._queue.get()) is not None:
                    if self._abort.is_set() or self.failed:
                        continue
                    started = time.monotonic()
                    try:
                        sender.send(*item)
                    except Stopped:
                        continue
                    except Exception as exc:  # noqa: BLE001 -- not the build's failure: logged, and the push sends it
                        self.failed = str(exc) or type(exc).__name__
                        self._log(f"uploading layers before the check stopped ({exc}): the push sends them")
                    self.seconds += time.monotonic() - started
                self._sent = sender.sent
        except Exception as exc:  # noqa: BLE001 -- as above: the thread never dies with a traceback
            self.failed = str(exc) or type(exc).__name__
            self._log(f"layers not uploaded before the check ({exc}): the push sends them")
            while self._queue.get() is not None:  # drain: add() never blocks, finish() still returns
                pass
