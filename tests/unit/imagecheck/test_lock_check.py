"""The lock part of the in-image check: the installed environment against the lock (and a team's extras), the
lock file's sha256, ``pip check`` and the companion imports; :func:`compare` over hand-made reports, and the
rendered check script run with the local Python."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from imagectl.config import Config
from imagectl.image_spec import ImageSpec
from imagectl.imagecheck.compare import Finding, compare, failed
from imagectl.labels import EXTRAS, LOCK_PACKAGES, LOCK_SHA256, expectations
from imagectl.matrix.names import resolve_profile
from imagectl.render.context import render_context
from imagectl.render.dockerfile import CHECK_TEMPLATE, make_environment, render_template
from imagectl.shipped import template_dirs

SHA = "ab" * 32
LOCK = {"filelock": "3.13.1", "nvidia-nccl-cu12": "2.20.5", "torch": "2.3.1+cu121", "torchvision": "0.18.1",
        "typing-extensions": "4.12.2"}
LABELS = {
    "imagectl.framework": "torch", "imagectl.framework.version": "2.3.1", "imagectl.cuda": "12.1",
    "imagectl.cudnn": "8.9.2.26", "imagectl.nccl": "2.20.5", "imagectl.python": "3.11",
    "imagectl.packages": "nvidia-nccl-cu12==2.20.5,torch==2.3.1,torchvision==0.18.1",
    LOCK_PACKAGES: ",".join(f"{n}=={v}" for n, v in sorted(LOCK.items())),
    LOCK_SHA256: SHA,
}
SET = "installed packages = lock"
EXTRAS_WHAT = "extras at their locked versions"
SHA_WHAT = "lock file sha256"


def report(packages: dict[str, str] | None = None, **changes: Any) -> dict[str, Any]:
    """The report of an image that holds exactly the lock (plus the venv's pip)."""
    base = {
        "python": "3.11.2",
        "packages": {**LOCK, "pip": "24.0"} if packages is None else packages,
        "system_nccl": {"env": None, "dpkg": None},
        "gpu_requested": False,
        "framework": {"name": "torch", "version": "2.3.1", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.20.5"},
        "lock_files": [{"kind": "lock", "path": "/opt/imagectl/lock.txt", "sha256": SHA, "error": None}],
        "pip_check": {"ok": True, "output": "No broken requirements found."},
        "imports": {"torchvision": None},
    }
    base.update(changes)
    return base


def finding(findings: list[Finding], what: str) -> Finding:
    [found] = [f for f in findings if f.what == what]
    return found


def test_exact_lock_passes():
    findings = compare(expectations(LABELS), report())
    assert failed(findings) == [] and all(f.ok for f in findings)
    env = finding(findings, SET)
    assert env.expected == "5 locked packages"
    assert [f.what for f in findings if f.what in (SET, SHA_WHAT, "pip check", "import torchvision")] == [
        SET, SHA_WHAT, "pip check", "import torchvision"]
    assert EXTRAS_WHAT not in [f.what for f in findings]  # no extras, no extras finding


def test_names_are_compared_canonically_and_versions_by_pep440():
    packages = {"FileLock": "3.13.1", "nvidia_nccl_cu12": "2.20.5", "torch": "2.3.1+cu121",
                "torchvision": "0.18.1.0", "Typing.Extensions": "4.12.2"}
    assert finding(compare(expectations(LABELS), report(packages)), SET).ok


@pytest.mark.parametrize("packages, named", [
    ({k: v for k, v in LOCK.items() if k != "filelock"}, "missing: filelock==3.13.1"),
    ({**LOCK, "requests": "2.32.3"}, "extra: requests==2.32.3"),
    ({**LOCK, "typing-extensions": "4.11.0"}, "differs: typing-extensions 4.12.2 != 4.11.0"),
    ({**LOCK, "torch": "2.3.1"}, "differs: torch 2.3.1+cu121 != 2.3.1"),  # the local version must match too
])
def test_each_difference_fails_and_is_named(packages, named):
    bad = failed(compare(expectations(LABELS), report(packages)))
    assert [f.what for f in bad if f.what == SET] == [SET]
    assert finding(bad, SET).actual == named


def test_all_differences_are_named_in_one_finding():
    packages = {**{k: v for k, v in LOCK.items() if k != "filelock"}, "requests": "2.32.3", "torchvision": "0.18.0"}
    env = finding(compare(expectations(LABELS), report(packages)), SET)
    assert env.actual == "missing: filelock==3.13.1; extra: requests==2.32.3; differs: torchvision 0.18.1 != 0.18.0"


def test_venv_tooling_is_exempt_unless_locked():
    packages = {**LOCK, "pip": "24.0", "setuptools": "69.5.1", "wheel": "0.43.0"}
    assert finding(compare(expectations(LABELS), report(packages)), SET).ok
    locked = {**LABELS, LOCK_PACKAGES: LABELS[LOCK_PACKAGES] + ",setuptools==70.0.0"}
    env = finding(compare(expectations(locked), report(packages)), SET)
    assert not env.ok and env.actual == "differs: setuptools 70.0.0 != 69.5.1"
    env = finding(compare(expectations(locked), report(LOCK)), SET)
    assert not env.ok and env.actual == "missing: setuptools==70.0.0"


def test_extras_are_part_of_the_environment_and_checked():
    labels = {**LABELS, EXTRAS: "einops==0.8.0,Safe_Tensors==0.4.3"}
    packages = {**LOCK, "einops": "0.8.0", "safe-tensors": "0.4.3"}
    findings = compare(expectations(labels), report(packages))
    assert failed(findings) == []
    assert finding(findings, SET).expected == "7 locked packages"
    extras = finding(findings, EXTRAS_WHAT)
    assert extras.ok and extras.expected == "einops==0.8.0, safe-tensors==0.4.3"

    bad = failed(compare(expectations(labels), report({**LOCK, "einops": "0.7.0"})))
    assert sorted(f.what for f in bad) == [EXTRAS_WHAT, SET]
    assert finding(bad, EXTRAS_WHAT).actual == "missing: safe-tensors==0.4.3; differs: einops 0.8.0 != 0.7.0"

    # without the extras the image would hold packages its lock does not name
    env = finding(compare(expectations(LABELS), report(packages)), SET)
    assert env.actual == "extra: einops==0.8.0, safe-tensors==0.4.3"


def test_lock_file_sha256():
    other = [{"kind": "lock", "path": "/opt/imagectl/lock.txt", "sha256": "cd" * 32, "error": None}]
    sha = finding(failed(compare(expectations(LABELS), report(lock_files=other))), SHA_WHAT)
    assert sha.expected == SHA and sha.actual == "cd" * 32

    missing = [{"kind": "lock", "path": "/opt/imagectl/lock.txt", "sha256": None,
                "error": "FileNotFoundError: [Errno 2] No such file or directory: '/opt/imagectl/lock.txt'"}]
    sha = finding(failed(compare(expectations(LABELS), report(lock_files=missing))), SHA_WHAT)
    assert sha.actual.startswith("no lock file at /opt/imagectl/lock.txt: FileNotFoundError")

    unlabelled = {k: v for k, v in LABELS.items() if k != LOCK_SHA256}
    assert not finding(compare(expectations(unlabelled), report()), SHA_WHAT).ok


def test_a_report_of_an_older_script():
    old = report()
    for key in ("lock_files", "pip_check", "imports"):
        del old[key]
    findings = compare(expectations(LABELS), old)
    assert [f.what for f in failed(findings)] == [SHA_WHAT]
    assert finding(findings, SHA_WHAT).actual == "the check script reported no lock file"
    assert finding(findings, SET).ok
    assert not [f for f in findings if f.what == "pip check" or f.what.startswith("import ")]
    old["packages"] = {**LOCK, "requests": "2.32.3"}
    assert sorted(f.what for f in failed(compare(expectations(LABELS), old))) == [SET, SHA_WHAT]


def test_pip_check():
    broken = {"ok": False, "output": "torchvision 0.18.1 has requirement torch==2.3.1, but you have torch 2.2.0.\n"
                                     "second line\nthird line\nfourth line"}
    bad = finding(failed(compare(expectations(LABELS), report(pip_check=broken))), "pip check")
    assert bad.actual == ("torchvision 0.18.1 has requirement torch==2.3.1, but you have torch 2.2.0.; "
                          "second line; third line")
    no_pip = compare(expectations(LABELS), report(pip_check={"ok": None, "output": "pip not installed"}))
    warning = finding(no_pip, "pip check")
    assert failed(no_pip) == [] and not warning.ok and warning.severity == "warning"
    assert warning.actual == "pip not installed"


def test_failed_import():
    imports = {"torchaudio": "ModuleNotFoundError: No module named 'torchaudio'", "torchvision": None}
    findings = compare(expectations(LABELS), report(imports=imports))
    assert [(f.what, f.actual) for f in failed(findings)] == [
        ("import torchaudio", "ModuleNotFoundError: No module named 'torchaudio'")]
    assert finding(findings, "import torchvision").ok


def test_no_lock_makes_no_lock_finding():
    unlocked = {k: v for k, v in LABELS.items() if k not in (LOCK_PACKAGES, LOCK_SHA256)}
    expect = expectations(unlocked)
    assert expect["lock"] is None
    findings = compare(expect, report({**LOCK, "requests": "2.32.3"}, lock_files=[]))
    whats = [f.what for f in findings]
    assert SET not in whats and SHA_WHAT not in whats and EXTRAS_WHAT not in whats
    assert "pip check" in whats and "import torchvision" in whats  # still reported when present
    assert failed(findings) == []


# -- the rendered script ---------------------------------------------------------------------------------------


def render_check(profile, lock_check: dict[str, Any]) -> str:
    context = {**render_context(ImageSpec(profile), Config()), "lock_check": lock_check}
    return render_template(make_environment(template_dirs(Config())), CHECK_TEMPLATE, context)


def test_the_rendered_script_reports_lock_files_pip_check_and_imports(matrix, tmp_path: Path):
    lock = tmp_path / "lock.txt"
    lock.write_bytes(b"torch==2.3.1 \\\n    --hash=sha256:" + b"0" * 64 + b"\n")
    missing = tmp_path / "extras-lock.txt"
    profile = resolve_profile("torch-2.3-cu121", matrix)
    script = tmp_path / "check.py"
    script.write_text(render_check(profile, {"lock_path": str(lock), "extras_lock_path": str(missing),
                                             "imports": ["json", "no_such_module_xyz"]}))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])

    assert got["lock_files"] == [
        {"kind": "lock", "path": str(lock), "sha256": hashlib.sha256(lock.read_bytes()).hexdigest(), "error": None},
        {"kind": "extras", "path": str(missing), "sha256": None, "error": got["lock_files"][1]["error"]},
    ]
    assert got["lock_files"][1]["error"].startswith("FileNotFoundError: ")
    assert got["imports"]["json"] is None
    error = got["imports"]["no_such_module_xyz"]
    assert error.startswith("ModuleNotFoundError: ") and "no_such_module_xyz" in error
    assert "\n" not in error and len(error) <= 300
    pip = got["pip_check"]
    assert set(pip) == {"ok", "output"} and isinstance(pip["output"], str)
    assert pip["ok"] in (True, False) or (pip["ok"] is None and pip["output"] == "pip not installed")
    assert all(name == name.lower() and "_" not in name and "." not in name for name in got["packages"])


def test_no_extras_lock_and_no_imports(matrix, tmp_path: Path):
    profile = resolve_profile("torch-2.3-cu121", matrix)
    source = render_check(profile, {"lock_path": "/opt/imagectl/lock.txt", "extras_lock_path": "", "imports": []})
    names: dict[str, Any] = {"__name__": "imagectl_check"}
    exec(compile(source, "imagectl-check.py", "exec"), names)
    assert [f["kind"] for f in names["lock_files"]()] == ["lock"]
    assert names["import_modules"]([]) == {}
    assert names["canonical_name"]("Typing__Extensions.x") == "typing-extensions-x"
