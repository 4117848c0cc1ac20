"""The entry check (templates/entry.sh.j2): the rendered script run with dash and bash on the host, under a fake
``nvidia-smi`` on PATH, a fake ``/proc/driver/nvidia/version`` and a fake base entrypoint.

The fixture matrix's CUDA 12.1: full support from 530.30.02 (R530); the fixture records no forward-compatible
branches, so the node fixture adds NVIDIA's (R470 and R525, from 12.1.1's NVIDIA_REQUIRE_CUDA) where a test needs
them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from imagectl.config import Config
from imagectl.errors import ValidationError
from imagectl.image_spec import ImageSpec
from imagectl.matrix.names import resolve_profile
from imagectl.render.context import render_context
from imagectl.render.dockerfile import ENTRY_TEMPLATE, context_files, make_environment, render_template
from imagectl.shipped import template_dirs

PROFILE = "torch-2.3-cu121"
SHELLS = [name for name in ("dash", "bash") if shutil.which(name)]


@dataclasses.dataclass
class Node:
    """A fake node: a PATH of its own (sh, timeout and what a test adds), a driver version file, the base's
    entrypoint path, and the rendered entry script that reads them."""

    root: Path
    script: Path
    bin: Path
    version_file: Path
    next_entrypoint: Path

    def nvidia_smi(self, body: str) -> None:
        """Put an ``nvidia-smi`` on PATH whose shell body is ``body``."""
        tool = self.bin / "nvidia-smi"
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)

    def driver(self, version: str) -> None:
        """A fake nvidia-smi that reports ``version`` for two GPUs (only the expected query is answered)."""
        self.nvidia_smi('[ "$1 $2" = "--query-gpu=driver_version --format=csv,noheader" ] || exit 2\n'
                        f'echo "{version}"\necho "{version}"')

    def run(self, shell: str, *command: str, stdin: str = "", env: dict[str, str] | None = None,
            timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run the entry script with ``shell`` and ``command``, with only this node's PATH."""
        return subprocess.run([shutil.which(shell) or shell, str(self.script), *command], input=stdin,
                              capture_output=True, text=True, timeout=timeout,
                              env={"PATH": str(self.bin), **(env or {})})


def with_forward_compat(profile, branches):
    """``profile`` whose toolkit's cuda-compat supports the driver ``branches`` (forward compatibility)."""
    return dataclasses.replace(profile, toolkit=dataclasses.replace(profile.toolkit, forward_compat=tuple(branches)))


def make_node(profile, tmp_path) -> Node:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "timeout", "env"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    version_file, next_entrypoint = tmp_path / "proc-version", tmp_path / "base-entrypoint.sh"
    context = render_context(ImageSpec(profile), Config())
    context["entry"] = {**context["entry"], "driver_version_file": str(version_file),
                        "next_entrypoint": str(next_entrypoint)}
    script = tmp_path / "entry.sh"
    script.write_text(render_template(make_environment(template_dirs(Config())), ENTRY_TEMPLATE, context))
    return Node(tmp_path, script, bin_dir, version_file, next_entrypoint)


@pytest.fixture
def node(matrix, tmp_path) -> Node:
    return make_node(with_forward_compat(resolve_profile(PROFILE, matrix), [470, 525]), tmp_path)


def one_warning(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("imagectl: warning: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("shell", SHELLS)
def test_a_driver_no_mechanism_admits_warns_once_and_keeps_the_exit_status(node, shell):
    node.driver("450.80.02")  # R450: older than R530 and not a branch the cuda-compat supports
    result = node.run(shell, "sh", "-c", 'echo "ran $1"; exit 3', "sh", "with args")
    assert result.returncode == 3 and result.stdout == "ran with args\n"
    line = one_warning(result)
    assert "450.80.02 (R450) is below CUDA 12.1's driver branch R530" in line and line.endswith("will not run")
    assert "supports no R450" in line and PROFILE in line


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("version", ["470.57.02", "525.60.13", "525.147.05"])
def test_a_forward_compatible_branch_runs_only_under_forward_compatibility(node, shell, version):
    node.driver(version)
    result = node.run(shell, "sh", "-c", "exit 0")
    line = one_warning(result)
    assert result.returncode == 0 and f"{version} (R{version.split('.')[0]}) is below CUDA 12.1's driver branch" in line
    assert line.endswith("runs only under forward compatibility (the image's cuda-compat libraries), on data-center "
                         "GPUs only")


@pytest.mark.parametrize("shell", SHELLS)
def test_an_earlier_release_of_the_branch_runs_only_under_minor_version_compatibility(matrix, tmp_path, shell):
    node = make_node(resolve_profile("torch-2.7-cu128", matrix), tmp_path)  # CUDA 12.8: 570.124.06
    node.driver("570.86.16")
    line = one_warning(node.run(shell, "sh", "-c", "exit 0"))
    assert "570.86.16 is below 570.124.06" in line and "runs only under minor-version compatibility" in line
    node.driver("550.54.15")  # the fixture's 12.8 records no forward-compatible branch
    assert one_warning(node.run(shell, "sh", "-c", "exit 0")).endswith("will not run")


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("version", ["530.30.02", "530.41.03", "550.54.15", "1000.1"])
def test_a_new_enough_driver_is_silent(node, shell, version):
    node.driver(version)
    result = node.run(shell, "sh", "-c", "echo ok")
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")


@pytest.mark.parametrize("shell", SHELLS)
def test_no_nvidia_smi_and_no_driver_is_silent(node, shell):
    result = node.run(shell, "sh", "-c", "echo ok; exit 7")
    assert (result.returncode, result.stdout, result.stderr) == (7, "ok\n", "")


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("line, warned", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.57.02  Tue Jul 13 16:14:05 UTC 2021", "470.57.02"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  450.80.02  Release Build  (dvs-builder@U16)",
     "450.80.02"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16)", None),
])
def test_the_kernel_module_version_file_is_the_fallback(node, shell, line, warned):
    node.version_file.write_text(f"{line}\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    result = node.run(shell, "sh", "-c", "exit 0")
    assert result.returncode == 0
    if warned:
        assert f"driver {warned} (R{warned.split('.')[0]}) is below" in one_warning(result)
    else:
        assert result.stderr == ""


@pytest.mark.parametrize("shell", SHELLS)
def test_a_failing_nvidia_smi_falls_back_to_the_version_file(node, shell):
    node.nvidia_smi('echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9')
    assert node.run(shell, "sh", "-c", ":").stderr == ""
    node.version_file.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.57.02  Tue Jul 13 2021\n")
    assert "470.57.02" in one_warning(node.run(shell, "sh", "-c", ":"))


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("output", ["99999999999999999999.1", "$(touch pwned)", "535..1", "N/A", "5.3.5.1", ""])
def test_what_nvidia_smi_prints_is_never_run_and_junk_is_silent(node, shell, output):
    node.nvidia_smi(f"printf '%s\\n' '{output}'")
    result = node.run(shell, "sh", "-c", "echo ok")
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")
    assert not (node.root / "pwned").exists() and not Path("pwned").exists()


def test_a_hanging_nvidia_smi_does_not_block_the_command(node):
    node.nvidia_smi("exec sleep 60")
    os.symlink(shutil.which("sleep"), node.bin / "sleep")
    started = time.monotonic()
    result = node.run("dash", "sh", "-c", "echo ok", timeout=30)
    assert result.stdout == "ok\n" and result.returncode == 0 and time.monotonic() - started < 20


@pytest.mark.parametrize("shell", SHELLS)
def test_arguments_environment_and_stdin_reach_the_command_unchanged(node, shell):
    node.driver("470.57.02")
    args = ["a b", "c'd", 'e"f', "$HOME", "*", ""]
    result = node.run(shell, "sh", "-c", 'printf "[%s]" "$@"; read -r line; echo "$line"', "sh", *args,
                      stdin="from stdin\n")
    assert result.stdout == "[a b][c'd][e\"f][$HOME][*][]from stdin\n"
    names = {line.split("=", 1)[0] for line in node.run(shell, "env", env={"FOO": "bar"}).stdout.splitlines()}
    assert "FOO" in names and not {n for n in names if n.startswith("imagectl_")}


@pytest.mark.parametrize("shell", SHELLS)
def test_without_a_command_it_runs_a_shell(node, shell):
    result = node.run(shell, stdin="echo from-the-shell; exit 4\n")
    assert (result.returncode, result.stdout, result.stderr) == (4, "from-the-shell\n", "")


@pytest.mark.parametrize("shell", SHELLS)
def test_it_hands_over_to_the_base_entrypoint_where_the_base_has_one(node, shell):
    node.next_entrypoint.write_text('#!/bin/sh\necho "base entrypoint:$#:$*"\nexit 5\n')
    node.next_entrypoint.chmod(0o755)
    node.driver("550.54.15")
    assert (node.run(shell, "python", "-c", "x").stdout, node.run(shell).stdout) == (
        "base entrypoint:3:python -c x\n", "base entrypoint:0:\n")
    assert node.run(shell).returncode == 5


def test_the_shipped_script_reads_nvidia_smi_then_the_kernel_module(matrix):
    script = context_files(ImageSpec(resolve_profile(PROFILE, matrix)), Config())["imagectl-entry.sh"].decode()
    assert script.startswith("#!/bin/sh\n")
    assert "imagectl_min_driver='530.30.02'\nimagectl_forward=''\n" in script  # the fixture records no branches
    assert "imagectl_version_file='/proc/driver/nvidia/version'\n" in script
    assert "imagectl_next='/opt/nvidia/nvidia_entrypoint.sh'\n" in script
    assert "nvidia-smi --query-gpu=driver_version --format=csv,noheader" in script
    assert script.rstrip().endswith('exec "$@"')


@pytest.mark.parametrize("field, value", [("min_driver", "530.30.02'; touch /tmp/x; '"),
                                          ("forward_compat", ("535'; touch /tmp/x; '",))])
def test_floors_that_are_not_driver_versions_never_reach_the_script(matrix, field, value):
    profile = resolve_profile(PROFILE, matrix)
    bad = dataclasses.replace(profile, toolkit=dataclasses.replace(profile.toolkit, **{field: value}))
    with pytest.raises(ValidationError, match=field):
        context_files(ImageSpec(bad), Config())
