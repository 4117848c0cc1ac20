"""Hand-made wheels and a throwaway package index for integration tests.

Nothing here needs a build backend or the network: :func:`make_wheel` writes a valid pure-python wheel with
:mod:`zipfile`, :func:`make_standin_framework_wheels` writes stand-ins for a PyTorch install (``torch`` that
answers the version questions the in-image check asks, without a GPU) and
:func:`make_standin_dependency_wheels` the third-party projects they require (``filelock``, ``sympy``, ``numpy``
...), so the stand-ins have the dependency tree of the real wheels on PyPI.

:func:`start_simple_index` (and its older tuple form :func:`serve_simple_index`) serves directories of wheels on
``127.0.0.1`` the way a real index does, for ``pip --index-url`` and ``uv pip compile --index-url``: PEP 503 HTML
and PEP 691 JSON pages (chosen by ``Accept``), PEP 658/714 ``.metadata`` files, PEP 700 ``upload-time`` (the
wheel file's mtime, see ``make_wheel(upload_time=...)``), PEP 592 yanking (a ``<wheel>.yanked`` file next to the
wheel), ``HEAD`` and ``Range`` requests; it counts whole-wheel downloads so a test can prove a resolver only read
metadata.

Wheels are byte-for-byte reproducible (fixed timestamps, sorted entries), so a Docker build that copies or
downloads them keeps its layer cache between test runs.
"""

from __future__ import annotations

import base64
import email.utils
import filecmp
import hashlib
import html
import json
import os
import re
import socket
import tempfile
import threading
import urllib.parse
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

from tests.standin_tensor import TENSOR_SOURCE

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_FRAMEWORK_PACKAGES = frozenset({"torch", "torchvision", "torchaudio"})
_PAYLOAD_NAME = "_payload.bin"
_KEPT_NAME = "_kept.bin"
_PAYLOAD_CHUNK = 1 << 20


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


def wheel_filename(name: str, version: str, tag: str = "py3-none-any") -> str:
    """Return the file name of a wheel for ``name`` at ``version`` with the compatibility ``tag``
    (``py3-none-any``, or ``py3-none-manylinux_2_28_aarch64`` for a stand-in of a platform wheel)."""
    return f"{_dist_stem(name, version)}-{tag}.whl"


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


def _wheel_text(tag: str = "py3-none-any") -> str:
    """Return the WHEEL file of a wheel tagged ``tag`` (its files are pure python whatever the tag says)."""
    return ("Wheel-Version: 1.0\nGenerator: imagectl-tests\nRoot-Is-Purelib: true\n"
            f"Tag: {tag}\n")


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
    *,
    upload_time: datetime | None = None,
    payload_bytes: int = 0,
    kept_payload_bytes: int = 0,
    tag: str = "py3-none-any",
) -> Path:
    """Write a pure-python wheel tagged ``tag`` (default ``py3-none-any``; ``py3-none-manylinux_2_28_aarch64``
    stands in for an aarch64 wheel) and return its path.

    ``files`` maps a path inside site-packages (``"torch/__init__.py"``) to its text. ``requires`` are PEP 508
    strings written as ``Requires-Dist``. The wheel carries METADATA, WHEEL and a RECORD with sha256 digests,
    which is all pip needs to install it.

    ``payload_bytes`` adds the member ``<package>/_payload.bin`` (``<package>``: the folder of the first path of
    ``files`` that has one, ``torch`` or ``nvidia/cudnn``; else the escaped project name) of that many
    incompressible bytes, stored uncompressed and derived from name and version only, so a stand-in can weigh
    what the real wheel weighs; ``kept_payload_bytes`` adds ``<package>/_kept.bin`` likewise, derived from the
    name only: a big file every release keeps byte for byte (torch's ``libtorch_cuda_linalg.so``).
    ``upload_time`` (naive means UTC) becomes the file's mtime, which the index serves as the PEP 700
    ``upload-time``; without it the mtime is the time of writing. The bytes of the wheel
    depend on the arguments only (not on the clock). The file appears at once, complete, with its mtime set: it
    is written under a temporary name and renamed, so a running index never serves half a wheel.

    Raises:
        ValueError: a path in ``files`` is absolute, climbs out with ``..``, points into ``.dist-info`` or is
            the payload's path; ``payload_bytes`` is negative.
        OSError: ``dest_dir`` cannot be created or written.
    """
    if payload_bytes < 0 or kept_payload_bytes < 0:
        raise ValueError(f"payload sizes must not be negative: {payload_bytes}, {kept_payload_bytes}")
    dist_info = f"{_dist_stem(name, version)}.dist-info"
    entries = {path: text.encode("utf-8") for path, text in sorted(files.items())}
    for path in entries:
        _check_wheel_path(path, dist_info)
    payload = f"{_package_dir(name, entries)}/{_PAYLOAD_NAME}" if payload_bytes else None
    kept = f"{_package_dir(name, entries)}/{_KEPT_NAME}" if kept_payload_bytes else None
    for extra in (payload, kept):
        if extra in entries:
            raise ValueError(f"{extra!r} is in files and is a payload's path too")
    tail = {f"{dist_info}/METADATA": _metadata_text(name, version, requires).encode("utf-8"),
            f"{dist_info}/WHEEL": _wheel_text(tag).encode("utf-8")}
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / wheel_filename(name, version, tag)
    scratch = dest / f".{target.name}.{os.getpid()}.{threading.get_ident()}.part"
    try:
        record_lines = []
        with zipfile.ZipFile(scratch, "w") as archive:
            for arcname, data in entries.items():
                _write_entry(archive, arcname, data)
                record_lines.append(f"{arcname},{_record_hash(data)},{len(data)}")
            if kept is not None:
                chunks = _payload_chunks(name, "kept", kept_payload_bytes)
                record_lines.append(_write_payload(archive, kept, chunks, kept_payload_bytes))
            if payload is not None:
                chunks = _payload_chunks(name, version, payload_bytes)
                record_lines.append(_write_payload(archive, payload, chunks, payload_bytes))
            for arcname, data in tail.items():
                _write_entry(archive, arcname, data)
                record_lines.append(f"{arcname},{_record_hash(data)},{len(data)}")
            record_lines.append(f"{dist_info}/RECORD,,")
            _write_entry(archive, f"{dist_info}/RECORD", ("\n".join(record_lines) + "\n").encode("utf-8"))
        if upload_time is not None:
            _set_upload_time(scratch, upload_time)
        os.replace(scratch, target)
    finally:
        scratch.unlink(missing_ok=True)
    return target


def _package_dir(name: str, entries: Iterable[str]) -> str:
    """The folder that gets a wheel's payload: that of its first member in a folder, else the escaped name."""
    return next((path.rsplit("/", 1)[0] for path in entries if "/" in path), _escape_name(name))


def _payload_chunks(name: str, version: str, size: int) -> Iterator[bytes]:
    """Yield ``size`` incompressible bytes in chunks: a SHAKE-256 stream keyed by name, version and chunk number."""
    seed = f"{normalize_name(name)}=={version}".encode("utf-8")
    for number, start in enumerate(range(0, size, _PAYLOAD_CHUNK)):
        yield hashlib.shake_256(seed + b"#" + str(number).encode("ascii")).digest(min(_PAYLOAD_CHUNK, size - start))


def _write_payload(archive: zipfile.ZipFile, arcname: str, chunks: Iterable[bytes], size: int) -> str:
    """Stream ``chunks`` (``size`` bytes in all) into ``archive`` as one stored member; return its RECORD line."""
    info = zipfile.ZipInfo(arcname, date_time=_ZIP_EPOCH)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o100644 << 16
    info.file_size = size  # lets zipfile choose zip64 up front for a payload over 2 GiB
    digest = hashlib.sha256()
    with archive.open(info, "w") as member:
        for chunk in chunks:
            member.write(chunk)
            digest.update(chunk)
    encoded = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
    return f"{arcname},sha256={encoded},{size}"


def _timestamp_ns(when: datetime) -> int:
    """Nanoseconds since the Unix epoch of ``when`` (a naive datetime is UTC), exact to the microsecond."""
    aware = when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)
    return (aware - _UNIX_EPOCH) // timedelta(microseconds=1) * 1000


def _set_upload_time(path: Path, when: datetime) -> None:
    """Set the mtime (and atime) of ``path`` to ``when``, which the index serves as its upload time."""
    stamp = _timestamp_ns(when)
    os.utime(path, ns=(stamp, stamp))


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
        "torch/_standin_tensor.py": TENSOR_SOURCE,
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


# The import name of a stand-in whose module is not named after its project (as the real wheel lays it out).
_IMPORT_NAMES = MappingProxyType({"pillow": "PIL"})


def _generic_standin_files(name: str, version: str) -> dict[str, str]:
    """Return an importable module for a non-torch stand-in that exposes ``__version__``.

    ``nvidia-cudnn-cu12`` becomes the namespace package ``nvidia.cudnn`` (as the real wheels lay it out),
    ``pillow`` becomes ``PIL``; any other name becomes ``<name_with_underscores>/__init__.py``.
    """
    normalized = normalize_name(name)
    if normalized.startswith("nvidia-"):
        sub = re.sub(r"-cu\d+$", "", normalized[len("nvidia-"):]).replace("-", "_")
        module_dir = f"nvidia/{sub}"
    else:
        module_dir = _IMPORT_NAMES.get(normalized, normalized.replace("-", "_"))
    return {f"{module_dir}/__init__.py": f"__version__ = {version!r}\n"}


# What the real wheels on PyPI require besides the pinned ones (torch 2.3.1, torchvision 0.18.1, triton 2.3.1).
_TORCH_REQUIRES = ("filelock", "typing-extensions>=4.8.0", "sympy", "networkx", "jinja2", "fsspec")
_TRITON_REQUIRES = ("filelock",)

# name -> (version, Requires-Dist) of the third-party projects the framework stand-ins require, at the versions
# PyPI had when torch 2.3.1 came out, with the requirements of their real wheels (extras left out).
STANDIN_DEPENDENCIES: Mapping[str, tuple[str, tuple[str, ...]]] = MappingProxyType({
    "filelock": ("3.15.1", ()),
    "typing-extensions": ("4.12.2", ()),
    "sympy": ("1.12.1", ("mpmath<1.4.0,>=1.1.0",)),
    "mpmath": ("1.3.0", ()),
    "networkx": ("3.3", ()),
    "jinja2": ("3.1.4", ("MarkupSafe>=2.0",)),
    "markupsafe": ("2.1.5", ()),
    "fsspec": ("2024.6.0", ()),
    "numpy": ("1.26.4", ()),
    "pillow": ("10.3.0", ()),
})


def _standin_requires(name: str, pins: Mapping[str, str]) -> list[str]:
    """Return the ``Requires-Dist`` of a stand-in, mirroring the real wheels' dependencies.

    ``torch`` requires ``filelock``, ``typing-extensions>=4.8.0``, ``sympy``, ``networkx``, ``jinja2`` and
    ``fsspec``, then ``triton`` and every ``nvidia-*`` pin at its exact version; ``torchvision`` requires
    ``numpy``, ``torch`` at its pinned public version and ``pillow!=8.3.*,>=5.3.0``; ``torchaudio`` requires
    ``torch`` at its pinned public version; ``triton`` requires ``filelock``; a project of
    :data:`STANDIN_DEPENDENCIES` requires what it says there. Other stand-ins require nothing.
    """
    normalized = normalize_name(name)
    if normalized == "torch":
        return [*_TORCH_REQUIRES, *(f"{dep}=={ver}" for dep, ver in sorted(pins.items())
                                    if normalize_name(dep).startswith("nvidia-") or normalize_name(dep) == "triton")]
    torch_pin = next((ver for dep, ver in pins.items() if normalize_name(dep) == "torch"), None)
    torch_req = [f"torch=={torch_pin.split('+', 1)[0]}"] if torch_pin is not None else []
    if normalized == "torchvision":
        return ["numpy", *torch_req, "pillow!=8.3.*,>=5.3.0"]
    if normalized in _FRAMEWORK_PACKAGES:
        return torch_req
    if normalized == "triton":
        return list(_TRITON_REQUIRES)
    if normalized in STANDIN_DEPENDENCIES:
        return list(STANDIN_DEPENDENCIES[normalized][1])
    return []


def _requirement_name(requirement: str) -> str:
    """The normalized project name a PEP 508 requirement string starts with (``MarkupSafe>=2.0`` -> ``markupsafe``).

    Raises:
        ValueError: ``requirement`` does not start with a project name.
    """
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalize_name(match.group(1))


def _dependency_closure(pins: Mapping[str, str]) -> list[str]:
    """The projects of :data:`STANDIN_DEPENDENCIES` that the stand-ins of ``pins`` need, directly or not,
    and that ``pins`` does not pin itself (sorted)."""
    pinned = {normalize_name(name) for name in pins}
    todo = [req for name in pins for req in _standin_requires(name, pins)]
    needed: set[str] = set()
    while todo:
        dep = _requirement_name(todo.pop())
        if dep in STANDIN_DEPENDENCIES and dep not in pinned and dep not in needed:
            needed.add(dep)
            todo.extend(STANDIN_DEPENDENCIES[dep][1])
    return sorted(needed)


def _publish_dependency(dest_dir: Path, name: str, version: str, upload_time: datetime | None) -> Path:
    """Write the stand-in of dependency ``name`` at ``version`` unless the same wheel is there already.

    An index keeps a file once it is uploaded: a wheel already in ``dest_dir`` with the same bytes stays as it
    is, upload time included, unless ``upload_time`` is earlier than its mtime (then the earlier one is set).
    So a later call that publishes a newer release (``overrides``) leaves the older files' upload times alone.
    """
    target = dest_dir / wheel_filename(name, version)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".standin-", dir=dest_dir) as scratch:
        fresh = make_wheel(scratch, name, version, _generic_standin_files(name, version),
                           _standin_requires(name, {}), upload_time=upload_time)
        if target.is_file() and filecmp.cmp(fresh, target, shallow=False):
            if upload_time is not None and _timestamp_ns(upload_time) < target.stat().st_mtime_ns:
                _set_upload_time(target, upload_time)
        else:
            os.replace(fresh, target)
    return target


def make_standin_dependency_wheels(
    dest_dir: Path | str, upload_time: datetime | None = None, overrides: Mapping[str, str] | None = None
) -> list[Path]:
    """Write a stand-in wheel for each project of :data:`STANDIN_DEPENDENCIES`; return their paths (sorted by name).

    Each is an importable module exposing ``__version__`` (``pillow`` as ``PIL``) whose ``Requires-Dist`` is that
    of the real wheel. ``overrides`` maps a project to another version to write instead of the listed one
    (``{"numpy": "2.0.0"}``: call again later with a later ``upload_time`` to publish a newer transitive
    release). ``upload_time`` as in :func:`make_wheel`, except that a wheel already in ``dest_dir`` keeps its
    upload time unless the new one is earlier (see :func:`_publish_dependency`).

    Raises:
        ValueError: ``overrides`` names a project that is not in :data:`STANDIN_DEPENDENCIES`.
        OSError: ``dest_dir`` cannot be written.
    """
    versions = {name: version for name, (version, _) in STANDIN_DEPENDENCIES.items()}
    for name, version in (overrides or {}).items():
        if normalize_name(name) not in versions:
            raise ValueError(f"{name!r} is not a stand-in dependency (known: {', '.join(sorted(versions))})")
        versions[normalize_name(name)] = version
    dest = Path(dest_dir)
    return [_publish_dependency(dest, name, version, upload_time) for name, version in sorted(versions.items())]


def make_standin_framework_wheels(
    dest_dir: Path | str,
    pins: Mapping[str, str],
    facts: Mapping[str, Any],
    *,
    upload_time: datetime | None = None,
    payload_bytes: Mapping[str, int] | None = None,
    kept_payload_bytes: Mapping[str, int] | None = None,
    dependencies: bool = True,
) -> list[Path]:
    """Write one stand-in wheel per pip name in ``pins`` at exactly the pinned version; return their paths.

    ``pins`` maps pip names to versions (``{"torch": "2.3.1+cu121", "nvidia-nccl-cu12": "2.20.5", ...}``).
    ``facts`` says what the ``torch`` stand-in reports: ``torch_version`` (``torch.__version__``, verbatim;
    defaults to the ``torch`` pin), ``cuda``, ``cudnn`` and ``nccl`` (see :func:`torch_standin_files`); make
    them disagree with the pins or the image's ENV to test that the in-image check notices.
    Dependencies mirror the real wheels (see :func:`_standin_requires`), so ``pip install torch==X`` also
    pulls the pinned ``nvidia-*`` and ``triton`` stand-ins from the same index, and the unpinned third-party
    ones (``filelock``, ``sympy``, ...): with ``dependencies`` (the default) the stand-ins of those that the
    wheels of ``pins`` need are written into ``dest_dir`` too, as :func:`make_standin_dependency_wheels` does
    (their paths are not returned).

    ``upload_time`` applies to every wheel written (see :func:`make_wheel`); ``payload_bytes`` maps a pip name
    to the size of the incompressible payload its wheel carries (``{"torch": 750_000_000}``), ``kept_payload_bytes``
    to that of the one it keeps from release to release (see :func:`make_wheel`).

    Raises:
        ValueError: a fact is not a usable version; a payload size is negative.
        OSError: ``dest_dir`` cannot be written.
    """
    sizes = {normalize_name(name): size for name, size in (payload_bytes or {}).items()}
    kept = {normalize_name(name): size for name, size in (kept_payload_bytes or {}).items()}
    paths = []
    for name, version in sorted(pins.items()):
        if normalize_name(name) == "torch":
            files = torch_standin_files(str(facts.get("torch_version", version)), facts)
        else:
            files = _generic_standin_files(name, version)
        paths.append(make_wheel(dest_dir, name, version, files, _standin_requires(name, pins),
                                upload_time=upload_time, payload_bytes=sizes.get(normalize_name(name), 0),
                                kept_payload_bytes=kept.get(normalize_name(name), 0)))
    if dependencies:
        for name in _dependency_closure(pins):
            _publish_dependency(Path(dest_dir), name, STANDIN_DEPENDENCIES[name][0], upload_time)
    return paths


# --------------------------------------------------------------------------------------------- index

JSON_PAGE_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_PAGE_TYPE = "application/vnd.pypi.simple.v1+html"
_API_VERSION = "1.1"  # PEP 700: upload-time, size and versions
_JSON_OFFERS = (JSON_PAGE_TYPE, "application/vnd.pypi.simple.latest+json")
_HTML_OFFERS = ("text/html", HTML_PAGE_TYPE, "application/vnd.pypi.simple.latest+html")
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
_SEND_CHUNK = 1 << 20


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


def wheel_metadata(path: Path | str) -> bytes:
    """Return the bytes of the ``*.dist-info/METADATA`` of the wheel at ``path`` (what PEP 658 serves).

    The ``.dist-info`` named after the wheel's file name is preferred; else the only top-level one.

    Raises:
        ValueError: the wheel has no (or more than one candidate) METADATA, or is not a zip file.
        OSError: the file cannot be read.
    """
    wheel = Path(path)
    name, version = wheel.name.split("-")[:2]
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", m)]
            wanted = f"{name}-{version}.dist-info/METADATA"
            chosen = wanted if wanted in members else (members[0] if len(members) == 1 else None)
            if chosen is None:
                raise ValueError(f"{wheel.name}: no single .dist-info/METADATA among {members}")
            return archive.read(chosen)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{wheel.name}: not a zip file: {exc}") from None


def upload_time_text(mtime_ns: int) -> str:
    """The PEP 700 ``upload-time`` of a file with mtime ``mtime_ns``: ``2024-06-05T16:25:38.123456Z`` (UTC)."""
    seconds, nanos = divmod(mtime_ns, 10**9)
    when = _UNIX_EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class IndexFile:
    """One wheel as the index lists it."""

    filename: str
    path: Path
    size: int
    mtime_ns: int
    sha256: str
    metadata: bytes | None  # the wheel's METADATA, None when it has none (then no .metadata is advertised)
    metadata_sha256: str | None
    yanked: str | None  # None: not yanked; "": yanked without a reason; else the reason

    @property
    def project(self) -> str:
        """The normalized project name."""
        return project_of_wheel(self.filename)

    @property
    def version(self) -> str:
        """The version in the file name."""
        return self.filename.split("-")[1]

    @property
    def url(self) -> str:
        """The file's URL, relative to the server's root."""
        return f"/files/{urllib.parse.quote(self.filename)}"

    def json(self) -> dict[str, Any]:
        """The PEP 691/700/714 JSON entry of this file."""
        metadata: dict[str, str] | bool = {"sha256": self.metadata_sha256} if self.metadata_sha256 else False
        return {
            "filename": self.filename,
            "url": self.url,
            "hashes": {"sha256": self.sha256},
            "size": self.size,
            "upload-time": upload_time_text(self.mtime_ns),
            "yanked": False if self.yanked is None else (self.yanked or True),
            "core-metadata": metadata,
            "data-dist-info-metadata": metadata,
        }

    def anchor(self) -> str:
        """The PEP 503/592/658/714 HTML anchor of this file."""
        attrs = [f'href="{html.escape(self.url)}#sha256={self.sha256}"']
        if self.metadata_sha256:
            attrs += [f'data-dist-info-metadata="sha256={self.metadata_sha256}"',
                      f'data-core-metadata="sha256={self.metadata_sha256}"']
        if self.yanked is not None:
            attrs.append(f'data-yanked="{html.escape(self.yanked)}"')
        return f"<a {' '.join(attrs)}>{html.escape(self.filename)}</a>"


@dataclass(frozen=True)
class IndexRequest:
    """One request the index answered."""

    method: str
    path: str  # unquoted, without the query
    range: str | None  # the Range header as sent
    status: int
    sent: int  # body bytes sent
    accept: str | None  # the Accept header as sent


class _IndexState:
    """What the handlers of one server share: directories, caches and the request log."""

    def __init__(self, dirs: tuple[Path, ...]) -> None:
        self.dirs = dirs
        self.lock = threading.Lock()
        self.cache: dict[tuple[Path, int, int, int, int], tuple[str, bytes | None, str | None]] = {}
        self.log: list[IndexRequest] = []
        self.full: Counter[str] = Counter()

    def files(self) -> dict[str, IndexFile]:
        """Scan the directories now: file name -> :class:`IndexFile` (earlier directories win)."""
        out = {}
        for name, path in collect_wheels(self.dirs).items():
            try:
                out[name] = self.describe(path)
            except (OSError, ValueError):
                continue  # a wheel removed mid-scan or not a wheel: not listed
        return out

    def describe(self, path: Path) -> IndexFile:
        """The :class:`IndexFile` of ``path``; hashes and METADATA cached by path, size and mtime (and inode and
        ctime: a wheel rewritten with the same size and upload time is another file, as make_wheel renames it in)."""
        stat = path.stat()
        key = (path, stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)
        with self.lock:
            known = self.cache.get(key)
        if known is None:
            try:
                metadata: bytes | None = wheel_metadata(path)
            except ValueError:
                metadata = None
            known = (_sha256_file(path), metadata, hashlib.sha256(metadata).hexdigest() if metadata else None)
            with self.lock:
                self.cache[key] = known
        sidecar = path.with_name(path.name + ".yanked")
        try:
            yanked: str | None = sidecar.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            yanked = None
        return IndexFile(path.name, path, stat.st_size, stat.st_mtime_ns, known[0], known[1], known[2], yanked)

    def record(self, request: IndexRequest, full_wheel: str | None) -> int:
        """Log one request about to be answered; ``full_wheel`` names the wheel when every byte of it is to be
        sent. Returns the entry's number for :meth:`amend`."""
        with self.lock:
            self.log.append(request)
            if full_wheel is not None:
                self.full[full_wheel] += 1
            return len(self.log) - 1

    def amend(self, entry: int, sent: int, full_wheel: str | None) -> None:
        """Correct entry ``entry`` of the log: only ``sent`` bytes went out, so ``full_wheel`` was not sent whole."""
        with self.lock:
            request = self.log[entry]
            self.log[entry] = IndexRequest(request.method, request.path, request.range, request.status, sent,
                                           request.accept)
            if full_wheel is not None:
                self.full[full_wheel] -= 1
                if self.full[full_wheel] <= 0:
                    del self.full[full_wheel]


def _accept_quality(accept: str, offer: str) -> tuple[float, int]:
    """``(q, specificity)`` of media type ``offer`` under an ``Accept`` header: the q of the most specific
    range matching it (2 exact, 1 ``type/*``, 0 ``*/*``); ``(0.0, -1)`` when none matches."""
    kind = offer.split("/", 1)[0]
    best = (0.0, -1)
    for part in accept.split(","):
        media, *params = (piece.strip() for piece in part.split(";"))
        media = media.lower()
        specificity = 2 if media == offer else 1 if media == f"{kind}/*" else 0 if media == "*/*" else -1
        if specificity < 0 or specificity < best[1]:
            continue
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = min(max(float(value.strip()), 0.0), 1.0)
                except ValueError:
                    quality = 0.0
        best = (quality, specificity)
    return best


def choose_page_type(accept: str | None) -> str:
    """The content type of a page for an ``Accept`` header: :data:`JSON_PAGE_TYPE` when the client names a
    JSON type (PEP 691) with a q above 0 and at least that of every HTML type; else ``text/html`` or the
    HTML type the client prefers (also when it accepts neither: HTML is the safe default)."""
    if not accept:
        return "text/html"
    json_q, json_spec = max(_accept_quality(accept, offer) for offer in _JSON_OFFERS)
    html_scores = {offer: _accept_quality(accept, offer) for offer in _HTML_OFFERS}
    html_q = max(score[0] for score in html_scores.values())
    if json_q > 0 and json_spec == 2 and json_q >= html_q:
        return JSON_PAGE_TYPE
    best = max(_HTML_OFFERS, key=lambda offer: (html_scores[offer], -_HTML_OFFERS.index(offer)))
    return "text/html" if best == "text/html" or html_scores[best][0] == 0 else HTML_PAGE_TYPE


def _parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive ``(first, last)`` byte range a ``Range`` header asks of a ``size``-byte body.

    None means: send the whole body with 200 (no header, or one this server ignores as RFC 9110 allows: not
    ``bytes=a-b | a- | -n``, several ranges, ``a > b``).

    Raises:
        _Unsatisfiable: the range starts at or past the end, or asks for the last 0 bytes.
    """
    match = _RANGE.match(header) if header else None
    if match is None or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise _Unsatisfiable
        return max(size - suffix, 0), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        raise _Unsatisfiable
    return start, min(end, size - 1)


class _Unsatisfiable(Exception):
    """A Range header no byte of the body satisfies (answered 416)."""


class _QuietIndexServer(ThreadingHTTPServer):
    """A threading HTTP server that stays quiet and can cut its open (keep-alive) connections on stop."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open_connections: set[Any] = set()
        self.connections_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.open_connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Cut every connection still open, so a stopped index answers nothing, pooled connections included."""
        with self.connections_lock:
            connections, self.open_connections = list(self.open_connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer is not an error of the test; say nothing."""


class _SimpleIndexHandler(BaseHTTPRequestHandler):
    """Serve ``/simple/``, ``/simple/<project>/``, ``/files/<wheel>`` and ``/files/<wheel>.metadata`` from
    directories scanned per request; ``GET`` and ``HEAD``."""

    protocol_version = "HTTP/1.1"
    timeout = 60  # an idle keep-alive connection is closed after this many seconds
    state: _IndexState  # set per server by start_simple_index

    def do_GET(self) -> None:
        """Answer one GET with a page, a file, a range of it, or an error."""
        self._answer()

    def do_HEAD(self) -> None:
        """Answer one HEAD: the headers GET would send, no body."""
        self._answer()

    def _answer(self) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        files = self.state.files()
        if path.rstrip("/") == "/simple":
            self._send_page(path, *self._root_page(files))
        elif path.startswith("/simple/") and path[len("/simple/"):].strip("/"):
            page = self._project_page(path[len("/simple/"):].strip("/"), files)
            if page is None:
                self._send_status(path, HTTPStatus.NOT_FOUND)
            else:
                self._send_page(path, *page)
        elif path.startswith("/files/") and path[len("/files/"):] in files:
            entry = files[path[len("/files/"):]]
            self._send_body(path, entry.path, entry.size, "application/octet-stream", entry, wheel=entry.filename)
        elif path.startswith("/files/") and path.endswith(".metadata") and path[len("/files/"):-9] in files:
            entry = files[path[len("/files/"):-9]]
            if entry.metadata is None:
                self._send_status(path, HTTPStatus.NOT_FOUND)
            else:
                self._send_body(path, entry.metadata, len(entry.metadata), "text/plain; charset=utf-8", entry)
        else:
            self._send_status(path, HTTPStatus.NOT_FOUND)

    def _root_page(self, files: Mapping[str, IndexFile]) -> tuple[bytes, str]:
        """``(body, content type)`` of ``/simple/``: every project."""
        projects = sorted({entry.project for entry in files.values()})
        kind = choose_page_type(self.headers.get("Accept"))
        if kind == JSON_PAGE_TYPE:
            data = {"meta": {"api-version": _API_VERSION}, "projects": [{"name": p} for p in projects]}
            return json.dumps(data, indent=1).encode("utf-8"), kind
        anchors = [f'<a href="/simple/{html.escape(p)}/">{html.escape(p)}</a>' for p in projects]
        return _html_page("Simple index", anchors), kind

    def _project_page(self, project: str, files: Mapping[str, IndexFile]) -> tuple[bytes, str] | None:
        """``(body, content type)`` of one project's page, None if no wheel belongs to it."""
        wanted = normalize_name(project)
        mine = sorted((entry for entry in files.values() if entry.project == wanted), key=lambda e: e.filename)
        if not mine:
            return None
        kind = choose_page_type(self.headers.get("Accept"))
        if kind == JSON_PAGE_TYPE:
            data = {"meta": {"api-version": _API_VERSION}, "name": wanted, "versions": _sorted_versions(mine),
                    "files": [entry.json() for entry in mine]}
            return json.dumps(data, indent=1).encode("utf-8"), kind
        return _html_page(f"Links for {wanted}", [entry.anchor() for entry in mine]), kind

    def _send_page(self, path: str, body: bytes, kind: str) -> None:
        """Send a page (``Vary: Accept``: the same URL answers HTML or JSON)."""
        content_type = kind if kind == JSON_PAGE_TYPE else f"{kind}; charset=utf-8"
        self._send(path, HTTPStatus.OK, {"Content-Type": content_type, "Vary": "Accept"}, body)

    def _send_status(self, path: str, status: HTTPStatus) -> None:
        """Send a short plain-text error answer."""
        body = f"{status.value} {status.phrase}\n".encode("ascii")
        self._send(path, status, {"Content-Type": "text/plain; charset=utf-8"}, body)

    def _send_body(self, path: str, source: Path | bytes, size: int, content_type: str, entry: IndexFile,
                   wheel: str | None = None) -> None:
        """Send a file (``source``: its path, or its bytes) whole or the range asked; a wheel (``wheel``: its
        file name) sent whole counts as a full download, also when a Range spanned all of it."""
        headers = {"Content-Type": content_type, "Accept-Ranges": "bytes",
                   "Last-Modified": email.utils.formatdate(entry.mtime_ns / 1e9, usegmt=True),
                   "ETag": f'"{entry.sha256 if wheel else entry.metadata_sha256}"'}
        try:
            span = _parse_range(self.headers.get("Range"), size)
        except _Unsatisfiable:
            self._send(path, HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE,
                       {**headers, "Content-Range": f"bytes */{size}"}, b"")
            return
        first, last = span if span is not None else (0, size - 1)
        status = HTTPStatus.OK if span is None else HTTPStatus.PARTIAL_CONTENT
        if span is not None:
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        if isinstance(source, bytes):
            self._send(path, status, headers, source[first:last + 1])
            return
        with source.open("rb") as handle:
            handle.seek(first)
            self._send(path, status, headers, handle, length=last + 1 - first,
                       full_wheel=wheel if first == 0 and last + 1 == size else None)

    def _send(self, path: str, status: HTTPStatus, headers: Mapping[str, str], body: bytes | BinaryIO,
              length: int | None = None, full_wheel: str | None = None) -> None:
        """Send status, headers (with Content-Length) and, unless HEAD, the body; log it.

        ``body`` is bytes, or a file positioned at the first byte to send with ``length`` to send. The request is
        logged before the first byte goes out (so a client that has its answer finds it in the log) and the log
        corrected if the client hangs up before the end.
        """
        length = len(body) if isinstance(body, bytes) else int(length or 0)
        head = self.command == "HEAD"
        whole = full_wheel if not head and status in (HTTPStatus.OK, HTTPStatus.PARTIAL_CONTENT) else None
        entry = self.state.record(IndexRequest(self.command, path, self.headers.get("Range"), int(status),
                                               0 if head else length, self.headers.get("Accept")), whole)
        sent = 0
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            if head:
                return
            if isinstance(body, bytes):
                self.wfile.write(body)
                sent = len(body)
            else:
                while sent < length:
                    chunk = body.read(min(_SEND_CHUNK, length - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        if sent != length:
            self.state.amend(entry, sent, whole)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet; pytest output is noisy enough."""


def _html_page(title: str, anchors: Iterable[str]) -> bytes:
    """Return a PEP 503 HTML page (repository version :data:`_API_VERSION`) holding ``anchors``."""
    lines = "\n".join(f"    {anchor}<br/>" for anchor in anchors)
    page = (f"<!DOCTYPE html>\n<html>\n  <head><meta name=\"pypi:repository-version\" content=\"{_API_VERSION}\">"
            f"<title>{html.escape(title)}</title></head>\n  <body>\n{lines}\n  </body>\n</html>\n")
    return page.encode("utf-8")


def _sorted_versions(files: Iterable[IndexFile]) -> list[str]:
    """The distinct versions of ``files`` in PEP 440 order (string order for one that does not parse)."""
    from packaging.version import InvalidVersion, Version

    def key(text: str) -> tuple[int, Any]:
        try:
            return (1, Version(text))
        except InvalidVersion:
            return (0, text)

    return sorted({entry.version for entry in files}, key=key)


@dataclass
class IndexServer:
    """A running stand-in index (see :func:`start_simple_index`); a context manager that stops it on exit."""

    url: str  # http://127.0.0.1:<port>/simple, for --index-url
    _state: _IndexState = field(repr=False)
    _server: _QuietIndexServer = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _stopped: threading.Event = field(default_factory=threading.Event, repr=False)

    def stop(self) -> None:
        """Shut the index down and release its port (idempotent)."""
        if not self._stopped.is_set():
            self._stopped.set()
            self._server.shutdown()
            self._server.server_close()
            self._server.close_connections()
            self._thread.join(timeout=10)

    def full_downloads(self) -> dict[str, int]:
        """Wheel file name -> how many GET answers carried every byte of it: a 200, or a 206 whose range
        spans the whole file (uv range-reads a small wheel that way when no ``.metadata`` is advertised). A HEAD,
        a partial range and a ``.metadata`` do not count; a transfer the client cut short does not either."""
        with self._state.lock:
            return dict(sorted(self._state.full.items()))

    def requests(self) -> list[IndexRequest]:
        """Every request answered so far, in order."""
        with self._state.lock:
            return list(self._state.log)

    def __enter__(self) -> IndexServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_simple_index(wheel_dir: Path | str, extra_dirs: Sequence[Path | str] = ()) -> IndexServer:
    """Serve the wheels in ``wheel_dir`` (and ``extra_dirs``) as a package index on ``127.0.0.1``.

    ``url`` is ``http://127.0.0.1:<port>/simple``. Directories are rescanned on every request, so wheels
    written after the start are served too; when two directories hold the same file name, ``wheel_dir`` wins.
    What it serves, as PyPI does:

    - ``/simple/`` and ``/simple/<project>/``: PEP 503 HTML, or PEP 691 JSON (API version 1.1) when ``Accept``
      names ``application/vnd.pypi.simple.v1+json`` at least as high as HTML; JSON files carry ``hashes``,
      ``size``, ``upload-time`` (PEP 700, the wheel's mtime in UTC), ``yanked`` and ``core-metadata``, the
      project its ``versions``; HTML anchors carry ``#sha256=``, ``data-core-metadata`` (and the older
      ``data-dist-info-metadata``) and ``data-yanked``;
    - ``/files/<wheel>`` and ``/files/<wheel>.metadata`` (PEP 658/714: the wheel's METADATA), with ``HEAD`` and
      ``Range: bytes=a-b | a- | -n`` (206, or 416 when unsatisfiable);
    - a wheel is yanked (PEP 592) while a file ``<wheel>.yanked`` lies next to it; its text, stripped, is the
      reason (empty: yanked without one).

    Hashes and METADATA are cached by path, size and mtime (and inode and ctime). The server runs in daemon
    threads; containers reach it with host networking.

    Raises:
        OSError: no port could be bound.
    """
    state = _IndexState(tuple(Path(d) for d in (wheel_dir, *extra_dirs)))
    handler = type("IndexHandler", (_SimpleIndexHandler,), {"state": state})
    server = _QuietIndexServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="simple-index", daemon=True)
    thread.start()
    return IndexServer(f"http://127.0.0.1:{server.server_address[1]}/simple", state, server, thread)


def serve_simple_index(
    wheel_dir: Path | str, extra_dirs: Sequence[Path | str] = ()
) -> tuple[str, Callable[[], None]]:
    """Serve the wheels in ``wheel_dir`` (and ``extra_dirs``) as :func:`start_simple_index` does.

    Returns ``(url, stop)``: ``url`` is ``http://127.0.0.1:<port>/simple`` for ``pip --index-url``; ``stop()``
    shuts the server down (idempotent). Use :func:`start_simple_index` to also read its request log.

    Raises:
        OSError: no port could be bound.
    """
    server = start_simple_index(wheel_dir, extra_dirs)
    return server.url, server.stop
