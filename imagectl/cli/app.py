"""The click group and the shared options; each command lives in a small module beside this one."""

from __future__ import annotations

import json
from importlib import import_module
from typing import Any, Callable

import click
from click.shell_completion import CompletionItem

from .. import __version__
from ..config import load_config
from ..errors import ImagectlError, InputError
from ..matrix.names import list_profiles
from .printable import say
from .workspace import Workspace


class _Root(click.Group):
    """Loads command modules on first use: the module boundary behind which the heavy libraries wait, so ``show``
    never imports Jinja (``render``, ``validate``), the Docker SDK or requests (``build``, the tag commands)."""

    _modules = {
        "list": "profiles", "show": "profiles", "validate": "validate_cmd", "compat": "compat_cmd",
        "check": "compat_cmd", "render": "render_cmd", "build": "building", "test": "building",
        "matrix": "matrix_cmd", "lock": "lock_cmd", "import": "import_cmd",
        "history": "tags_cmd", "rollback": "tags_cmd", "promote": "tags_cmd", "prune": "tags_cmd",
        "bases": "bases_cmd", "verify": "verify_cmd", "rebuild": "rebuild_cmd", "index": "index_cmd",
        "advisories": "advisories_cmd", "diff": "diff_cmd", "sweep": "sweep_cmd",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._modules)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = self._modules.get(name)
        if module is None:
            return None
        return getattr(import_module(f"imagectl.cli.{module}"), f"cmd_{name}")


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", metavar="PATH",
              help="imagectl.toml to use (default: $IMAGECTL_CONFIG, ./imagectl.toml).")
@click.version_option(__version__, prog_name="imagectl")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Build, test, tag and roll back GPU training images from a compatibility matrix."""
    ctx.ensure_object(dict)["config_path"] = config_path


def workspace(ctx: click.Context) -> Workspace:
    """The command's Workspace (configuration loaded on first use, kept in the root context's ``obj``, where
    ``main`` finds the configured secrets to redact from an error line); raises ConfigError."""
    root = ctx.find_root()
    if "workspace" not in root.obj:
        config = load_config(root.obj["config_path"])
        for note in config.notes:
            say(note)
        root.obj["workspace"] = Workspace(config)
    return root.obj["workspace"]


def echo_json(data: Any) -> None:
    """Print ``data`` as indented, key-sorted JSON."""
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def check_framework(ws: Workspace, framework: str | None) -> str | None:
    """``--framework`` if the matrix has it (None when not given); raises InputError otherwise (also for "")."""
    if framework is not None and framework not in ws.matrix.frameworks:
        raise InputError(f"--framework {framework!r}: not in the matrix ({', '.join(sorted(ws.matrix.frameworks))})")
    return framework


def complete_profiles(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of profile names (``imagectl list``'s, with ``--config`` and ``[paths] matrices``
    honoured); nothing when the configuration or the matrix cannot be read (completion never prints errors)."""
    try:
        root = ctx.find_root()
        config_path = (root.params or {}).get("config_path")
        names = [p.name for p in list_profiles(Workspace(load_config(config_path)).matrix)]
    except (ImagectlError, OSError):
        return []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def profile_argument(name: str, **kwargs: Any) -> Callable[[Any], Any]:
    """A click argument naming profiles, completed by the shell (see docs/index.md, Shell completion)."""
    return click.argument(name, shell_complete=complete_profiles, **kwargs)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
python_option = click.option("--python", metavar="X.Y", help="Build with this Python instead of the profile's default.")
framework_option = click.option("--framework", metavar="NAME", help="Only this framework's profiles.")
