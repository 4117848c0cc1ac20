"""Every command on a corpus of bad input: exit 1 or 2, one line on stderr, never a traceback (issue 9, item 11).

The corpus has two parts; grow either by adding one entry:

- ``BAD_WORLDS``: a bad configuration, a bad ``IMAGECTL_*`` variable or a bad matrix (a file in a directory that
  ``[paths] matrices`` of ``./imagectl.toml`` names).  Each one runs under every command of ``COMMANDS``, and
  each must be refused with exit 2 before the command does anything else.
- ``CASES``: bad flags, names, references and outputs of one command.

Each run goes through ``main`` in-process (``run_cli``) in a scratch working directory.  The registry and the
engine, where a command needs one, are 127.0.0.1 at a port nothing listens on (``{closed}``), and the retry
policy does not wait, so they fail fast; the test matrix stands in for the shipped one (``use_matrix``).
"""

from __future__ import annotations

import glob
import os
import re
import socket
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pytest

from tests.conftest import FIXTURES

CLOSED = "{closed}"  # replaced by 127.0.0.1:PORT of a port that refuses connections
PROFILE = "torch-2.3-cu121"
DIGEST_63 = "sha256:" + "a" * 63
DIGEST_65 = "sha256:" + "a" * 65

# One invocation of each command that would get past its own argument checks.
COMMANDS: dict[str, tuple[str, ...]] = {
    "list": ("list",),
    "show": ("show", PROFILE),
    "validate": ("validate",),
    "compat": ("compat", "--driver", "550.54.15"),
    "check": ("check", "torch==2.3.1", "cuda=12.1"),
    "render": ("render", PROFILE),
    "build": ("build", PROFILE),
    "test": ("test", PROFILE),
    "history": ("history", PROFILE),
    "rollback": ("rollback", PROFILE),
    "promote": ("promote", PROFILE, "--channel", "stable"),
    "prune": ("prune", PROFILE, "--keep", "1"),
    "import": ("import", f"{CLOSED}/team/torch:1", "--name", PROFILE, "--no-check"),
    "matrix": ("matrix",),
    "lock": ("lock", PROFILE),
    "matrix verify": ("matrix", "verify", "--index", f"http://{CLOSED}/simple"),
    "matrix sync": ("matrix", "sync", "--index", f"http://{CLOSED}/simple"),
    "bases": ("bases", "status", PROFILE),
    "rebuild": ("rebuild", PROFILE, "--compare"),
    "verify": ("verify", PROFILE),
    "advisories": ("advisories", "list"),
    "index": ("index", PROFILE, "--platforms", "linux/amd64"),
    "diff": ("diff", PROFILE, f"{PROFILE}:stable"),
    "sweep": ("sweep", "--dry-run"),
}


@dataclass(frozen=True)
class World:
    """What a command runs in: files of the working directory, variables, options before the command."""

    files: Mapping[str, str | bytes] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    before: tuple[str, ...] = ()  # global options, e.g. --config PATH


@dataclass(frozen=True)
class Case:
    """One command line in one world, and what its one stderr line must look like."""

    args: tuple[str, ...]
    world: World = World()
    code: int | None = None  # the exit status it must have; None: 1 or 2
    line: str = r"^imagectl: \S"  # the stderr line (the last one, with progress)
    progress: bool = False  # stderr may carry progress lines before the error (build)


def with_matrix(text: str | bytes, name: str = "bad.toml") -> World:
    """A world whose ./imagectl.toml adds a matrix directory holding ``text``."""
    return World({"imagectl.toml": '[paths]\nmatrices = ["my-matrices"]\n', f"my-matrices/{name}": text})


def with_config(text: str | bytes) -> World:
    return World({"imagectl.toml": text})


BASE = '[base]\nrepository = "nvidia/cuda"\nflavors = ["runtime", "devel"]\ntag = "{cuda_release}-{flavor}-{os}"\n'
FRAMEWORK = """[framework]
name = "evil"
package = "evil"
cuda_tag = "cu{major}{minor}"
index_url = "https://example.com/whl/{cuda_tag}"
check = "torch"

[[release]]
version = "1.0.0"
python = ["3.10"]

  [[release.variant]]
  cuda = "12.1"
  pins = { "nvidia-nccl-cu12" = "2.20.5" }
"""


def base(old: str, new: str) -> World:
    assert old in BASE
    return with_matrix(BASE.replace(old, new))


def framework(old: str, new: str) -> World:
    assert old in FRAMEWORK
    return with_matrix(FRAMEWORK.replace(old, new))


def _unreadable() -> str:
    """A file this user cannot read (EACCES), or "" when there is none: mode 000 for an ordinary user; for root
    (CI runs as root) a write-only sysfs attribute (``/sys/bus/*/drivers_probe``, mode 0200), which not even root
    may read."""
    if os.geteuid() != 0:
        path = Path(tempfile.mkdtemp(prefix="imagectl-unreadable-")) / "unreadable"
        path.write_text("x")
        path.chmod(0)
        return str(path)
    for candidate in sorted(glob.glob("/sys/bus/*/drivers_probe")) + sorted(glob.glob("/sys/bus/*/rescan")):
        try:
            Path(candidate).read_bytes()
        except PermissionError:
            return candidate
        except OSError:
            continue
    return ""


UNREADABLE = _unreadable()

BAD_WORLDS: dict[str, World] = {
    # matrices ([paths] matrices)
    "base-tag-unknown-field": base("{cuda_release}-{flavor}-{os}", "{nope}"),
    "base-tag-lone-brace": base("{cuda_release}-{flavor}-{os}", "{"),
    "base-tag-format-spec": base("{cuda_release}-{flavor}-{os}", "{os:>999999999}"),
    "base-tag-attribute": base("{cuda_release}-{flavor}-{os}", "{os.__class__}"),
    "base-tag-invalid": base("{cuda_release}-{flavor}-{os}", "{cuda_release} {os}"),
    "base-unknown-key": with_matrix(BASE + 'flavours = ["x"]\n'),
    "base-missing-repository": base('repository = "nvidia/cuda"\n', ""),
    "base-bad-repository": base('"nvidia/cuda"', '"Not A/Repo"'),
    "base-flavor-with-dash": base('["runtime", "devel"]', '["runtime", "cudnn-devel"]'),
    "base-flavors-empty": base('["runtime", "devel"]', "[]"),
    "base-not-a-table": with_matrix("base = 1\n"),
    "framework-check-main": framework('check = "torch"', 'check = "main"'),
    "framework-dotted-name": framework('name = "evil"', 'name = "my.fw"'),
    "framework-unknown-key": framework('check = "torch"', 'check = "torch"\nchecks = "torch"'),
    "framework-missing": with_matrix(FRAMEWORK.split("[[release]]", 1)[1].join(["[[release]]", ""])),
    "framework-cuda-tag-field": framework("cu{major}{minor}", "cu{patch}"),
    "framework-cuda-tag-shape": framework("cu{major}{minor}", "cu{major}_{minor}"),
    "release-unknown-key": framework('python = ["3.10"]', 'pyhton = ["3.10"]'),
    "release-version-dash": framework('version = "1.0.0"', 'version = "1.0.0-1"'),
    "release-version-rc-dash": framework('version = "1.0.0"', 'version = "1.0.0-rc1"'),
    "release-version-epoch": framework('version = "1.0.0"', 'version = "1!1.0.0"'),
    "release-not-an-array": with_matrix("release = 1\n" + FRAMEWORK.split("[[release]]")[0]),
    "variant-unknown-key-pin": framework("  pins = {", "  pin = {"),
    "variant-undeclared-cuda": framework('cuda = "12.1"', 'cuda = "99.9"'),
    "variant-pypi-not-bool": framework('cuda = "12.1"', 'cuda = "12.1"\n  pypi = "yes"'),
    "variant-pins-not-table": framework('  pins = { "nvidia-nccl-cu12" = "2.20.5" }', "  pins = 1"),
    "variant-missing": framework('  [[release.variant]]\n  cuda = "12.1"\n  pins = { "nvidia-nccl-cu12" = "2.20.5" }\n',
                                 ""),
    "os-not-a-table": with_matrix('[os]\n"x" = 1\n'),
    "os-unknown-key": with_matrix('[os."ubuntu26.04"]\npython = "3.13"\npyton = "3.13"\n'),
    "os-name-with-dash": with_matrix('[os."ubuntu-26.04"]\npython = "3.13"\n'),
    "cuda-key-not-major-minor": with_matrix('[cuda."12"]\nrelease = "12.0.0"\n'),
    "cuda-unknown-key": with_matrix('[cuda."12.9"]\nrelease = "12.9.1"\nmin_drivers = "575.51.03"\n'),
    "gpus-bad-arch": with_matrix('[gpus]\n"X" = "90"\n'),
    "top-level-unknown-key": with_matrix("frameworks = 1\n"),
    "toml-deeply-nested": with_matrix("x = " + "[" * 3000 + "]" * 3000 + "\n"),
    "toml-malformed": with_matrix("[base\n"),
    "toml-duplicate-key": with_matrix('[gpus]\n"X" = "sm_90"\n"X" = "sm_80"\n'),
    "toml-not-utf8": with_matrix(b"\xff\xfe[gpus]\n"),
    "matrix-dir-is-a-file": World({"imagectl.toml": '[paths]\nmatrices = ["m.toml"]\n', "m.toml": ""}),
    # configuration files
    "config-malformed": with_config("[registry\n"),
    "config-deeply-nested": with_config("[build]\nargs = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"),
    "config-not-utf8": with_config(b"\xff[registry]\n"),
    "config-unknown-section": with_config("[registy]\nurl = 'x'\n"),
    "config-unknown-key": with_config("[registry]\nhost = 'x'\n"),
    "config-insecure-not-bool": with_config("[registry]\ninsecure = 'maybe'\n"),
    "config-min-age-overflow": with_config("[tags]\nprune_min_age_days = 99999999999\n"),
    "config-min-age-negative": with_config("[tags]\nprune_min_age_days = -1\n"),
    "config-min-age-float": with_config("[tags]\nprune_min_age_days = 1.5\n"),
    "config-context-missing": with_config("[paths]\ncontext = ['nope']\n"),
    "config-ca-bundle-missing": with_config("[build]\nca_bundle = 'nope.pem'\n"),
    "config-network-unknown": with_config("[build]\nnetwork = 'overlay'\n"),
    "config-mirrors-not-table": with_config("mirrors = 1\n"),
    "config-flag-directory": World({"conf/x": ""}, before=("--config", "conf")),
    "config-flag-missing": World(before=("--config", "nope.toml")),
    "config-flag-empty": World(before=("--config", "")),
    "config-variable-missing": World(env={"IMAGECTL_CONFIG": "nope.toml"}),
    "config-default-is-a-directory": World({"imagectl.toml/x": ""}),
    # variables
    "env-insecure-maybe": World(env={"IMAGECTL_REGISTRY_INSECURE": "maybe"}),
    "env-min-age-overflow": World(env={"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "99999999999"}),
    "env-min-age-superscript": World(env={"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "²"}),
    "env-min-age-huge": World(env={"IMAGECTL_TAGS_PRUNE_MIN_AGE_DAYS": "9" * 5000}),
    "env-mirrors-no-pairs": World(env={"IMAGECTL_MIRRORS": "garbage"}),
    "env-build-args-no-pairs": World(env={"IMAGECTL_BUILD_ARGS": "novalue"}),
    "env-index-not-http": World(env={"IMAGECTL_PIP_INDEX_URL": "ftp://x/simple"}),
    "env-registry-bad-host": World(env={"IMAGECTL_REGISTRY_URL": "bad host!"}),
    "env-network-unknown": World(env={"IMAGECTL_BUILD_NETWORK": "overlay"}),
    "config-build-platforms-not-a-list": with_config("[build]\nplatforms = 'linux/arm64'\n"),
    "config-build-platforms-empty": with_config("[build]\nplatforms = []\n"),
    "env-namespace-bad": World(env={"IMAGECTL_REGISTRY_NAMESPACE": "UPPER CASE"}),
    "config-lock-as-of-word": with_config("[lock]\nas_of = 'soon'\n"),
    "config-lock-as-of-bad-date": with_config("[lock]\nas_of = '2024-13-40'\n"),
    "config-lock-grace-negative": with_config("[lock]\ngrace_days = -1\n"),
    "config-locks-dir-missing": with_config("[paths]\nlocks = ['nope']\n"),
    "env-lock-as-of-word": World(env={"IMAGECTL_LOCK_AS_OF": "yesterday"}),
    "config-apt-snapshot-a-date": with_config("[apt]\nsnapshot = '2024-06-01'\n"),
    "env-apt-snapshot-no-time": World(env={"IMAGECTL_APT_SNAPSHOT": "20241340T000000Z"}),
    "config-build-cache-with-tag": with_config("[build]\ncache = 'registry.example.com/cache:v1'\n"),
    "env-build-cache-no-registry": World(env={"IMAGECTL_BUILD_CACHE": "cache"}),
    # issue 24's tracebacks: ports above 65535, unreadable files (EACCES, EIO), python = [], an over-long name
    "config-registry-port-too-big": with_config("[registry]\nurl = '127.0.0.1:99999'\n"),
    "env-registry-port-too-big": World(env={"IMAGECTL_REGISTRY_URL": "127.0.0.1:99999"}),
    "config-mirror-port-too-big": with_config('[mirrors]\n"docker.io" = "127.0.0.1:99999/hub"\n'),
    "config-index-port-too-big": with_config("[pip]\nindex_url = 'http://127.0.0.1:99999/simple'\n"),
    "config-ca-bundle-eio": with_config("[build]\nca_bundle = '/proc/self/mem'\n"),
    "config-ca-bundle-eacces": with_config(f"[build]\nca_bundle = '{UNREADABLE}'\n"),
    "config-flag-eacces": World(before=("--config", UNREADABLE)),
    "release-python-empty": framework('python = ["3.10"]', "python = []"),
    "framework-name-too-long": framework('name = "evil"', f'name = "{"e" * 300}"'),
    # a team lock of the profile that does not read as a lock: show, render, build, lock refuse it, naming the file
}
LOCK_ID = "torch-2.3.1-cu121-py3.10"  # the lock of PROFILE in the test matrix
BROKEN_LOCK = World({"imagectl.toml": '[paths]\nlocks = ["locks"]\n',
                     f"locks/{LOCK_ID}.txt": "# imagectl lock: torch 2.3.1 (cu121), Python 3.10\nnot a lock line\n"})
SYSTEM_LOCK_ID = "torch-12.1.1-runtime-ubuntu22.04-py3.10"  # PROFILE's system lock in the test matrix
BROKEN_SYSTEM_LOCK = World({"imagectl.toml": '[paths]\nlocks = ["locks"]\n',
                            f"locks/{SYSTEM_LOCK_ID}.apt.lock": "# imagectl system lock: torch on x, Python 3.10\n"
                                                                "gcc=1.0;id Debian:12/stable amd64\n"})
TEAM_LOCKS = World({"imagectl.toml": '[paths]\nlocks = ["locks"]\n', "locks/.keep": ""})

REGISTRY = World(env={"IMAGECTL_REGISTRY_URL": CLOSED})
A_FILE = World({"afile": "not a directory\n"})
EVIL_TEMPLATE = World({"imagectl.toml": '[paths]\ntemplates = ["evil"]\n',
                       "evil/partials/ca.j2": "{{ cycler.__init__.__globals__.os.system('touch pwned') }}"})
NO_NVIDIA_SMI = World(env={"PATH": "{empty}"})

CASES: dict[str, Case] = {
    # global
    "no-such-command": Case(("nope",), code=2),
    "unknown-global-flag": Case(("--nope", "list"), code=2),
    # list, show
    "list-unknown-flag": Case(("list", "--bogus"), code=2),
    "list-unknown-framework": Case(("list", "--framework", "nope"), code=2),
    "list-empty-framework": Case(("list", "--framework", ""), code=2),
    "list-bad-cuda": Case(("list", "--cuda", "twelve"), code=2),
    "list-bad-python": Case(("list", "--python", "3"), code=2),
    "list-unknown-flavor": Case(("list", "--flavor", "slim"), code=2),
    "list-bad-flavor": Case(("list", "--flavor", "Bad Flavor"), code=2),
    "show-missing-name": Case(("show",), code=2),
    "show-empty-name": Case(("show", ""), code=2),
    "show-unknown-name": Case(("show", "nope"), code=2),
    "show-unknown-release": Case(("show", "torch-9.9-cu121"), code=2),
    "show-unknown-cuda": Case(("show", "torch-2.3-cu999"), code=2),
    "show-repeated-suffix": Case(("show", f"{PROFILE}-devel-devel"), code=2),
    "show-bad-python": Case(("show", PROFILE, "--python", "three"), code=2),
    "show-unsupported-python": Case(("show", f"{PROFILE}-py3.7"), code=2),
    # validate
    "validate-junit-in-proc": Case(("validate", "--junit", "/proc/x"), code=1),
    "validate-junit-under-a-file": Case(("validate", "--junit", "afile/x"), A_FILE, code=1),
    "validate-junit-a-directory": Case(("validate", "--junit", "."), code=2),
    "validate-hostile-template": Case(("validate",), EVIL_TEMPLATE, code=1,
                                      line=r"^\d+ profiles, \d+ rules, [1-9]\d* violations$"),
    # compat, check
    "compat-bad-driver": Case(("compat", "--driver", "abc"), code=2),
    "compat-unknown-gpu": Case(("compat", "--driver", "550.54.15", "--gpu", "Z9000"), code=2),
    "compat-no-nvidia-smi": Case(("compat",), NO_NVIDIA_SMI, code=2),
    "compat-empty-gpu": Case(("compat", "--driver", "550.54.15", "--gpu", ""), code=2),
    "compat-unknown-framework": Case(("compat", "--driver", "550.54.15", "--framework", "nope"), code=2),
    "check-no-items": Case(("check",), code=2),
    "check-repeated-framework": Case(("check", "torch==2.3.1", "torch==2.2.0"), code=2),
    "check-two-frameworks": Case(("check", "torch==2.3.1", "jax==0.4.30"), code=2),
    "check-repeated-key": Case(("check", "torch==2.3.1", "cuda=12.1", "cuda=11.8"), code=2),
    "check-no-framework": Case(("check", "cuda=12.1"), code=2),
    "check-bad-version": Case(("check", "torch==x"), code=2),
    "check-empty-version": Case(("check", "torch=="), code=2),
    "check-unknown-key": Case(("check", "torch==2.3.1", "cuda12.1"), code=2),
    "check-bad-driver": Case(("check", "torch==2.3.1", "driver=abc"), code=2),
    "check-unknown-gpu": Case(("check", "torch==2.3.1", "gpu=Z9000"), code=2),
    "check-framework-word-without-version": Case(("check", "torch"), code=2),
    "check-framework-word-bad-version": Case(("check", "torch", "latest"), code=2),
    # lock
    "lock-no-names": Case(("lock",), code=2),
    "lock-unknown-name": Case(("lock", "nope"), code=2),
    "lock-bad-as-of": Case(("lock", PROFILE, "--as-of", "tomorrow"), code=2),
    "lock-bad-as-of-date": Case(("lock", PROFILE, "--as-of", "2024-02-30"), code=2),
    "lock-output-with-all": Case(("lock", "--all", "--output", "x.txt"), code=2),
    "lock-all-nowhere": Case(("lock", "--all"), code=2),
    "lock-output-in-proc": Case(("lock", PROFILE, "--output", "/proc/x/lock.txt"), code=1),
    "lock-output-a-directory": Case(("lock", PROFILE, "--output", "."), code=2),
    "lock-broken-team-lock": Case(("lock", PROFILE, "--output", f"locks/{LOCK_ID}.txt"), BROKEN_LOCK, code=2),
    "show-broken-team-lock": Case(("show", PROFILE), BROKEN_LOCK, code=2, line=rf"^imagectl: .*{LOCK_ID}\.txt:2: "),
    "render-broken-team-lock": Case(("render", PROFILE), BROKEN_LOCK, code=2),
    "build-broken-team-lock": Case(("build", PROFILE), BROKEN_LOCK, progress=True),
    "build-extra-conflicts-with-the-lock": Case(("build", PROFILE, "--extra", "torch==2.4.0"), code=2,
                                                line=r"^imagectl: .*torch==2\.4\.0.*torch==2\.3\.1"),
    "lock-check-unknown-framework": Case(("lock", "--check", "--framework", "nope"), code=2),
    "advisories-record-not-json": Case(("advisories", "list"), World({
        "imagectl.toml": '[paths]\nadvisories = ["adv"]\n', "adv/torch/X-1.json": "{not json"}), code=2,
        line=r"^imagectl: .*adv/torch/X-1\.json: not a JSON OSV record"),
    "advisories-record-bad-range": Case(("show", PROFILE), World({
        "imagectl.toml": '[paths]\nadvisories = ["adv"]\n', "adv/X-2.json": '{"id": "X-2", "affected": [{"package": '
        '{"ecosystem": "PyPI", "name": "torch"}, "ranges": [{"type": "ECOSYSTEM", "events": [{"fixed": "two"}]}]}]}'}),
        code=2, line=r"^imagectl: .*adv/X-2\.json: affected\[0\]\.ranges\[0\]: 'two' is not a PEP 440 version$"),
    "advisories-sync-from-nowhere": Case(("advisories", "sync", "--from", "{empty}/nope", "-o", "{empty}/out"), code=2,
                                         line=r"^imagectl: --from .*nope: not a folder of OSV records"),
    "advisories-sync-from-ftp": Case(("advisories", "sync", "--from", "ftp://x/all.zip", "-o", "{empty}/out"), code=2),
    "config-fail-on-unknown-severity": Case(("build", PROFILE), with_config('[advisories]\nfail_on = "severe"\n'),
                                            code=2, line=r"^imagectl: .*\[advisories\] fail_on: expected a severity"),
    "lock-system-with-check": Case(("lock", PROFILE, "--system", "--check"), code=2),
    "lock-system-with-all": Case(("lock", "--all", "--system"), code=2),
    "lock-system-with-as-of": Case(("lock", PROFILE, "--system", "--as-of", "latest"), code=2),
    "lock-system-no-names": Case(("lock", "--system"), code=2),
    "lock-system-arm64": Case(("lock", PROFILE, "--system", "--platform", "linux/arm64"), code=2),
    "render-broken-system-lock": Case(("render", PROFILE), BROKEN_SYSTEM_LOCK, code=2,
                                      line=rf"^imagectl: .*{SYSTEM_LOCK_ID}\.apt\.lock:2: "),
    # render
    "render-unknown-name": Case(("render", "nope"), code=2),
    "render-output-under-a-file": Case(("render", PROFILE, "-o", "afile/sub"), A_FILE, code=1),
    "render-output-in-proc": Case(("render", PROFILE, "-o", "/proc/x"), code=1),
    "render-output-is-a-file": Case(("render", PROFILE, "-o", "afile"), A_FILE, code=2),
    "render-output-empty": Case(("render", PROFILE, "-o", ""), code=2),
    "render-extra-injection": Case(("render", PROFILE, "--extra", "numpy; rm -rf /"), code=2),
    "render-extra-url": Case(("render", PROFILE, "--extra", "x @ https://example.com/x.whl"), code=2),
    "render-hostile-template": Case(("render", PROFILE), EVIL_TEMPLATE, code=2),
    # build
    "build-no-name": Case(("build",), code=2),
    "build-unknown-name": Case(("build", "nope"), code=2),
    "build-base-digest-63": Case(("build", PROFILE, "--base", f"nvidia/cuda@{DIGEST_63}", "--extra", "numpy"), code=2),
    "build-base-digest-65": Case(("build", PROFILE, "--base", f"nvidia/cuda@{DIGEST_65}", "--extra", "numpy"), code=2),
    "build-base-bad-reference": Case(("build", PROFILE, "--base", "Not A Ref", "--extra", "numpy"), code=2),
    "build-push-without-registry": Case(("build", "--push", PROFILE), code=2),
    "build-zero-jobs": Case(("build", "-j", "0", "--all"), code=2),
    "build-bad-suffix": Case(("build", PROFILE, "--extra", "numpy", "--suffix", "Bad Suffix"), code=2),
    "build-missing-requirements": Case(("build", PROFILE, "--requirements", "missing.txt"), code=2),
    "build-requirements-directory": Case(("build", PROFILE, "--requirements", "."), code=2),
    "build-bad-extra": Case(("build", PROFILE, "--extra", "x==1 $(id)"), code=2),
    "build-without-engine": Case(("build", PROFILE), code=1, progress=True),
    # test
    "test-without-engine": Case(("test", PROFILE), code=1),
    "test-unknown-name": Case(("test", "nope")),
    "test-junit-in-proc": Case(("test", PROFILE, "--junit", "/proc/x")),
    # history, rollback, promote, prune (registry and engine unreachable)
    "history-unknown-name": Case(("history", "nope"), code=2),
    "history-registry-down": Case(("history", PROFILE), REGISTRY, code=1),
    "history-engine-down": Case(("history", PROFILE), code=1),
    "rollback-unknown-name": Case(("rollback", "nope"), code=2),
    "rollback-bad-target": Case(("rollback", PROFILE, "--to", "not a tag!"), REGISTRY),
    "rollback-registry-down": Case(("rollback", PROFILE), REGISTRY, code=1),
    "promote-to-latest": Case(("promote", PROFILE, "--channel", "latest"), REGISTRY, code=2),
    "promote-bad-channel": Case(("promote", PROFILE, "--channel", "Bad Channel"), REGISTRY, code=2),
    "promote-immutable-shaped-channel": Case(
        ("promote", PROFILE, "--channel", "2.3.1-cu121-py3.10-20240101T000000-0123456789"), REGISTRY, code=2),
    "promote-missing-channel": Case(("promote", PROFILE), REGISTRY, code=2),
    "promote-bad-source": Case(("promote", PROFILE, "--channel", "stable", "--from", "not a tag!"), REGISTRY),
    "promote-registry-down": Case(("promote", PROFILE, "--channel", "stable"), REGISTRY, code=1),
    "prune-negative-keep": Case(("prune", PROFILE, "--keep", "-1"), REGISTRY, code=2),
    "prune-keep-not-a-number": Case(("prune", PROFILE, "--keep", "x"), REGISTRY, code=2),
    "prune-min-age-overflow": Case(("prune", PROFILE, "--keep", "1", "--min-age-days", "99999999999"), REGISTRY,
                                   code=2),
    "prune-registry-down": Case(("prune", PROFILE, "--keep", "1"), REGISTRY, code=1),
    # bases
    "bases-sync-no-registry": Case(("bases", "sync", PROFILE), code=2),
    "bases-unknown-profile": Case(("bases", "status", "nope-9.9-cu999"), code=2),
    "bases-sync-registry-down": Case(("bases", "sync", PROFILE), REGISTRY, code=1),
    "bases-status-registry-down": Case(("bases", "status", PROFILE), REGISTRY, code=1),
    "bases-status-json-registry-down": Case(("bases", "status", PROFILE, "--json"), REGISTRY, code=1),
    "bases-sync-unknown-profile": Case(("bases", "sync", "nope-9.9-cu999"), REGISTRY, code=2),
    "bases-no-subcommand-flag": Case(("bases", "--bogus"), code=2),
    "list-upstream-takes-no-value": Case(("list", "--upstream=yes"), code=2),
    # rebuild
    "rebuild-without-compare": Case(("rebuild", PROFILE), REGISTRY, code=2),
    "rebuild-unknown-name": Case(("rebuild", "nope-9.9-cu999", "--compare"), REGISTRY, code=2),
    "rebuild-bad-reference": Case(("rebuild", "UPPER/Case:x", "--compare"), REGISTRY, code=2),
    "rebuild-no-registry": Case(("rebuild", PROFILE, "--compare"), code=2),
    "rebuild-registry-down": Case(("rebuild", PROFILE, "--compare"), REGISTRY, code=1),
    # platforms (issue 20): build --platform, [build] platforms, test --platform, index
    "build-unknown-platform": Case(("build", PROFILE, "--platform", "linux/s390x"), code=2),
    "build-empty-platform": Case(("build", PROFILE, "--platform", ","), code=2),
    "build-platform-without-wheels": Case(("build", PROFILE, "--platform", "linux/amd64,linux/arm64"), REGISTRY,
                                          code=2),
    "build-configured-unknown-platform": Case(("build", PROFILE), with_config("[build]\nplatforms = ['sparc']\n"),
                                              code=2),
    "build-configured-platform-without-wheels": Case(("build", PROFILE, "--plan"),
                                                     with_config("[build]\nplatforms = ['linux/arm64']\n"), code=2),
    "test-unknown-platform": Case(("test", PROFILE, "--platform", "mips"), REGISTRY, code=2),
    "index-missing-platforms": Case(("index", PROFILE), REGISTRY, code=2),
    "index-unknown-platform": Case(("index", PROFILE, "--platforms", "linux/amd64,nope"), REGISTRY, code=2),
    "index-platform-without-wheels": Case(("index", PROFILE, "--platforms", "linux/arm64"), REGISTRY, code=2),
    "index-no-registry": Case(("index", PROFILE, "--platforms", "linux/amd64"), code=2),
    "index-unknown-name": Case(("index", "nope-9.9-cu999", "--platforms", "linux/amd64"), REGISTRY, code=2),
    "index-registry-down": Case(("index", PROFILE, "--platforms", "linux/amd64"), REGISTRY, code=1),
    # verify
    "verify-unknown-name": Case(("verify", "nope-9.9-cu999"), REGISTRY, code=2),
    "verify-bad-reference": Case(("verify", "UPPER/Case:x"), REGISTRY, code=2),
    "verify-digest-63": Case(("verify", f"{CLOSED}/a/b@{DIGEST_63}"), REGISTRY, code=2),
    "verify-no-registry": Case(("verify", PROFILE), code=2),
    "verify-registry-down": Case(("verify", PROFILE), REGISTRY, code=1),
    "verify-bad-public-key": Case(("verify", PROFILE), World({"imagectl.toml": '[attest]\npublic_key = "nokey.pem"\n'},
                                                           env={"IMAGECTL_REGISTRY_URL": CLOSED}), code=2),
    # sweep
    "sweep-unknown-flag": Case(("sweep", "--all"), code=2),
    # diff
    "diff-unknown-name": Case(("diff", PROFILE, "nope-9.9-cu999"), REGISTRY, code=2),
    "diff-bad-reference": Case(("diff", "UPPER/Case:x", PROFILE), REGISTRY, code=2),
    "diff-bad-tag": Case(("diff", PROFILE, f"{PROFILE}:not a tag!"), REGISTRY, code=2),
    "diff-reserved-tag": Case(("diff", PROFILE, f"{PROFILE}:imagectl-history"), REGISTRY, code=2),
    "diff-digest-63": Case(("diff", PROFILE, f"{CLOSED}/a/b@{DIGEST_63}"), REGISTRY, code=2),
    "diff-short-prefix": Case(("diff", PROFILE, f"{PROFILE}@sha256:abc"), REGISTRY, code=2),
    "diff-missing-b": Case(("diff", PROFILE), REGISTRY, code=2),
    "diff-no-registry": Case(("diff", PROFILE, f"{PROFILE}:stable"), code=2),
    "diff-registry-down": Case(("diff", PROFILE, f"{PROFILE}:stable"), REGISTRY, code=1),
    "diff-json-registry-down": Case(("diff", PROFILE, f"{PROFILE}:stable", "--json"), REGISTRY, code=1),
    # import
    "import-bad-reference": Case(("import", "UPPER/Case", "--name", PROFILE), REGISTRY, code=2),
    "import-digest-63": Case(("import", f"{CLOSED}/a/b@{DIGEST_63}", "--name", PROFILE, "--no-check"), REGISTRY,
                             code=2),
    "import-unknown-name": Case(("import", f"{CLOSED}/a/b:1", "--name", "nope", "--no-check"), REGISTRY, code=2),
    "import-missing-name": Case(("import", f"{CLOSED}/a/b:1"), REGISTRY, code=2),
    "import-registry-down": Case(("import", f"{CLOSED}/a/b:1", "--name", PROFILE, "--no-check"), REGISTRY, code=1),
    # matrix, matrix verify, matrix sync
    "matrix-unknown-format": Case(("matrix", "--format", "xml"), code=2),
    "matrix-unknown-framework": Case(("matrix", "--framework", "nope"), code=2),
    "matrix-empty-framework": Case(("matrix", "--framework", ""), code=2),
    "matrix-unknown-subcommand": Case(("matrix", "nope"), code=2),
    "verify-index-not-http": Case(("matrix", "verify", "--index", "ftp://x/simple"), code=2),
    "verify-index-down": Case(("matrix", "verify", "--index", f"http://{CLOSED}/simple"), code=1),
    "verify-unknown-framework": Case(("matrix", "verify", "--framework", "nope"), code=2),
    "verify-junit-in-proc": Case(("matrix", "verify", "--index", f"http://{CLOSED}/simple", "--junit", "/proc/x")),
    "sync-output-in-matrix-dir": Case(("matrix", "sync", "-o", "my-matrices/new.toml", "--index",
                                       f"http://{CLOSED}/simple"), with_matrix('[gpus]\n"X" = "sm_90"\n'), code=2),
    "sync-output-in-proc": Case(("matrix", "sync", "-o", "/proc/x", "--index", f"http://{CLOSED}/simple")),
    "sync-index-down": Case(("matrix", "sync", "--index", f"http://{CLOSED}/simple"), code=1),
    "import-port-too-big": Case(("import", "127.0.0.1:99999/team/torch:1", "--name", PROFILE, "--no-check"), code=2),
    "build-base-port-too-big": Case(("build", PROFILE, "--extra", "einops", "--base", "127.0.0.1:99999/x:1"), code=2),
    "test-port-too-big": Case(("test", "127.0.0.1:99999/team/torch:1"), code=2),
}


@pytest.fixture
def closed_address() -> str:
    """``127.0.0.1:PORT`` of a port that was just free: connections to it are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def bad_input_run(run_cli, use_matrix, closed_address, tmp_path, monkeypatch):
    """``run(case)``: the case's world written into the working directory, then its command line."""
    import imagectl.retry

    use_matrix(FIXTURES / "matrices")
    monkeypatch.setattr(imagectl.retry.RetryPolicy, "delay", lambda self, attempt, response=None: 0.0, raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    fill = lambda text: text.replace(CLOSED, closed_address).replace("{empty}", str(empty))  # noqa: E731
    home = tmp_path / "home"
    monkeypatch.setenv("DOCKER_HOST", f"tcp://{closed_address}")
    monkeypatch.setenv("DOCKER_CONFIG", str(home / ".docker"))  # no credentials or credential helpers of this host
    monkeypatch.setenv("HOME", str(home))

    def run(case: Case):
        monkeypatch.setenv("IMAGECTL_MIRRORS", f"docker.io={closed_address}/hub")  # base images: never docker.io
        for name, value in case.world.env.items():
            monkeypatch.setenv(name, fill(value))
        for name, content in case.world.files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return run_cli(*case.world.before, *(fill(arg) for arg in case.args))

    return run


def failure(case: Case, code: int, err: str, out: str) -> str | None:
    """What is wrong with how a command answered bad input, or None."""
    lines = err.splitlines()
    if "Traceback (most recent call last)" in err + out:
        return "a traceback"
    if code not in (1, 2) or (case.code is not None and code != case.code):
        return f"exit status {code}, expected {case.code or '1 or 2'}"
    if not lines or not re.search(case.line, lines[-1]):
        return f"the last stderr line does not match {case.line!r}"
    errors = [line for line in lines if line.startswith("imagectl: ")]
    if len(lines) != 1 and not (case.progress and len(errors) == 1 and lines[-1] in errors):
        return f"{len(lines)} lines on stderr"
    return None


def answer_problem(run, name: str, case: Case) -> str | None:
    """Run ``case``; what is wrong with its answer (with the answer itself), or None."""
    try:
        result = run(case)
    except BaseException as exc:  # anything main() let through is the bug this test is for
        return f"{name}: uncaught {type(exc).__name__}: {exc}\n{''.join(traceback.format_exception(exc))}"
    problem = failure(case, result.code, result.err, result.out)
    if problem:
        return f"{name}: {problem}\n--- exit {result.code}, stderr:\n{result.err}--- stdout:\n{result.out}"
    return None


@pytest.mark.parametrize("world", list(BAD_WORLDS))
def test_every_command_refuses_a_bad_world_with_exit_2_and_one_line(bad_input_run, world):
    problems = [answer_problem(bad_input_run, f"{world}/{command}", Case(args, BAD_WORLDS[world], code=2))
                for command, args in COMMANDS.items()]
    found = [p for p in problems if p]
    assert not found, f"{len(found)} of {len(COMMANDS)} commands:\n" + "\n".join(found)


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_exit_1_or_2(bad_input_run, tmp_path, name):
    problem = answer_problem(bad_input_run, name, CASES[name])
    assert problem is None, problem
    assert not (tmp_path / "pwned").exists(), f"{name}: a template ran host code"


def test_the_corpus_covers_every_command():
    from imagectl.cli.app import _Root, cli

    matrix_group = cli.get_command(None, "matrix")  # type: ignore[arg-type]
    commands = set(_Root._modules) | {f"matrix {sub}" for sub in matrix_group.commands}
    assert commands == set(COMMANDS)
    assert {case.args[0] for case in CASES.values()} >= set(_Root._modules)


def test_the_checker_fails_what_it_should():
    case = Case(("list",))
    assert failure(case, 2, "imagectl: one line\n", "") is None
    assert failure(case, 1, "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n", "") == "a traceback"
    assert failure(case, 0, "imagectl: x\n", "").startswith("exit status 0")
    assert failure(case, 2, "imagectl: one\nimagectl: two\n", "") == "2 lines on stderr"
    assert failure(case, 2, "", "") is not None
    assert failure(Case(("build",), progress=True), 1, "base image x\nimagectl: failed\n", "") is None
    assert failure(Case(("build",), code=2), 1, "imagectl: x\n", "") == "exit status 1, expected 2"


def test_an_unreadable_context_directory_is_an_error_not_a_skip(run_cli, use_matrix, tmp_path, monkeypatch):
    use_matrix(FIXTURES / "matrices")
    hidden = tmp_path / "ctx" / "wheels"
    hidden.mkdir(parents=True)
    (hidden / "a.whl").write_text("x")
    (tmp_path / "imagectl.toml").write_text('[paths]\ncontext = ["ctx"]\n')
    hidden.chmod(0)
    real_scandir = os.scandir

    def scandir(path="."):  # root reads a mode-0 directory anyway: refuse it as a non-root user would be refused
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    try:
        result = run_cli("render", PROFILE, "-o", "out")
    finally:
        hidden.chmod(0o755)
    assert result.code == 2, result.err
    assert result.err == f"imagectl: [paths] context: cannot list {hidden}: Permission denied\n"


def test_the_unreadable_file_is_unreadable_for_this_user():
    # the EACCES cases mean what they say only where the file exists and cannot be read, even by root
    assert UNREADABLE, "no file here that this user cannot read (no write-only sysfs attribute)"
    with pytest.raises(PermissionError):
        Path(UNREADABLE).read_bytes()


@pytest.mark.parametrize("command", ["render", "show", "build", "lock"])
def test_an_unreadable_template_or_lock_is_one_line(bad_input_run, tmp_path, command):
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "Dockerfile.j2").symlink_to(UNREADABLE)
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / f"{LOCK_ID}.txt").symlink_to(UNREADABLE)
    world = World({"imagectl.toml": '[paths]\ntemplates = ["tpl"]\nlocks = ["locks"]\n'})
    problem = answer_problem(bad_input_run, f"unreadable/{command}", Case(COMMANDS[command], world,
                                                                           progress=command == "build"))
    assert problem is None, problem
