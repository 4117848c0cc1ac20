"""The lock file format, the layers, the extras' conflicts, the policies and where locks are found: pure or on
disk, no resolver (tests/unit/lock/test_resolve.py runs uv for real)."""

from __future__ import annotations

import pytest

from imagectl.config import Config
from imagectl.errors import InputError
from imagectl.lock.asof import check_policy, resolve_as_of
from imagectl.lock.extras import conflicts
from imagectl.lock.layers import layer_of, split_layers
from imagectl.lock.lockfile import (Lock, LockHeader, added_packages, format_lock, package, parse_lock,
                                    requirement_lines)
from imagectl.lock.resolve import uv_arguments, uv_cause, uv_environment
from imagectl.lock.store import find_lock, lock_dirs, write_lock
from imagectl.lock.target import Target, lock_inputs, profile_lock_id
from imagectl.lock.verify import input_problems
from imagectl.matrix.names import resolve_profile

H1, H2, H3 = "a" * 64, "b" * 64, "c" * 64
HEADER = LockHeader("torch", "2.3.1", "cu121", "3.10", "https://pypi.org/simple", "x86_64-manylinux_2_28",
                    "2024-06-12", "release: torch 2.3.1 uploaded 2024-06-05, plus 7 days",
                    ("torch==2.3.1", "triton==2.3.1"), "resolved by uv")
TORCH_LAYERS = (("cuda", ("nvidia-*", "cuda-*")), ("framework", ("torch", "triton")), ("rest", ("*",)))


def sample(**versions: str) -> Lock:
    packages = [package(name, version, [H2, H1]) for name, version in versions.items()]
    return Lock(HEADER, tuple(sorted(packages, key=lambda p: p.name)))


def test_a_lock_is_sorted_hashed_and_the_same_bytes_every_time():
    lock = sample(triton="2.3.1", Torch="2.3.1", numpy="1.26.4")
    text = format_lock(lock)
    assert text == format_lock(sample(numpy="1.26.4", triton="2.3.1", Torch="2.3.1"))
    assert text.startswith("# imagectl lock: torch 2.3.1 (cu121), Python 3.10\n# index: https://pypi.org/simple\n")
    assert "# as-of: 2024-06-12 (release: torch 2.3.1 uploaded 2024-06-05, plus 7 days)\n" in text
    body = text.split("# source: resolved by uv\n", 1)[1]
    assert body.startswith(f"numpy==1.26.4 \\\n    --hash=sha256:{H1} \\\n    --hash=sha256:{H2}\ntorch==2.3.1")
    assert [line.split("==")[0] for line in body.splitlines() if "==" in line] == ["numpy", "torch", "triton"]
    assert lock.sha256 == sample(numpy="1.26.4", triton="2.3.1", Torch="2.3.1").sha256


def test_parse_is_the_inverse_of_format():
    lock = sample(torch="2.3.1", numpy="1.26.4")
    again = parse_lock(format_lock(lock), "x.txt")
    assert again == lock and again.text == lock.text and again.header.lock_id == "torch-2.3.1-cu121-py3.10"


@pytest.mark.parametrize("body, message", [
    ("torch==2.3.1\n", "torch==2.3.1 has no --hash"),
    (f"torch==2.3.1 \\\n    --hash=sha256:{H1}\ntorch==2.3.1 \\\n    --hash=sha256:{H2}\n", "torch is locked twice"),
    (f"torch>=2.3 \\\n    --hash=sha256:{H1}\n", "x.txt:7: expected 'name==version'"),
    (f"--index-url https://evil.example.com\ntorch==2.3.1 \\\n    --hash=sha256:{H1}\n", "x.txt:7:"),
    ("torch==2.3.1 \\\n    --hash=sha256:abc\n", "x.txt:8:"),
])
def test_a_bad_lock_line_is_an_input_error_naming_the_line(body, message):
    head = format_lock(Lock(HEADER, ()))
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("|", r"\|")):
        parse_lock(head + body, "x.txt")


def test_a_file_that_is_no_lock_says_so():
    with pytest.raises(InputError, match="x.txt:1: not an imagectl lock"):
        parse_lock("torch==2.3.1\n", "x.txt")
    with pytest.raises(InputError, match="x.txt:2: expected the header line '# index: ...'"):
        parse_lock("# imagectl lock: torch 2.3.1 (cu121), Python 3.10\ntorch==2.3.1\n", "x.txt")


def test_layers_follow_the_framework_data_and_the_last_takes_the_rest():
    lock = sample(**{"nvidia-nccl-cu12": "2.20.5", "cuda-toolkit": "13.2.2", "torch": "2.3.1", "triton": "2.3.1",
                     "numpy": "1.26.4", "torchvision": "0.18.1"})
    layers = split_layers(lock.packages, TORCH_LAYERS)
    assert [(name, [p.name for p in pkgs]) for name, pkgs in layers] == [
        ("cuda", ["cuda-toolkit", "nvidia-nccl-cu12"]), ("framework", ["torch", "triton"]),
        ("rest", ["numpy", "torchvision"])]
    assert layer_of("anything", (("cuda", ("nvidia-*",)), ("framework", ("torch",)))) == "framework"
    only_rest = split_layers(sample(numpy="1.26.4").packages, TORCH_LAYERS)
    assert [name for name, _ in only_rest] == ["rest"]  # empty layers are left out
    assert requirement_lines(layers[1][1]).startswith("torch==2.3.1 \\\n")


@pytest.mark.parametrize("extra, conflict", [
    ("torch==2.4.0", True),
    ("torch>=2.4", True),
    ("torch>=2.3,<2.4", False),
    ("torch", False),
    ("einops==0.8.0", False),
    ('torch==2.4.0; python_version < "3.0"', False),  # the marker is false in the image: no conflict
    ('Torch==2.4.0; sys_platform == "linux"', True),
])
def test_an_extra_conflicts_only_with_a_locked_version_it_excludes(extra, conflict):
    found = conflicts([extra], sample(torch="2.3.1", numpy="1.26.4"))
    assert bool(found) is conflict
    if conflict:
        assert "torch==2.3.1" in found[0] and "torch" in found[0] and "torch-2.3.1-cu121-py3.10" in found[0]


def test_added_packages_are_the_ones_the_lock_does_not_have():
    lock = sample(torch="2.3.1", numpy="1.26.4")
    closure = [package("numpy", "1.26.4", [H1]), package("einops", "0.8.0", [H3])]
    assert added_packages(closure, lock) == {"einops": "0.8.0"}


@pytest.mark.parametrize("value", ["release", "latest", "2024-06-12"])
def test_policies(value):
    assert check_policy(value) == value


@pytest.mark.parametrize("value", ["", "soon", "2024-6-12", "2024-02-30", "2024-06-12T00:00"])
def test_bad_policies_are_input_errors(value):
    with pytest.raises(InputError, match="expected a date YYYY-MM-DD, 'release' or 'latest'"):
        check_policy(value)


def test_a_date_or_latest_needs_no_index(matrix):
    profile = resolve_profile("torch-2.3-cu121", matrix)
    target = Target("3.10", "http://127.0.0.1:9/simple", "http://127.0.0.1:9/simple")
    assert resolve_as_of("2024-01-31", profile, target, 7).date == "2024-01-31"
    assert resolve_as_of("latest", profile, target, 7).date == "latest"


def test_lock_inputs_are_the_pins_with_the_framework_extras(matrix):
    from dataclasses import replace

    profile = resolve_profile("torch-2.3-cu121", matrix)
    assert lock_inputs(profile) == tuple(f"{n}=={v}" for n, v in profile.packages)
    fw = replace(profile.framework, pin_extras=(("torch", ("opt-einsum",)),))
    assert f"torch[opt-einsum]=={profile.release.version}" in lock_inputs(replace(profile, framework=fw))


def test_uv_gets_the_indexes_from_its_environment_never_its_arguments():
    target = Target("3.11", "https://pypi.example.com/simple", "https://u:s3cret@pypi.example.com/simple",
                    ("https://extra.example.com/simple",), ("https://b:t0ken@extra.example.com/simple",),
                    ("pypi.example.com",))
    args = uv_arguments(target, "2024-06-12", constraints=True)
    assert "s3cret" not in " ".join(args) and "pypi.example.com" in args  # the insecure host only
    assert args[args.index("--exclude-newer") + 1] == "2024-06-12" and "--generate-hashes" in args
    assert args[args.index("--python-platform") + 1] == "x86_64-manylinux_2_28" and "--no-config" in args
    assert "--exclude-newer" not in uv_arguments(target, "latest", constraints=False)
    env = uv_environment(target, {"UV_INDEX_URL": "https://other", "PATH": "/bin", "UV_CACHE_DIR": "/c"})
    assert env["UV_DEFAULT_INDEX"] == target.index_secret and env["UV_INDEX"] == target.extra_secret[0]
    assert "UV_INDEX_URL" not in env and env["UV_CACHE_DIR"] == "/c" and env["PATH"] == "/bin"


@pytest.mark.parametrize("stderr, cause", [
    ("  × No solution found when resolving dependencies:\n  ╰─▶ Because you require torch==2.3.1 and torch==2.4.0, "
     "we can conclude that your requirements are unsatisfiable.\n",
     "the requirements cannot all be met: you require torch==2.3.1 and torch==2.4.0, we can conclude"),
    ("error: Request failed after 3 retries\n  Caused by: Failed to fetch: `http://x/simple/torch/`\n"
     "  Caused by: Connection refused (os error 111)\n", "Connection refused (os error 111)"),
    ("", "uv failed and said nothing"),
])
def test_uv_cause_is_one_line(stderr, cause):
    assert uv_cause(stderr).startswith(cause) and "\n" not in uv_cause(stderr)


def test_a_lock_applies_only_to_its_index_and_python(matrix, use_matrix, tmp_path, test_matrix_dir):
    use_matrix(test_matrix_dir)
    profile = resolve_profile("torch-2.3-cu121", matrix)
    team = tmp_path / "team"
    config = Config(lock_dirs=(team,))
    assert lock_dirs(config)[0] == (team, "team") and lock_dirs(config)[-1][1] == "shipped"
    assert find_lock(profile, config, "https://pypi.org/simple") is None
    write_lock(sample(torch="2.3.1"), team / f"{profile_lock_id(profile)}.txt")
    found = find_lock(profile, config, "https://pypi.org/simple/")
    assert found is not None and found.origin == "team" and found.lock.versions == {"torch": "2.3.1"}
    assert find_lock(profile, config, "https://mirror.example.com/simple") is None  # another index: not this lock


def test_input_problems_name_what_changed_in_the_matrix(matrix):
    profile = resolve_profile("torch-2.3-cu121", matrix)
    good = Lock(HEADER.__class__(**{**HEADER.__dict__, "inputs": lock_inputs(profile)}),
                tuple(package(n, v, [H1]) for n, v in profile.packages))
    assert input_problems(good, profile) == []
    stale = Lock(HEADER, tuple(package(n, "0.0.1" if n == "torch" else v, [H1]) for n, v in profile.packages))
    problems = input_problems(stale, profile)
    assert any(p.startswith("the matrix changed") for p in problems)
    assert f"torch: the matrix pins {profile.release.version}, the lock has 0.0.1" in problems


# --- issue 21: security floors in locks, and an index without upload times ------------------------------------


def test_the_floors_header_line_round_trips_and_is_absent_when_no_floor_applied():
    lock = sample(setuptools="65.5.1")
    floored = Lock(HEADER.__class__(**{**HEADER.__dict__, "floors": "setuptools 65.4.1 -> 65.5.1 (CVE-2022-40897)"}),
                   lock.packages)
    text = format_lock(floored)
    assert "# as-of: 2024-06-12 (release: torch 2.3.1 uploaded 2024-06-05, plus 7 days)\n# floors: setuptools 65.4.1 " \
           "-> 65.5.1 (CVE-2022-40897)\n# inputs: " in text
    assert parse_lock(text, "x").header.floors == "setuptools 65.4.1 -> 65.5.1 (CVE-2022-40897)"
    assert parse_lock(text, "x").text == text and "# floors" not in format_lock(lock)


def test_uv_takes_a_floored_package_as_of_its_own_day_only_with_a_date():
    target = Target("3.8", "https://pypi.org/simple", "https://pypi.org/simple",
                    exclude_newer_packages=("setuptools=2022-11-04",))
    args = uv_arguments(target, "2022-10-10", constraints=True)
    assert args[args.index("--exclude-newer-package") + 1] == "setuptools=2022-11-04"
    assert "--exclude-newer-package" not in uv_arguments(target, "latest", constraints=True)
    assert "--exclude-newer" not in uv_arguments(target, "none", constraints=True)  # no upload times: no cut-off


def test_lock_check_flags_a_lock_below_a_security_floor(shipped_matrix, tmp_path):
    """The torch 2.0.1 locks were made with setuptools 65.4.1 and wheel 0.37.1 (CVE-2022-40897, CVE-2022-40898); the
    shipped ones are remade with the floors, and a lock below one is a problem of lock --check."""
    from pathlib import Path

    from imagectl.lock.verify import check_files

    locks = Path(__file__).resolve().parents[3] / "matrices" / "locks"
    shipped = locks / "torch-2.0.1-cu117-py3.10.txt"
    assert "# floors: setuptools 65.4.1 -> 65.5.1 (CVE-2022-40897" in shipped.read_text()
    assert [str(p) for p in check_files(sorted(locks.glob("*.txt")), shipped_matrix, yanked=False)] == []
    old = tmp_path / shipped.name
    text = shipped.read_text().replace("setuptools==65.5.1", "setuptools==65.4.1")
    old.write_text("".join(line + "\n" for line in text.splitlines() if not line.startswith("# floors:")))
    problems = [p.problem for p in check_files([old], shipped_matrix, yanked=False)]
    assert problems == ["setuptools 65.4.1 is below the security floor 65.5.1 (CVE-2022-40897: ReDoS in "
                        "package_index, fixed in 65.5.1): remake it (imagectl lock torch-2.0.1-cu117-py3.10 --upgrade)"]


@pytest.fixture
def no_upload_times(monkeypatch):
    """An index that serves no upload times (PEP 700 is optional: static and mirrored indexes often omit them), and
    the real as-of policy instead of the unit tests' fixed date."""
    import imagectl.lock.asof
    import imagectl.lock.make

    monkeypatch.setattr(imagectl.lock.make, "resolve_as_of", resolve_as_of)
    monkeypatch.setattr(imagectl.lock.asof, "upload_date", lambda *a, **k: None)
    monkeypatch.setattr(imagectl.lock.make, "upload_date", lambda *a, **k: None)


def test_without_upload_times_a_build_locks_the_newest_and_says_so(matrix, no_upload_times):
    from imagectl.lock.make import lock_for_build

    lines: list[str] = []
    chosen = lock_for_build(resolve_profile("torch-2.3-cu121-py3.11", matrix), Config(), log=lines.append)
    assert chosen.origin == "build-time" and chosen.lock.header.as_of == "none"
    assert "# as-of: none (the index gives no upload times)\n" in chosen.lock.text
    said = [line for line in lines if "upload times" in line]
    assert len(said) == 1 and "locking at the newest versions it serves" in said[0]


def test_an_explicit_as_of_release_still_fails_without_upload_times(matrix, no_upload_times):
    from imagectl.errors import OperationError
    from imagectl.lock.make import make_lock

    profile = resolve_profile("torch-2.3-cu121-py3.11", matrix)
    with pytest.raises(OperationError, match=r"gives no upload time for torch 2\.3\.1 .*set \[lock\] as_of"):
        make_lock(profile, Config(), "release")
    assert make_lock(profile, Config()).header.as_of == "none"  # [lock] as_of's release: the fallback
