"""Every path imagectl reads, in a folder the user may not enter: one line naming the path and the OS reason, exit 2,
never a traceback (issue 36, item 7).

A file under a folder without search permission cannot even be looked at: ``Path.exists``, ``is_file`` and
``stat`` raise PermissionError where a mode-000 file in an open folder only fails to open.  Root enters any folder,
so imagectl runs here in a subprocess without the two capabilities that let it (``CAP_DAC_OVERRIDE``,
``CAP_DAC_READ_SEARCH``, dropped with ``setpriv``): it is then held to the mode bits as any user is.  An ordinary
user runs it as itself.  Each case puts one path behind ``locked/`` (mode 000), directly or through a symbolic link
in an open folder, and runs one command that reads it.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

import pytest

PROFILE = "torch-2.3-cu121"
LOCK_ID = "torch-2.3.1-cu121-py3.10"  # the lock of PROFILE in the shipped matrix
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    """One command in the world of ``world``: ``config`` (when given) is ``./imagectl.toml``; ``path`` is what its
    error line must name."""

    args: tuple[str, ...]
    path: str
    config: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


CASES: dict[str, Case] = {
    "config --config": Case(("--config", "locked/imagectl.toml", "show", PROFILE), "locked/imagectl.toml"),
    "config IMAGECTL_CONFIG": Case(("show", PROFILE), "locked/imagectl.toml",
                                   env={"IMAGECTL_CONFIG": "locked/imagectl.toml"}),
    "config linked ./imagectl.toml": Case(("show", PROFILE), "imagectl.toml", config="@locked/imagectl.toml"),
    "[build] ca_bundle": Case(("render", PROFILE), "locked/ca.pem", '[build]\nca_bundle = "locked/ca.pem"\n'),
    "IMAGECTL_BUILD_CA_BUNDLE": Case(("render", PROFILE), "locked/ca.pem",
                                     env={"IMAGECTL_BUILD_CA_BUNDLE": "locked/ca.pem"}),
    "[paths] context": Case(("render", PROFILE), "locked/ctx", '[paths]\ncontext = ["locked/ctx"]\n'),
    "IMAGECTL_PATHS_CONTEXT": Case(("render", PROFILE), "locked/ctx", env={"IMAGECTL_PATHS_CONTEXT": "locked/ctx"}),
    "[attest] key": Case(("build", PROFILE), "locked/key.pem", '[attest]\nkey = "locked/key.pem"\n'),
    "[attest] public_key": Case(("verify", PROFILE), "locked/pub.pem", '[attest]\npublic_key = "locked/pub.pem"\n'),
    "IMAGECTL_ATTEST_KEY": Case(("build", PROFILE), "locked/key.pem", env={"IMAGECTL_ATTEST_KEY": "locked/key.pem"}),
    "show, [attest] key": Case(("show", PROFILE), "locked/key.pem", '[attest]\nkey = "locked/key.pem"\n'),
    "lock -o": Case(("lock", PROFILE, "-o", "locked/lock.txt"), "locked/lock.txt"),
    "[paths] locks": Case(("lock", PROFILE), "locked/locks", '[paths]\nlocks = ["locked/locks"]\n'),
    "[paths] locks, lock file linked": Case(("render", PROFILE), f"links/locks/{LOCK_ID}.txt",
                                            '[paths]\nlocks = ["links/locks"]\n'),
    "[paths] matrices": Case(("list",), "locked/matrices", '[paths]\nmatrices = ["locked/matrices"]\n'),
    "[paths] matrices, file linked": Case(("list",), "links/matrices/team.toml",
                                          '[paths]\nmatrices = ["links/matrices"]\n'),
    "[paths] templates": Case(("render", PROFILE), "locked/templates", '[paths]\ntemplates = ["locked/templates"]\n'),
    "[paths] templates, file linked": Case(("render", PROFILE), "links/templates/Dockerfile.j2",
                                           '[paths]\ntemplates = ["links/templates"]\n'),
    "[paths] advisories": Case(("advisories", "list"), "locked/osv", '[paths]\nadvisories = ["locked/osv"]\n'),
    "[paths] advisories, record linked": Case(("show", PROFILE), "links/osv/PYSEC-0000-1.json",
                                              '[paths]\nadvisories = ["links/osv"]\n'),
    "advisories sync --from": Case(("advisories", "sync", "--from", "locked/osv", "-o", "synced"), "locked/osv"),
    "build --requirements": Case(("build", PROFILE, "--requirements", "locked/requirements.txt"),
                                 "locked/requirements.txt"),
    "advisories list, a matrix folder's locks linked": Case(("advisories", "list"), "links/team/locks",
                                                          '[paths]\nmatrices = ["links/team"]\n'),
    "[paths] matrices, folder unlistable": Case(("list",), "shut/matrices", '[paths]\nmatrices = ["shut/matrices"]\n'),
    "DOCKER_CONFIG": Case(("history", PROFILE), "locked/docker/config.json",
                          '[registry]\nurl = "{registry}"\n', env={"DOCKER_CONFIG": "locked/docker"}),
}


def _world(root: Path) -> None:
    """The files every case reads: the real ones under ``locked/``, links to them under ``links/``."""
    locked = root / "locked"
    for folder in ("ctx", "matrices", "templates", "locks", "osv", "docker"):
        (locked / folder).mkdir(parents=True)
    files = {"imagectl.toml": "", "ca.pem": "-----BEGIN CERTIFICATE-----\n", "key.pem": "key\n", "pub.pem": "pub\n",
             "lock.txt": "", "site.cfg": "x\n", "team.toml": "", "Dockerfile.j2": "FROM x\n",
             "PYSEC-0000-1.json": "{}", "requirements.txt": "numpy\n", "docker/config.json": "{}"}
    for name, text in files.items():
        (locked / name).write_text(text)
    links = {"ctx/site.cfg": "site.cfg", f"locks/{LOCK_ID}.txt": "lock.txt", "matrices/team.toml": "team.toml",
             "templates/Dockerfile.j2": "Dockerfile.j2", "osv/PYSEC-0000-1.json": "PYSEC-0000-1.json"}
    for name, target in links.items():
        link = root / "links" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(locked / target)
    (root / "links" / "team").mkdir()
    (root / "links" / "team" / "locks").symlink_to(locked / "locks")  # a matrix folder's lock folder
    (root / "shut" / "matrices").mkdir(parents=True)  # a folder that can be looked at but not listed (mode 000)
    (root / "home").mkdir()


@pytest.fixture(scope="module")
def world() -> Iterator[Path]:
    """A folder with ``locked/`` (mode 000: no one without CAP_DAC_* may look inside) and ``links/`` into it."""
    root = Path(tempfile.mkdtemp(prefix="imagectl-unreadable-"))
    _world(root)
    (root / "locked").chmod(0)
    (root / "shut" / "matrices").chmod(0)
    try:
        yield root
    finally:
        (root / "locked").chmod(0o700)
        (root / "shut" / "matrices").chmod(0o700)
        shutil.rmtree(root)


class _AsksForCredentials(http.server.BaseHTTPRequestHandler):
    """A registry that wants basic credentials for everything: the client reads the Docker config to answer."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="registry"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    """``127.0.0.1:PORT`` of a loopback registry that answers 401 to every request."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AsksForCredentials)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _unprivileged() -> list[str]:
    """The command prefix that runs a program without root's right to enter any folder (none for a user)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to run imagectl without CAP_DAC_OVERRIDE as root"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def run_unprivileged(world: Path, case: Case, workdir: Path, registry: str) -> subprocess.CompletedProcess[str]:
    """``imagectl ARGS`` of ``case`` in ``workdir`` (a fresh folder of ``world``), as an unprivileged process;
    ``{registry}`` in its configuration is ``registry``."""
    if case.config is not None and case.config.startswith("@"):
        (workdir / "imagectl.toml").symlink_to(world / case.config[1:])
    elif case.config is not None:
        (workdir / "imagectl.toml").write_text(case.config.replace("{registry}", registry))
    for name in ("locked", "links", "shut"):
        (workdir / name).symlink_to(world / name)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(world / "home"), "LANG": "C.UTF-8",
           "DOCKER_HOST": "tcp://127.0.0.1:9", "DOCKER_CONFIG": str(world / "home" / ".docker"),
           "IMAGECTL_MIRRORS": "docker.io=127.0.0.1:9/hub", **case.env}
    return subprocess.run([*_unprivileged(), sys.executable, "-m", "imagectl", *case.args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_locked_folder_cannot_be_looked_into(world):
    probe = subprocess.run([*_unprivileged(), sys.executable, "-c", "import os, sys; os.stat(sys.argv[1])",
                            str(world / "locked" / "ca.pem")], capture_output=True, text=True, check=False)
    assert probe.returncode == 1 and "PermissionError" in probe.stderr, probe.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_a_path_in_a_folder_that_cannot_be_entered_is_one_line_naming_it(world, registry, name):
    case = CASES[name]
    workdir = world / name.translate(str.maketrans(" []/,-", "______"))
    workdir.mkdir()
    result = run_unprivileged(world, case, workdir, registry)
    lines = result.stderr.splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert case.path in lines[0] and "Permission denied" in lines[0], lines[0]
