"""A lock split into install layers by the framework's ``layers`` (data in the matrix, not code).

Each package goes to the first layer with a pattern (``fnmatch``) that matches its canonical name, else to
the last layer; empty layers are left out.  Layers are installed in order, so the ones that change least
come first and are shared: every profile with the same CUDA pins has the same CUDA layer.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Sequence

from .lockfile import LockedPackage


def layer_of(name: str, layers: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The name of the layer ``name`` (a canonical package name) is installed in."""
    for layer, patterns in layers:
        if any(fnmatchcase(name, pattern) for pattern in patterns):
            return layer
    return layers[-1][0]


def split_layers(packages: Sequence[LockedPackage],
                 layers: Sequence[tuple[str, Sequence[str]]]) -> list[tuple[str, tuple[LockedPackage, ...]]]:
    """``(layer name, its packages sorted by name)`` for every non-empty layer, in the layers' order (pure)."""
    groups: dict[str, list[LockedPackage]] = {name: [] for name, _ in layers}
    for pkg in packages:
        groups[layer_of(pkg.name, layers)].append(pkg)
    return [(name, tuple(sorted(groups[name], key=lambda p: p.name))) for name, _ in layers if groups[name]]
