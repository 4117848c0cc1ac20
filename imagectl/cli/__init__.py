"""The ``imagectl`` command line: a thin click layer over the library.

``main`` is the one place where an :class:`ImagectlError` (or a click usage error) becomes one line on
stderr and an exit status: 2 for bad input or usage, 1 for a failed operation.  Every such line goes through
:func:`imagectl.redact.redact` as a last line of defence: no URL's credentials reach the terminal.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

import click

from ..errors import ImagectlError
from .app import cli
from .printable import say


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status instead of raising."""
    state: dict[str, Any] = {}  # the root context's obj: the command's Workspace once it loaded one
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="imagectl", standalone_mode=False,
                          obj=state)
    except ImagectlError as exc:
        _error_line(str(exc), _secrets(state))
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("imagectl: aborted", err=True)
        return 1
    except click.ClickException as exc:
        _error_line(exc.format_message() + _usage_hint(exc), _secrets(state))
        return 2
    except KeyboardInterrupt:
        click.echo("imagectl: interrupted", err=True)
        return 130
    return result if isinstance(result, int) else 0


def _secrets(state: dict[str, Any]) -> tuple[str, ...]:
    """The configured secrets (build-arg values, index passwords) of the command's Workspace, if it loaded one."""
    workspace = state.get("workspace")
    return workspace.config.secret_values if workspace is not None else ()


def _error_line(message: str, secrets: Sequence[str] = ()) -> None:
    """Print ``imagectl: MESSAGE`` on stderr, redacted (URL userinfo, quoted credentials and ``secrets``) and
    printable (a message may quote a registry's answer)."""
    say(f"imagectl: {message}", secrets)


def _usage_hint(exc: click.ClickException) -> str:
    ctx = getattr(exc, "ctx", None)
    return f" (see '{ctx.command_path} --help')" if ctx is not None else ""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
