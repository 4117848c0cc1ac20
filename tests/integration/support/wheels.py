"""Hand-made wheels and a throwaway PEP 503 index for integration tests.

Nothing here needs a build backend or the network: :func:`make_wheel` writes a valid pure-python wheel with
:mod:`zipfile`, :func:`make_standin_framework_wheels` writes stand-ins for a PyTorch install (``torch`` that
answers the version questions the in-image check asks, without a GPU), and :func:`serve_simple_index` serves
a directory of wheels as a PEP 503 "simple" index on ``127.0.0.1`` for ``pip --index-url``.

Wheels are byte-for-byte reproducible (fixed timestamps, sorted entries), so a Docker build that copies or
downloads them keeps its layer cache between test runs.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import threading
import urllib.parse
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_FRAMEWORK_PACKAGES = frozenset({"torch", "torchvision", "torchaudio"})


# --------------------------------------------------------------------------------------------- names


def normalize_name(name: str) -> str:
    """Return the PEP 503 normalized form of a project name (``Nvidia_CUDNN.cu12`` -> ``nvidia-cudnn-cu12``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _escape_name(name: str) -> str:
    """Escape a project name for wheel file names and ``.dist-info`` (``nvidia-nccl-cu12`` -> ``nvidia_nccl_cu12``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _escape_version(version: str) -> str:
    """Escape a version for a wheel file name or ``.dist-info`` folder (a ``-`` would split the name)."""
    return version.replace("-", "_")


def _dist_stem(name: str, version: str) -> str:
    """Return ``<escaped name>-<escaped version>``, the stem shared by wheel file name and ``.dist-info``."""
    return f"{_escape_name(name)}-{_escape_version(version)}"


def wheel_filename(name: str, version: str) -> str:
    """Return the file name of a ``py3-none-any`` wheel for ``name`` at ``version``."""
    return f"{_dist_stem(name, version)}-py3-none-any.whl"


def project_of_wheel(filename: str) -> str:
    """Return the normalized project name encoded in a wheel file name.

    Raises:
        ValueError: ``filename`` is not a wheel file name.
    """
    if not filename.endswith(".whl") or filename.count("-") < 4:
        raise ValueError(f"not a wheel file name: {filename!r}")
    return normalize_name(filename.split("-", 1)[0])


# --------------------------------------------------------------------------------------------- wheels


def _record_hash(data: bytes) -> str:
    """Return the ``sha256=<urlsafe-b64-nopad>`` digest that RECORD uses for ``data``."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _metadata_text(name: str, version: str, requires: Iterable[str]) -> str:
    """Return a Metadata 2.1 METADATA file for a stand-in distribution."""
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             "Summary: imagectl integration-test stand-in"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    return "\n".join(lines) + "\n"


def _wheel_text() -> str:
    """Return the WHEEL file of a pure-python ``py3-none-any`` wheel."""
    return ("Wheel-Version: 1.0\nGenerator: imagectl-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n")


def _write_entry(archive: zipfile.ZipFile, arcname: str, data: bytes) -> None:
    """Write one file into ``archive`` with a fixed timestamp and ``rw-r--r--`` permissions."""
    info = zipfile.ZipInfo(arcname, date_time=_ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o100644 << 16
    archive.writestr(info, data)


def make_wheel(
    dest_dir: Path | str,
    name: str,
    version: str,
    files: Mapping[str, str],
    requires: Sequence[str] = (),
) -> Path:
    """Write a pure-python ``py3-none-any`` wheel and return its path.

    ``files`` maps a path inside site-packages (``"torch/__init__.py"``) to its text. ``requires`` are PEP 508
    strings written as ``Requires-Dist``. The wheel carries METADATA, WHEEL and a RECORD with sha256 digests,
    which is all pip needs to install it.

    Raises:
        ValueError: a path in ``files`` is absolute, climbs out with ``..`` or points into ``.dist-info``.
        OSError: ``dest_dir`` cannot be created or written.
    """
    dist_info = f"{_dist_stem(name, version)}.dist-info"
    entries = {path: text.encode("utf-8") for path, text in sorted(files.items())}
    for path in entries:
        _check_wheel_path(path, dist_info)
    entries[f"{dist_info}/METADATA"] = _metadata_text(name, version, requires).encode("utf-8")
    entries[f"{dist_info}/WHEEL"] = _wheel_text().encode("utf-8")
    record_lines = [f"{path},{_record_hash(data)},{len(data)}" for path, data in entries.items()]
    record_lines.append(f"{dist_info}/RECORD,,")
    entries[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode("utf-8")
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / wheel_filename(name, version)
    with zipfile.ZipFile(target, "w") as archive:
        for arcname, data in entries.items():
            _write_entry(archive, arcname, data)
    return target


def _check_wheel_path(path: str, dist_info: str) -> None:
    """Reject wheel member paths that pip would refuse or that clash with the metadata.

    Raises:
        ValueError: the path is absolute, contains ``..`` or lies inside ``dist_info``.
    """
    parts = path.split("/")
    if path.startswith("/") or ".." in parts or "\\" in path or parts[0] == dist_info:
        raise ValueError(f"bad path for a wheel member: {path!r}")


# --------------------------------------------------------------------------------------------- stand-ins


def cudnn_version_int(cudnn: str) -> int:
    """Encode a cuDNN version the way ``torch.backends.cudnn.version()`` reports it.

    cuDNN 8 and older: ``major*1000 + minor*100 + patch`` (``8.9.2.26`` -> ``8902``);
    cuDNN 9 and newer: ``major*10000 + minor*100 + patch`` (``9.1.0.70`` -> ``90100``).

    Raises:
        ValueError: ``cudnn`` does not start with ``major.minor.patch``.
    """
    major, minor, patch = _leading_ints(cudnn, 3)
    return major * (10000 if major >= 9 else 1000) + minor * 100 + patch


def nccl_version_tuple(nccl: str) -> tuple[int, int, int]:
    """Return ``(major, minor, patch)`` as ``torch.cuda.nccl.version()`` does (``2.20.5-1`` -> ``(2, 20, 5)``).

    Raises:
        ValueError: ``nccl`` does not start with ``major.minor.patch``.
    """
    major, minor, patch = _leading_ints(nccl, 3)
    return (major, minor, patch)


def _leading_ints(version: str, count: int) -> list[int]:
    """Return the first ``count`` dot-separated integers of ``version`` (a ``-1`` or ``+x`` suffix is ignored).

    Raises:
        ValueError: ``version`` has fewer than ``count`` leading integer parts.
    """
    match = re.match(r"^\d+(?:\.\d+)*", version.strip())
    parts = match.group(0).split(".") if match else []
    if len(parts) < count:
        raise ValueError(f"expected at least {count} numeric parts in version {version!r}")
    return [int(part) for part in parts[:count]]


# Tensors of the stand-in torch: lists of floats with what the in-image check's compile step uses.
_STANDIN_TENSOR = '''import math

float32 = "float32"


class Tensor:
    def __init__(self, values, device="cpu"):
        self.values, self.device = [float(v) for v in values], device

    def _zip(self, other, op):
        theirs = other.values if isinstance(other, Tensor) else [other] * len(self.values)
        return Tensor(map(op, self.values, theirs), self.device)

    def __mul__(self, other):
        return self._zip(other, lambda a, b: a * b)

    def __add__(self, other):
        return self._zip(other, lambda a, b: a + b)


def arange(n, dtype=None, device="cpu"):
    return Tensor(range(n), device)


def sin(x):
    return Tensor(map(math.sin, x.values), x.device)


def allclose(a, b):
    return len(a.values) == len(b.values) and all(abs(p - q) <= 1e-6 for p, q in zip(a.values, b.values))
'''

# torch.compile of the stand-in: on the first call it does, for real, what inductor's CPU backend needs from the
# image -- builds a C++ Python extension with $CXX (else g++, torch._inductor.config.cpp.cxx) against the headers
# at sysconfig.get_paths()["include"] and loads it -- and fails the way inductor fails when it cannot.
_STANDIN_INDUCTOR = '''import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import tempfile

KERNEL = r"""
#include <Python.h>
static PyObject *twice(PyObject *self, PyObject *arg) { return PyFloat_FromDouble(2 * PyFloat_AsDouble(arg)); }
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "standin_kernel", NULL, -1, methods};
PyMODINIT_FUNC PyInit_standin_kernel(void) { return PyModule_Create(&module); }
"""


class InvalidCxxCompiler(RuntimeError):
    pass


class CppCompileError(RuntimeError):
    pass


class BackendCompilerFailed(RuntimeError):
    pass


def _cxx():
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise InvalidCxxCompiler("No working C++ compiler found in torch._inductor.config.cpp.cxx: (None, %r)" % cxx)
    return cxx


def build_kernel():
    """Build and load the kernel extension; raises InvalidCxxCompiler or CppCompileError."""
    cxx = _cxx()
    workdir = tempfile.mkdtemp(prefix="torchinductor-standin-")
    source = os.path.join(workdir, "kernel.cpp")
    target = os.path.join(workdir, "standin_kernel" + sysconfig.get_config_var("EXT_SUFFIX"))
    with open(source, "w") as handle:
        handle.write(KERNEL)
    argv = [cxx, source, "-shared", "-fPIC", "-O2", "-I" + sysconfig.get_paths()["include"], "-o", target]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise CppCompileError("C++ compile error: " + " ".join(done.stderr.split())[-300:])
    loader = importlib.machinery.ExtensionFileLoader("standin_kernel", target)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("standin_kernel", target,
                                                                                   loader=loader))
    loader.exec_module(module)
    return module


def compile(fn, **kwargs):
    def compiled(*args, **kw):
        try:
            if build_kernel().twice(1.5) != 3.0:
                raise CppCompileError("the built kernel computes wrongly")
        except (InvalidCxxCompiler, CppCompileError) as exc:
            raise BackendCompilerFailed("backend='inductor' raised:\\n%s: %s" % (type(exc).__name__, exc)) from None
        return fn(*args, **kw)

    return compiled
'''


def torch_standin_files(torch_version: str, facts: Mapping[str, Any]) -> dict[str, str]:
    """Return the module files of a ``torch`` stand-in that reports ``facts`` and has no GPU.

    ``facts`` keys: ``cuda`` (``"12.1"`` or None for a CPU build), ``cudnn`` (``"8.9.2.26"`` or None),
    ``nccl`` (``"2.20.5"`` or None). The stand-in answers ``torch.__version__``, ``torch.version.cuda``,
    ``torch.backends.cudnn.version()``, ``torch.cuda.nccl.version()``, ``torch.cuda.is_available()``
    (False) and ``torch.cuda.device_count()`` (0).

    Raises:
        ValueError: ``cudnn`` or ``nccl`` is not a ``major.minor.patch`` version.
    """
    cuda = facts.get("cuda")
    cudnn = facts.get("cudnn")
    nccl = facts.get("nccl")
    cudnn_int = cudnn_version_int(str(cudnn)) if cudnn else None
    nccl_tuple = nccl_version_tuple(str(nccl)) if nccl else None
    return {
        "torch/__init__.py": (
            '"""imagectl test stand-in for torch: reports versions, has no GPU."""\n'
            f"__version__ = {torch_version!r}\n"
            "from torch import version, backends, cuda  # noqa: E402,F401\n"
            "from torch._standin_tensor import Tensor, allclose, arange, float32, sin  # noqa: E402,F401\n"
            "from torch._standin_inductor import compile  # noqa: E402,F401\n"
        ),
        "torch/_standin_tensor.py": _STANDIN_TENSOR,
        "torch/_standin_inductor.py": _STANDIN_INDUCTOR,
        "torch/version.py": (
            f"__version__ = {torch_version!r}\ncuda = {cuda!r}\nhip = None\ndebug = False\n"
            "git_version = 'imagectl-standin'\n"
        ),
        "torch/backends/__init__.py": "from torch.backends import cudnn  # noqa: F401\n",
        "torch/backends/cudnn/__init__.py": (
            f"def version():\n    return {cudnn_int!r}\n\n\n"
            f"def is_available():\n    return {cudnn_int is not None!r}\n\n\nenabled = True\n"
        ),
        "torch/cuda/__init__.py": (
            "from torch.cuda import nccl  # noqa: F401\n\n\n"
            "def is_available():\n    return False\n\n\n"
            "def device_count():\n    return 0\n"
        ),
        "torch/cuda/nccl.py": _nccl_module_text(nccl_tuple),
    }


def _nccl_module_text(nccl: tuple[int, int, int] | None) -> str:
    """Return ``torch/cuda/nccl.py``; without NCCL, ``version()`` raises like a CPU build of torch does."""
    if nccl is None:
        return "def version():\n    raise RuntimeError('NCCL is not available in this build')\n"
    return f"def version():\n    return {nccl!r}\n\n\ndef is_available(tensors=None):\n    return True\n"


def _generic_standin_files(name: str, version: str) -> dict[str, str]:
    """Return an importable module for a non-torch stand-in that exposes ``__version__``.

    ``nvidia-cudnn-cu12`` becomes the namespace package ``nvidia.cudnn`` (as the real wheels lay it out); any
    other name becomes ``<name_with_underscores>/__init__.py``.
    """
    normalized = normalize_name(name)
    if normalized.startswith("nvidia-"):
        sub = re.sub(r"-cu\d+$", "", normalized[len("nvidia-"):]).replace("-", "_")
        module_dir = f"nvidia/{sub}"
    else:
        module_dir = normalized.replace("-", "_")
    return {f"{module_dir}/__init__.py": f"__version__ = {version!r}\n"}


def _standin_requires(name: str, pins: Mapping[str, str]) -> list[str]:
    """Return the ``Requires-Dist`` of a stand-in, mirroring the real wheels' dependencies.

    ``torch`` requires ``triton`` and every ``nvidia-*`` pin at its exact version; ``torchvision`` and
    ``torchaudio`` require ``torch`` at its pinned public version. Other stand-ins require nothing.
    """
    normalized = normalize_name(name)
    if normalized == "torch":
        return [f"{dep}=={ver}" for dep, ver in sorted(pins.items())
                if normalize_name(dep).startswith("nvidia-") or normalize_name(dep) == "triton"]
    torch_pin = next((ver for dep, ver in pins.items() if normalize_name(dep) == "torch"), None)
    if normalized in _FRAMEWORK_PACKAGES and torch_pin is not None:
        return [f"torch=={torch_pin.split('+', 1)[0]}"]
    return []


def make_standin_framework_wheels(
    dest_dir: Path | str, pins: Mapping[str, str], facts: Mapping[str, Any]
) -> list[Path]:
    """Write one stand-in wheel per pip name in ``pins`` at exactly the pinned version; return their paths.

    ``pins`` maps pip names to versions (``{"torch": "2.3.1+cu121", "nvidia-nccl-cu12": "2.20.5", ...}``).
    ``facts`` says what the ``torch`` stand-in reports: ``torch_version`` (``torch.__version__``, verbatim;
    defaults to the ``torch`` pin), ``cuda``, ``cudnn`` and ``nccl`` (see :func:`torch_standin_files`); make
    them disagree with the pins or the image's ENV to test that the in-image check notices.
    Dependencies mirror the real wheels (see :func:`_standin_requires`), so ``pip install torch==X`` also
    pulls the pinned ``nvidia-*`` and ``triton`` stand-ins from the same index.

    Raises:
        ValueError: a fact is not a usable version.
        OSError: ``dest_dir`` cannot be written.
    """
    paths = []
    for name, version in sorted(pins.items()):
        if normalize_name(name) == "torch":
            files = torch_standin_files(str(facts.get("torch_version", version)), facts)
        else:
            files = _generic_standin_files(name, version)
        paths.append(make_wheel(dest_dir, name, version, files, _standin_requires(name, pins)))
    return paths


# --------------------------------------------------------------------------------------------- index


def _sha256_file(path: Path) -> str:
    """Return the hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(partial(handle.read, 1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def collect_wheels(dirs: Sequence[Path]) -> dict[str, Path]:
    """Map each wheel file name found directly in ``dirs`` to its path; earlier directories win."""
    found: dict[str, Path] = {}
    for directory in dirs:
        for path in sorted(Path(directory).glob("*.whl")):
            found.setdefault(path.name, path)
    return found


def _html_page(title: str, links: Iterable[tuple[str, str]]) -> bytes:
    """Return a PEP 503 HTML page listing ``(href, text)`` links."""
    anchors = "\n".join(f'    <a href="{html.escape(href)}">{html.escape(text)}</a><br/>'
                        for href, text in links)
    page = (f"<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"1.0\">"
            f"<title>{html.escape(title)}</title></head>\n  <body>\n{anchors}\n  </body>\n</html>\n")
    return page.encode("utf-8")


class _SimpleIndexHandler(BaseHTTPRequestHandler):
    """Serve ``/simple/``, ``/simple/<project>/`` and ``/files/<wheel>`` from directories scanned per request."""

    dirs: tuple[Path, ...]  # set per server by serve_simple_index
    hashes: dict[tuple[Path, int, int], str]  # sha256 cache, one per server

    def do_GET(self) -> None:
        """Answer one GET with an index page, a wheel or 404."""
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        wheels = collect_wheels(self.dirs)
        if path.rstrip("/") == "/simple":
            self._send_page(self._root_page(wheels))
        elif path.startswith("/simple/"):
            self._send_project(path[len("/simple/"):].strip("/"), wheels)
        elif path.startswith("/files/") and path[len("/files/"):] in wheels:
            self._send_file(wheels[path[len("/files/"):]])
        else:
            self.send_error(HTTPStatus.NOT_FOUND)

    def _root_page(self, wheels: Mapping[str, Path]) -> bytes:
        """Return the ``/simple/`` page listing every project."""
        projects = sorted({project_of_wheel(name) for name in wheels})
        return _html_page("Simple index", [(f"/simple/{p}/", p) for p in projects])

    def _send_project(self, project: str, wheels: Mapping[str, Path]) -> None:
        """Send the page of one project, or 404 if no wheel belongs to it."""
        wanted = normalize_name(project)
        files = [(name, path) for name, path in wheels.items() if project_of_wheel(name) == wanted]
        if not files:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        links = [(f"/files/{urllib.parse.quote(name)}#sha256={self._hash(path)}", name) for name, path in files]
        self._send_page(_html_page(f"Links for {wanted}", links))

    def _hash(self, path: Path) -> str:
        """Return the sha256 of ``path``, cached by path, size and mtime."""
        stat = path.stat()
        key = (path, stat.st_size, stat.st_mtime_ns)
        if key not in self.hashes:
            self.hashes[key] = _sha256_file(path)
        return self.hashes[key]

    def _send_page(self, body: bytes) -> None:
        """Send an HTML page."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_file(self, path: Path) -> None:
        """Send a wheel file."""
        data = path.read_bytes()
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet; pytest output is noisy enough."""


def serve_simple_index(
    wheel_dir: Path | str, extra_dirs: Sequence[Path | str] = ()
) -> tuple[str, Callable[[], None]]:
    """Serve the wheels in ``wheel_dir`` (and ``extra_dirs``) as a PEP 503 simple index on ``127.0.0.1``.

    Returns ``(url, stop)``: ``url`` is ``http://127.0.0.1:<port>/simple`` for ``pip --index-url``; ``stop()``
    shuts the server down (idempotent). Directories are rescanned on every request, so wheels written after
    the start are served too; when two directories hold the same file name, ``wheel_dir`` wins. The server
    runs in a daemon thread; containers reach it with host networking.

    Raises:
        OSError: no port could be bound.
    """
    dirs = tuple(Path(d) for d in (wheel_dir, *extra_dirs))
    handler = type("IndexHandler", (_SimpleIndexHandler,), {"dirs": dirs, "hashes": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="simple-index", daemon=True)
    thread.start()
    stopped = threading.Event()

    def stop() -> None:
        """Shut the index down and release its port."""
        if not stopped.is_set():
            stopped.set()
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)

    return f"http://127.0.0.1:{server.server_address[1]}/simple", stop
