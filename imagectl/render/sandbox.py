"""The Jinja environment templates render in: Jinja's immutable sandbox, each failure one line.

Template directories come from ``[paths] templates`` of an ``imagectl.toml`` that ``validate`` and ``render``
discover in the working directory (a freshly cloned repository, say), so a template is untrusted input.  In
:class:`jinja2.sandbox.ImmutableSandboxedEnvironment` a template reads its context and calls the filters it
is given, and nothing else: no attribute that starts with ``_`` (so no ``__class__``, ``__globals__`` or
``__subclasses__``, the ways from a string or a global to host code), no method that changes a list or a
dict, no ``str.format`` that reaches either.  The shipped templates render the same in it.

Whatever a template raises while it renders (a sandbox refusal, a division by zero, an include that includes
itself) becomes a :class:`~imagectl.errors.TemplateError` naming the template file and line; a template too
deeply nested to compile becomes a syntax error.  The errors the renderer words itself (a missing template,
a syntax error, an undefined variable) pass through unchanged.

The sandbox bounds what a template can reach, not how long it runs or how much it makes: nested loops or a
huge power can still make one render slow (ranges are capped at 100,000 items).
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ..errors import ImagectlError, TemplateError

_WORDED_BY_CALLER = (jinja2.TemplateNotFound, jinja2.TemplateSyntaxError, jinja2.UndefinedError, ImagectlError)


class TemplateSandbox(ImmutableSandboxedEnvironment):
    """An immutable sandboxed environment whose render failures are one-line TemplateErrors."""

    def compile(self, source: Any, name: str | None = None, filename: str | None = None, raw: bool = False,
                defer_init: bool = False) -> Any:
        """Compile a template; raises TemplateSyntaxError, also for one nested too deeply to parse."""
        try:
            return super().compile(source, name, filename, raw, defer_init)
        except RecursionError:
            raise jinja2.TemplateSyntaxError("nested too deeply", 1, name, filename) from None

    def handle_exception(self, source: str | None = None) -> Any:
        """Re-raise the exception being handled: the renderer's own kinds as they are, any other as a
        TemplateError naming the template and line (Jinja calls this from inside ``except``)."""
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, _WORDED_BY_CALLER):
            return super().handle_exception(source)
        lines = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise TemplateError(f"{template_line(exc.__traceback__)}: template error: {reason}") from None


def template_line(tb: TracebackType | None) -> str:
    """``FILE:LINE`` of the innermost template frame of a traceback (``template`` when there is none)."""
    where = "template"
    while tb is not None:
        template = tb.tb_frame.f_globals.get("__jinja_template__")
        if template is not None:
            where = f"{template.filename or template.name}:{template.get_corresponding_lineno(tb.tb_lineno)}"
        tb = tb.tb_next
    return where
