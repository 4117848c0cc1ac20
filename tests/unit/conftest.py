"""Helpers for the unit tests: local simple indexes generated from the recorded PyPI metadata, a matrix that
replaces the shipped one, an editable copy of the test matrix, and a scratch git repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RECORDED = FIXTURES / "pypi" / "torch-wheels.json"


from tests.fixtures.pypi import server as SERVER  # noqa: E402


def fake_resolve(requirements, target, as_of=None, constraints=(), prefer=()):
    """A resolver for hermetic unit tests: each requirement ``name==version`` (extras dropped) locked as itself,
    with one made-up hash; real resolution (uv against an index) is tested in tests/unit/lock and integration."""
    import hashlib

    from imagectl.lock.lockfile import package

    out = {}
    for line in [*requirements, *constraints]:
        name, _, version = line.partition("==")
        name = name.split("[", 1)[0]
        version = version or "1.0"
        out.setdefault(name, package(name, version, [hashlib.sha256(f"{name}=={version}".encode()).hexdigest()]))
    return sorted(out.values(), key=lambda p: p.name)


@pytest.fixture(autouse=True)
def buildah_not_installed(monkeypatch):
    """Unit tests see no buildah on PATH, so ``[build] engine = "auto"`` (the default) means Docker and renders the
    same Dockerfiles on every machine; a test that wants buildah names it (``Config(build_engine="buildah")``) or
    passes its own ``which``."""
    import imagectl.engine.features

    monkeypatch.setattr(imagectl.engine.features, "_installed", lambda program: None)


@pytest.fixture(autouse=True)
def hermetic_locks(request, monkeypatch):
    """Unit tests lock without the network: build-time locks come from :func:`fake_resolve`, as of a fixed day.
    A test marked ``real_resolver`` keeps uv."""
    if request.node.get_closest_marker("real_resolver"):
        return
    import imagectl.lock.extras
    import imagectl.lock.make
    from imagectl.lock.asof import AsOf

    monkeypatch.setattr(imagectl.lock.make, "resolve", fake_resolve)
    monkeypatch.setattr(imagectl.lock.extras, "resolve", fake_resolve)
    monkeypatch.setattr(imagectl.lock.make, "resolve_as_of", lambda *a, **k: AsOf("2024-06-12", "fixed for tests"))


def metadata_text(name: str, version: str, requires_dist: list[str], requires_python: str | None = None) -> str:
    """A core-metadata file (RFC 822 headers)."""
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {line}" for line in requires_dist]
    return "\n".join(lines) + "\n\n"


def abi_filename(filename: str, abi: str) -> str:
    """The recorded cp311 wheel's filename for another CPython ABI (``cp313t`` keeps interpreter ``cp313``)."""
    return filename.replace("cp311-cp311", f"{abi.rstrip('t')}-{abi}")


@dataclass
class LocalIndex:
    """A PEP 691 index written under ``root/<prefix>/<project>/index.json`` with ``.metadata`` files
    under ``root/files/``; serve it with ``SERVER.FixtureIndex(root)``."""

    root: Path
    prefix: str = "simple"
    projects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, project: str, filename: str, requires_dist: list[str] | None = None, *, version: str | None = None,
            requires_python: str | None = None, yanked: bool | str = False, metadata: str | None = None) -> None:
        """List ``filename``; its metadata says ``requires_dist`` (``metadata`` replaces the whole text;
        ``requires_dist=None`` and no ``metadata`` means no .metadata file at all)."""
        files = self.root / "files"
        files.mkdir(parents=True, exist_ok=True)
        version = version or filename.split("-")[1]
        if metadata is None and requires_dist is not None:
            metadata = metadata_text(project, version, requires_dist, requires_python)
        if metadata is not None:
            (files / f"{filename}.metadata").write_text(metadata, encoding="utf-8")
        entry: dict[str, Any] = {"filename": filename, "url": f"/files/{filename}", "hashes": {}, "yanked": yanked}
        if metadata is not None:
            entry["core-metadata"] = True
        self.projects.setdefault(project, []).append(entry)

    def add_recorded(self, recorded: dict[str, Any], torch: list[str] | None = None,
                     companions: bool = True) -> LocalIndex:
        """Add the recorded torch releases (all, or ``torch``), one wheel per recorded ABI, and the recorded
        torchvision/torchaudio releases with their torch requirements."""
        for version, entry in recorded["torch"].items():
            if (torch is not None and version not in torch) or entry["wheel"] is None:
                continue
            wheel = entry["wheel"]
            for abi in entry["cpython"]:
                self.add("torch", abi_filename(wheel["filename"], abi), wheel["requires_dist"], version=version,
                         requires_python=wheel["requires_python"])
        for project in ("torchvision", "torchaudio") if companions else ():
            for version, entry in recorded[project].items():
                if not entry["wheel"]:
                    continue
                names = {entry["wheel"].replace("cp311-cp311", tag) for tag in entry.get("wheel_tags", ())}
                for filename in sorted(names | {entry["wheel"]}):  # one wheel per recorded interpreter-abi tag
                    self.add(project, filename, entry["torch_requirements"], version=version)
        return self

    def write(self, redirects: dict[str, str] | None = None, paginate: tuple[str, ...] = ()) -> Path:
        """Write the pages and routes.json; each project of ``paginate`` is split over two pages joined by
        a ``Link: rel="next"`` header; ``redirects`` maps a path to another (answered with 301)."""
        headers: dict[str, dict[str, str]] = {}
        for project, files in self.projects.items():
            page = self.root / self.prefix / project
            halves = [files[: len(files) // 2], files[len(files) // 2 :]] if project in paginate else [files]
            for number, part in enumerate(halves):
                where = page if number == 0 else page / "page2"
                where.mkdir(parents=True, exist_ok=True)
                document = {"meta": {"api-version": "1.1"}, "name": project, "files": part}
                (where / "index.json").write_text(json.dumps(document), encoding="utf-8")
            if len(halves) == 2:
                headers[f"/{self.prefix}/{project}/"] = {"Link": '<page2/>; rel="next"'}
        routes = {"redirects": redirects or {}, "headers": headers}
        (self.root / "routes.json").write_text(json.dumps(routes), encoding="utf-8")
        return self.root


@pytest.fixture(scope="session")
def recorded() -> dict[str, Any]:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(root)`` starts a fixture server over ``root`` and returns it (stopped after the test)."""
    servers: list[Any] = []

    def start(root: Path) -> Any:
        server = SERVER.FixtureIndex(root)
        server.__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


@pytest.fixture
def use_matrix(monkeypatch: pytest.MonkeyPatch):
    """``use_matrix(dir)``: the CLI loads ``dir`` in place of the shipped matrices (templates stay shipped)."""
    import imagectl.shipped

    real = imagectl.shipped.shipped_dir

    def install(directory: Path) -> Path:
        def shipped(kind: str) -> Path:
            return directory if kind == "matrices" else real(kind)

        monkeypatch.setattr(imagectl.shipped, "shipped_dir", shipped)
        return directory

    return install


@pytest.fixture
def make_index(tmp_path: Path):
    """``make_index(name)``: an empty LocalIndex under ``tmp_path/name`` (pages at ``/simple/<project>/``)."""

    def make(name: str = "index") -> LocalIndex:
        return LocalIndex(tmp_path / name)

    return make


@pytest.fixture
def copy_matrix():
    """``copy_matrix(dest)``: a writable copy of tests/fixtures/matrices at ``dest``."""

    def copy(dest: Path) -> Path:
        shutil.copytree(FIXTURES / "matrices", dest)
        return dest

    return copy


@dataclass(frozen=True)
class MatrixCopy:
    """A writable copy of tests/fixtures/matrices: edit its files, then load it or see it refused."""

    root: Path

    def edit(self, name: str, old: str, new: str) -> Path:
        """Replace the first ``old`` in matrix file ``name`` with ``new``; return the file's path.  Fails the test
        when ``old`` is not there (an edit that changes nothing would test the unchanged fixture)."""
        path = self.root / name
        text = path.read_text()
        assert old in text, f"{old!r} is not in {name}"
        path.write_text(text.replace(old, new, 1))
        return path

    def write(self, name: str, text: str) -> Path:
        """Write (or replace) the matrix file ``name``; return its path."""
        path = self.root / name
        path.write_text(text)
        return path

    def line_of(self, name: str, needle: str) -> int:
        """The number (from 1) of the first line of matrix file ``name`` that contains ``needle``."""
        lines = (self.root / name).read_text().splitlines()
        return next(number for number, line in enumerate(lines, start=1) if needle in line)

    def load(self) -> Any:
        """The copy loaded as a Matrix."""
        from imagectl.matrix.load import load_matrix

        return load_matrix([self.root])

    def refused(self, match: str) -> Exception:
        """Assert that loading the copy raises MatrixError whose message matches ``match`` (``re.search``);
        return the error."""
        from imagectl.errors import MatrixError

        with pytest.raises(MatrixError, match=match) as caught:
            self.load()
        return caught.value


@pytest.fixture
def matrix_copy(copy_matrix, tmp_path: Path) -> MatrixCopy:
    """A :class:`MatrixCopy` of the test matrix under ``tmp_path/m``."""
    return MatrixCopy(copy_matrix(tmp_path / "m"))


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=imagectl", "-c", "user.email=imagectl@example.invalid",
                           "-c", "commit.gpgsign=false", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def git_in():
    """``git_in(repo, *args)``: run git there (a committer identity given), return stdout; raise on failure."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    return _git
