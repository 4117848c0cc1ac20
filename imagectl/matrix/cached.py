"""The matrix of the matrix directories, from the cache when no byte of a matrix file changed.

Every run reads every matrix file (:func:`~.sources.read_sources`); the key is the SHA-256 of each file's bytes in
loading order (so an added, removed, renamed or edited file is another key) plus imagectl's own code
(:func:`imagectl.cache.code_digest`).  A hit rebuilds the model from JSON (:mod:`.codec`); a miss parses and
validates the same bytes (:func:`~.load.load_sources`) and stores the result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..cache import Kind, cached
from .codec import from_data, to_data
from .model import Matrix
from .sources import MatrixSources, read_sources

MATRICES: Kind[Matrix] = Kind("matrix", encode=lambda matrix: json.dumps(to_data(matrix), sort_keys=True),
                              decode=lambda text: from_data(Matrix, json.loads(text)), keep=16)


def cached_matrix(dirs: Sequence[Path]) -> Matrix:
    """The merged matrix of ``dirs`` (see the module docstring); raises MatrixError naming file and line."""
    sources = read_sources(dirs)
    request = {"dirs": [str(d) for d in dirs], "files": sources.digests()}
    return cached(MATRICES, request, lambda: _load(sources))


def _load(sources: MatrixSources) -> Matrix:
    # The loader is imported only on a miss: it brings tomllib and packaging's specifier and requirement parsers,
    # which a hit does not need (bench/startup.py measures show, cold and warm).
    from .load import load_sources

    return load_sources(sources)
