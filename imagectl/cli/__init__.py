"""The ``imagectl`` command line: a thin click layer over the library.

``main`` is the one place where an :class:`ImagectlError` (or a click usage error) becomes one line on
stderr and an exit status: 2 for bad input or usage, 1 for a failed operation.  Every such line goes through
:func:`imagectl.redact.redact` as a last line of defence: no URL's credentials reach the terminal.  Ctrl-C (SIGINT)
and SIGTERM stop the command the same way (:func:`imagectl.stop.signals_as_interrupts`): what it was doing stops and
cleans up, one line says so, and the exit status is 130 or 143 (128 + the signal's number).
"""

from __future__ import annotations

import signal
import sys
from typing import Any, Sequence

import click

from ..errors import ImagectlError
from ..stop import Interrupted, signals_as_interrupts
from .app import cli
from .printable import say


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status instead of raising."""
    state: dict[str, Any] = {}  # the root context's obj: the command's Workspace once it loaded one
    try:
        with signals_as_interrupts():
            result = cli.main(args=list(argv) if argv is not None else None, prog_name="imagectl",
                              standalone_mode=False, obj=state)
    except ImagectlError as exc:
        _error_line(str(exc), _secrets(state))
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click turns an interrupt into Abort (after a blank line)
            return _interrupted(exc.__cause__)
        click.echo("imagectl: aborted", err=True)
        return 1
    except click.ClickException as exc:
        _error_line(exc.format_message() + _usage_hint(exc), _secrets(state))
        return 2
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    return result if isinstance(result, int) else 0


def _interrupted(exc: KeyboardInterrupt) -> int:
    """One line for a command that SIGINT (Ctrl-C) or SIGTERM stopped; its exit status, 130 or 143."""
    terminated = isinstance(exc, Interrupted) and exc.signum == signal.SIGTERM
    click.echo(f"imagectl: {'terminated' if terminated else 'interrupted'}", err=True)
    return exc.exit_code if isinstance(exc, Interrupted) else 128 + signal.SIGINT


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
