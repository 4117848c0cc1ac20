"""Text for a terminal: what a registry, an image or a record says is shown with its control and bidirectional
characters escaped, so a label, an annotation, a tag name or a record field cannot move the cursor, retitle the
terminal, clear the screen or forge a line of output.  JSON output keeps the exact values."""

from __future__ import annotations

from collections.abc import Sequence

import click

from ..redact import redact

# C0 controls (tab, CR and LF included: a field is one line), DEL, C1 controls, and the Unicode characters that
# reorder or break a line: the bidi embeddings, overrides and isolates, the marks, and the line separators.
_ESCAPED = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
            *range(0x2066, 0x206A), 0x2028, 0x2029]
_TABLE = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _ESCAPED}
_TABLE.update({0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"})


def printable(text: str) -> str:
    """``text`` with every control and bidirectional character written as its escape (``\\x1b``, ``\\n``,
    ``\\u202e``)."""
    return text.translate(_TABLE)


def say(line: str, secrets: Sequence[str] = ()) -> None:
    """Print ``line`` on stderr, redacted (:func:`imagectl.redact.redact`: URL userinfo, quoted credentials and
    ``secrets``) and printable: every warning, note and error line of a command goes through here."""
    click.echo(printable(redact(line, secrets)), err=True)


def printable_lines(lines: list[str] | tuple[str, ...]) -> str:
    """One logical line each, escaped, joined with newlines: a newline inside a line cannot start another."""
    return "\n".join(printable(line) for line in lines)
