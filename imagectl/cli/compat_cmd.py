"""What runs where: ``compat`` (the profiles a node's driver and GPU can run) and ``check`` (an ad-hoc
combination); ``compat`` reads the node from nvidia-smi when not told."""

from __future__ import annotations

import click

from ..lock.runtime import lock_reader
from ..matrix.compat import Verdict, check_combination, gpu_arch, node_host, node_verdicts, parse_combination
from ..matrix.model import AMD64, MACHINES, Gpu, Matrix
from ..matrix.names import list_profiles, python_problems
from ..matrix.platforms import platform_name, platform_of_machine
from ..config import NODE_RUNTIMES
from ..errors import InputError
from ..nvidia_smi import read_machine, read_node, read_runtime_mode
from .app import check_framework, echo_json, framework_option, json_option, workspace
from .compat_views import compat_rows, compat_table
from .advisory_views import compat_marks, finding_rows, with_advisory_notes


@click.command("compat")
@click.option("--driver", metavar="VERSION", help="Node driver version (default: from nvidia-smi).")
@click.option("--gpu", metavar="NAME|sm_XY",
              help="GPU model or architecture (default: from nvidia-smi when --driver is absent).")
@click.option("--arch", metavar="aarch64|x86_64",
              help="The node's CPU architecture (default: the GPU's host where it has one, GH200/GB200/GB300/GB10: "
                   "aarch64; on the node itself, uname -m).")
@click.option("--runtime", type=click.Choice(NODE_RUNTIMES), default=None,
              help="The NVIDIA container runtime mode to judge: legacy (docker --gpus: NVIDIA_REQUIRE_CUDA gates), cdi "
                   "(the nvidia runtime's jit-cdi default since toolkit 1.18), both (one verdict where they agree, "
                   "both where not), auto (read from the node, else both; default: [node] runtime).")
@framework_option
@click.option("--all", "show_all", is_flag=True, help="Also list the profiles that cannot run, with the reasons.")
@click.option("--best", is_flag=True, help="Only the newest profile of each framework that can run.")
@json_option
@click.pass_context
def cmd_compat(ctx: click.Context, driver: str | None, gpu: str | None,  # noqa: PLR0913 (one per option)
               arch: str | None, runtime: str | None, framework: str | None, show_all: bool, best: bool,
               as_json: bool) -> int:
    """Which profiles can run on a node with this driver (and GPU, and CPU); with --all also why the others cannot."""
    ws = workspace(ctx)
    profiles = list_profiles(ws.matrix, check_framework(ws, framework))
    host = MACHINES[platform_name(arch, "--arch")] if arch is not None else None
    runtime = runtime or ws.config.node_runtime
    node_gpu = None
    if driver is None:  # the node itself: its driver and GPU from nvidia-smi, its CPU and runtime mode from the node
        driver, sm, name = read_node()
        if gpu is None:
            node_gpu, gpu = _node_gpu(name, sm, ws.matrix)
        host = host or read_machine()
        runtime = read_runtime_mode() if runtime == "auto" else runtime
    runtime = "both" if runtime == "auto" else runtime
    node_gpu = node_gpu or (gpu_arch(gpu, ws.matrix) if gpu is not None else None)
    machine = node_host(host, node_gpu)
    lock_platform = platform_of_machine(machine) if machine else None
    verdicts = node_verdicts(profiles, driver, node_gpu, lock_reader(ws.config, ws.matrix, lock_platform or AMD64),
                             host, runtime)
    if best:  # list order is newest first within a framework: the first runnable one of each
        by_name = {p.name: p for p in profiles}
        firsts: dict[str, Verdict] = {}
        for v in verdicts:
            if v.ok:
                firsts.setdefault(by_name[v.profile].framework.name, v)
        verdicts = list(firsts.values())
    marks = compat_marks(profiles, verdicts, ws.config)  # the advisories of each listed profile
    if as_json:
        echo_json([{**row, "advisories": finding_rows(marks[row["name"]])} for row in compat_rows(verdicts)])
        return 0
    for line in compat_table(with_advisory_notes(verdicts, marks), show_all):
        click.echo(line)
    good = sum(v.ok for v in verdicts)
    on_gpu = (f" on {gpu}" if gpu else "") + (f" ({machine} host)" if machine else "")
    what = ("the newest of each framework that can run" if best else
            "every profile" if show_all else "those that can run (--all: also why the others cannot)")
    modes = {"both": "legacy and jit-cdi runtime modes", "legacy": "legacy runtime mode", "cdi": "jit-cdi runtime mode"}
    click.echo(f"{good} of {len(verdicts)} profiles can run with driver {driver}{on_gpu} ({modes[runtime]}); "
               f"listed: {what}", err=True)
    return 0


def _node_gpu(name: str | None, sm: str | None, matrix: Matrix) -> tuple[Gpu | None, str | None]:
    """The node's GPU by the name nvidia-smi printed, else by its compute capability (saying so on stderr)."""
    if name:
        try:
            return gpu_arch(name, matrix), name
        except InputError:
            click.echo(f"compat: GPU {name!r} is not in the matrix: judged by its arch {sm or 'unknown'}", err=True)
    return (gpu_arch(sm, matrix), sm) if sm else (None, None)


@click.command("check")
@click.argument("items", nargs=-1, required=True)
@json_option
@click.pass_context
def cmd_check(ctx: click.Context, items: tuple[str, ...], as_json: bool) -> int:
    """Is an ad-hoc combination compatible?  e.g. torch==2.3.1 cuda=12.1 python=3.12 nccl=2.20.5"""
    ws = workspace(ctx)
    combo = parse_combination(items, ws.matrix)
    machine = node_host(None, gpu_arch(combo.gpu, ws.matrix) if combo.gpu else None)  # a Grace GPU's aarch64 host
    lock_platform = (platform_of_machine(machine) if machine else None) or AMD64  # whose locks decide the CUDA there
    reasons, notes, profile = check_combination(combo, ws.matrix, lock_reader(ws.config, ws.matrix, lock_platform))
    if profile is not None and (combo.python is None or combo.python in profile.release.python):
        # python-available and unavailable Pythons: no image to build
        problems = python_problems(ws.matrix, profile.framework, profile.release, profile.variant, profile.python)
        reasons, profile = reasons + problems, None if problems else profile
    if as_json:
        echo_json({
            "compatible": not reasons, "reasons": reasons, "notes": notes, "profile": profile.name if profile else None
        })
    else:
        click.echo(("compatible" if not reasons else "incompatible") + (f" ({profile.name})" if profile else ""))
        for line in reasons + notes:
            click.echo(f"  - {line}")
    return 1 if reasons else 0
