"""A layer's zstd compression (``[registry] compression = "zstd"``) whose bytes do not depend on the host.

One compressor ships with imagectl: python-zstandard (the ``zstandard`` package, pinned in ``pyproject.toml``),
which bundles its own libzstd.  Its output is a function of the input, the libzstd version, the level and the frame
parameters, so all of those are fixed here: one frame, level :data:`LEVEL`, single-threaded (a multi-threaded
encoder cuts its jobs otherwise), no content size (the tar's size is not known up front; a size, when given, tunes
the parameters), a checksum, no dictionary id; and the input is handed to it in pieces of :data:`PIECE` bytes
whatever sizes the tar writer produces, so even the encoder's buffering sees the same calls on every machine.
:func:`zstd_format` names the libzstd version with them; a layer's provenance records it.

The encoder runs in the C extension, which lets go of the GIL while it compresses: the layer writers, two threads,
compress while the downloads go on.
"""

from __future__ import annotations

from collections.abc import Callable

import zstandard

LEVEL = 3  # zstd's own default, and what buildah's and containerd's zstd layers use
PIECE = 1 << 20


def zstd_format() -> str:
    """The byte format of :class:`ZstdStream`'s output: the libzstd version and the level, e.g. ``zstd-1.5.7-l3``."""
    return f"zstd-{'.'.join(str(part) for part in zstandard.ZSTD_VERSION)}-l{LEVEL}"


class ZstdStream:
    """One zstd frame of everything :meth:`write` is given, its compressed bytes handed to ``emit`` as they come;
    :meth:`finish` ends the frame."""

    def __init__(self, emit: Callable[[bytes], None]) -> None:
        compressor = zstandard.ZstdCompressor(level=LEVEL, threads=0, write_checksum=True, write_content_size=False,
                                              write_dict_id=False)
        self._frame = compressor.compressobj()
        self._emit = emit
        self._pending = bytearray()

    def write(self, data: bytes | memoryview) -> None:
        """Compress ``data`` (after what came before), :data:`PIECE` bytes at a time."""
        self._pending += data
        whole = len(self._pending) - len(self._pending) % PIECE
        if not whole:
            return
        with memoryview(self._pending) as view:
            for start in range(0, whole, PIECE):
                self._out(self._frame.compress(view[start:start + PIECE]))
        del self._pending[:whole]

    def finish(self) -> None:
        """Compress what is left and end the frame (its checksum)."""
        if self._pending:
            self._out(self._frame.compress(bytes(self._pending)))
            self._pending = bytearray()
        self._out(self._frame.flush())

    def _out(self, data: bytes) -> None:
        if data:
            self._emit(data)
