"""Plain aligned text tables: every table the CLI prints goes through :func:`format_table`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .printable import printable


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A plain aligned text table of ``columns`` (header in upper case; None shows as ``-``); every cell is made
    printable (:func:`~.printable.printable`): a cell is one line, whatever a registry or an image put in it."""
    header = [str(c).upper() for c in columns]
    body = [["-" if r.get(c) is None else printable(str(r.get(c))) for c in columns] for r in rows]
    cells = [header, *body]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells)
