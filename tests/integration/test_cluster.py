"""Images on a cluster node, on the real engine: an image imagectl built on the stand-in CUDA base runs its entry
check before every command -- one warning line on stderr under a fake old ``nvidia-smi``, silence under a new one
or none -- and passes the command, its output and its exit status through; the NVIDIA runtime's variables are
stated in the image."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.integration.conftest import write_config

pytestmark = pytest.mark.integration

PROFILE = "torch-2.3-cu121-runtime-py3.11"  # the stand-in base is Debian bookworm (python 3.11); the mirror has runtime
# CUDA 12.1: full support from 530.30.02 (R530); its cuda-compat supports R470 and R525 (forward compatibility, as
# NVIDIA's 12.1.1 base image's NVIDIA_REQUIRE_CUDA lists them); any older branch is refused
IMAGE = f"localhost/cluster/{PROFILE}:latest"


@pytest.fixture
def image(run_cli, tmp_path, mirror, wheel_index, docker_client) -> str:
    """The profile built by imagectl into the local engine (built once, then reused by its build key)."""
    write_config(tmp_path, mirror=mirror, index_url=wheel_index, namespace="cluster")
    built = run_cli("build", PROFILE, "--quiet")
    assert built.code == 0, built.err[-3000:]
    return IMAGE


def fake_nvidia_smi(driver: str) -> bytes:
    """A tar holding ``nvidia-smi`` (mode 0755) that answers the driver query with ``driver`` for two GPUs."""
    script = (f'#!/bin/sh\n[ "$1 $2" = "--query-gpu=driver_version --format=csv,noheader" ] || exit 2\n'
              f'echo "{driver}"\necho "{driver}"\n').encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("nvidia-smi")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    return buffer.getvalue()


def run(docker_client, image: str, command: list[str] | None, driver: str | None = None) -> tuple[int, str, str]:
    """``docker run IMAGE COMMAND`` with a fake nvidia-smi copied onto the PATH first (``driver``), or none:
    (exit status, stdout, stderr)."""
    container = docker_client.containers.create(image, command, network_mode="none")
    try:
        if driver is not None:
            assert container.put_archive("/usr/local/bin", fake_nvidia_smi(driver))
        container.start()
        status = container.wait(timeout=120)["StatusCode"]
        return (status, container.logs(stdout=True, stderr=False).decode(),
                container.logs(stdout=False, stderr=True).decode())
    finally:
        container.remove(force=True)


PRINT_1 = ["python", "-c", "print(1)"]


def test_the_entry_check_warns_under_an_old_driver_and_is_silent_under_a_new_one(image, docker_client):
    status, out, err = run(docker_client, image, PRINT_1, driver="450.80.02")
    assert (status, out) == (0, "1\n")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("imagectl: warning: this node's NVIDIA driver 450.80.02"), err
    assert "(R450) is below CUDA 12.1's driver branch R530" in lines[0] and lines[0].endswith(f"{PROFILE} will not run")

    status, out, err = run(docker_client, image, PRINT_1, driver="470.57.02")
    assert (status, out) == (0, "1\n") and len(err.splitlines()) == 1
    assert "runs only under forward compatibility" in err and err.rstrip().endswith("on data-center GPUs only")

    assert run(docker_client, image, PRINT_1, driver="550.54.15") == (0, "1\n", "")
    assert run(docker_client, image, PRINT_1) == (0, "1\n", "")  # no nvidia-smi, no driver: silent


def test_the_command_s_exit_status_and_arguments_pass_through(image, docker_client):
    status, out, err = run(docker_client, image, ["sh", "-c", 'printf "[%s]" "$@"; exit 3', "sh", "a b", "$HOME"],
                           driver="450.80.02")
    assert (status, out, len(err.splitlines())) == (3, "[a b][$HOME]", 1)
    assert run(docker_client, image, ["sh", "-c", "exit 42"], driver="550.54.15") == (42, "", "")


def test_the_image_states_the_nvidia_runtime_env_and_runs_a_shell_without_a_command(image, docker_client):
    config = docker_client.api.inspect_image(image)["Config"]
    assert config["Entrypoint"] == ["/bin/sh", "/opt/imagectl/entry.sh"] and not config.get("Cmd")
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    # NVIDIA's own requirement for CUDA 12.1.1, exactly as its image carries it: cuda>=12.1, or R470/R525 on the
    # brands of that image (tests/unit/matrix/golden/require_cuda/12.1.1.txt cites the Dockerfile it was read from)
    golden = Path(__file__).resolve().parents[1] / "unit" / "matrix" / "golden" / "require_cuda" / "12.1.1.txt"
    assert env["NVIDIA_REQUIRE_CUDA"] == golden.read_text().strip()
    assert "brand=tesla,driver>=525,driver<526" in env["NVIDIA_REQUIRE_CUDA"]
    assert "CUDA_HOME" not in env  # not a devel flavour
    assert run(docker_client, image, None, driver="550.54.15") == (0, "", "")  # bash, stdin closed: exits 0


def test_the_in_image_check_runs_through_the_entrypoint(image, run_cli):
    """``python /opt/imagectl/check.py`` goes through the entry script, which passes it on silently."""
    tested = run_cli("test", PROFILE, "--json")
    assert tested.code == 0, tested.err[-2000:]
    report = json.loads(tested.out)
    assert report["ok"] and "torch version" in {f["what"] for f in report["findings"]}
