"""Jinja rendering of the Dockerfile, requirement files and the in-image check script.

Templates are looked up in the user's template directories first, then the shipped ones, so a team can
override one partial.  ``StrictUndefined`` turns a missing variable into a TemplateError; output is
deterministic for a given context (the context is sorted, templates do not iterate over sets).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import jinja2

from .. import paths
from ..config import Config
from ..errors import ImagectlError, TemplateError, ValidationError
from ..image_spec import ImageSpec
from ..lock.lockfile import constraints_text, requirement_lines
from ..matrix.model import Profile
from ..matrix.rules import Violation
from ..shipped import template_dirs
from .context import EXTRAS_LOCK_FILE, NETRC_FILE, lock_layers, pip_netrc, render_context
from .sandbox import TemplateSandbox

DOCKERFILE_TEMPLATE = "Dockerfile.j2"
CHECK_TEMPLATE = "check/main.py.j2"
REQUIREMENTS_TEMPLATE = "requirements.txt.j2"
EXTRAS_TEMPLATE = "Dockerfile.extras.j2"
ENTRY_TEMPLATE = "entry.sh.j2"  # the entry check, /opt/imagectl/entry.sh in the image


class _TemplateLoader(jinja2.FileSystemLoader):
    """Jinja's folder loader, except that a template it cannot look at in a folder (a link into a folder the user may
    not enter) is a TemplateError naming it rather than skipped for the next folder's (the shipped one)."""

    def get_source(self, environment: jinja2.Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        pieces = jinja2.loaders.split_template_path(template)  # raises TemplateNotFound for '..' and the like
        for folder in self.searchpath:  # in search order, up to the first that has it
            if paths.exists(Path(folder, *pieces), TemplateError, "the template"):
                break
        return super().get_source(environment, template)


def make_environment(dirs: Sequence[Path]) -> jinja2.Environment:
    """A strict, deterministic Jinja environment over ``dirs``, sandboxed (:mod:`.sandbox`): a user's
    template runs no host code, and any failure while rendering is a one-line TemplateError."""
    env = TemplateSandbox(
        loader=_TemplateLoader([str(d) for d in dirs]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["q"] = quote
    env.filters["assignments"] = assignments
    return env


def quote(value: object) -> str:
    """A double-quoted Dockerfile string (JSON escaping; values were validated before)."""
    return json.dumps(str(value))


def assignments(mapping: Mapping[str, object], indent: int = 4) -> str:
    """``KEY="value"`` pairs for ENV/LABEL, one per continued line, in the mapping's (sorted) order."""
    return (" \\\n" + " " * indent).join(f"{key}={quote(value)}" for key, value in mapping.items())


def render_template(env: jinja2.Environment, name: str, context: Mapping[str, Any]) -> str:
    """Render one template; raises TemplateError naming the template and the problem."""
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        searchpath = ", ".join(str(p) for p in env.loader.searchpath)  # type: ignore[union-attr]
        raise TemplateError(f"template {exc.name} not found in {searchpath}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{exc.filename or exc.name}:{exc.lineno}: template syntax error: {exc.message}") from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {name}: {exc.message}") from None
    except OSError as exc:  # a template file that cannot be read (EACCES, EIO)
        raise TemplateError(f"template {exc.filename or name}: cannot read: {exc.strerror or exc}") from None


def context_files(spec: ImageSpec, config: Config, env: jinja2.Environment | None = None) -> dict[str, bytes]:
    """Every file of the build context of the image ``spec`` describes (name -> content), deterministic.

    The image installs the spec's lock (``lock.txt``, one ``lock-N-LAYER.txt`` per install layer,
    ``constraints.txt``) and the extras' closure (``extras-lock.txt``, with the request in
    ``extra-requirements.txt``); on a user's base (``build --base``) the Dockerfile only layers the extras on that
    image.  With index credentials the context holds :data:`~.context.NETRC_FILE` (computed here, once), which
    only the first build stage reads.  Raises InputError for bad extras (or none on a user's base) or conflicting
    index credentials, TemplateError for a broken template.
    """
    if spec.on_user_base and not spec.extras:
        raise ValidationError("--base needs extra packages (--extra or --requirements) to layer on the image")
    env = env or make_environment(template_dirs(config))
    profile, lock = spec.profile, spec.install_lock
    netrc = pip_netrc(profile, config)
    context = render_context(spec, config, NETRC_FILE if netrc else "")
    files = {
        "Dockerfile": render_template(env, EXTRAS_TEMPLATE if spec.on_user_base else DOCKERFILE_TEMPLATE, context),
        "imagectl-check.py": render_template(env, CHECK_TEMPLATE, context),
        "imagectl-entry.sh": render_template(env, ENTRY_TEMPLATE, context),
        "constraints.txt": constraints_text(context["constraints"]),
    }
    if not spec.on_user_base:
        files["lock.txt"] = lock.text
        for name, lines in lock_layers(profile, lock):
            files[name] = render_template(env, REQUIREMENTS_TEMPLATE, {**context, "requirement_lines": lines})
    if spec.extras:
        files["extra-requirements.txt"] = "\n".join(context["extras"]) + "\n"
        files[EXTRAS_LOCK_FILE] = render_template(env, REQUIREMENTS_TEMPLATE,
                                                  {**context, "requirement_lines": requirement_lines(spec.extras_lock)})
    out = {name: text.encode() for name, text in files.items()}
    if config.ca_bundle:
        out["ca.pem"] = paths.read_bytes(config.ca_bundle, ValidationError, "the [build] ca_bundle")
    if netrc:
        out[NETRC_FILE] = netrc.encode()
    return out


def template_violations(profiles: Sequence[Profile], config: Config) -> list[Violation]:
    """Render the build context of one profile per (framework, flavour); each failure is a violation
    (rule ``template-renders``).  Raises nothing for a broken template: that is what it reports."""
    env = make_environment(template_dirs(config))
    shapes: dict[tuple[str, str], Profile] = {}
    for profile in profiles:
        shapes.setdefault((profile.framework.name, profile.flavor), profile)
    out = []
    for profile in shapes.values():
        try:
            context_files(ImageSpec(profile), config, env)
        except ImagectlError as exc:
            out.append(Violation("template-renders", profile.name, str(exc), "templates/"))
    return out
