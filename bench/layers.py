"""Bytes a node holding the torch 2.3.0 image pulls to get the 2.3.1 one (same CUDA pins), as a fraction of the
image, with the lock installed in layers against all of it in one layer, in one run (issue: <= 40%, was ~95%).

    python3 bench/layers.py [--scale 200]

Builds and pushes, with ``python -m imagectl build`` on the real engine, ``torch-2.3.0-cu121-py3.11`` (A) and then
``torch-2.3-cu121-py3.11`` (B, torch 2.3.1): the same eleven ``nvidia-*`` pins, the same base
(``nvidia/cuda:12.1.1-base-ubuntu22.04``, a stand-in from tests/integration/support/engine.py mirrored through a
loopback registry) and Python 3.11.  Each is locked at build time against a loopback index of stand-in wheels
(tests/integration/support/wheels.py) that holds every version of the 26 packages that PyPI's locks of A and B
pick, with PyPI's upload times and Requires-Dist, and a payload of incompressible bytes of 1/SCALE of the real
wheel's size (:data:`PYPI_WHEELS`); so the build-time locks are PyPI's locks (as of the release day plus 7 days).

Bytes moved: the compressed layers of B's pushed manifest whose digests A's manifest lacks, over all of B's
layers: what ``docker pull B`` downloads on a node that has A.  Variants, each its own registry namespace:

- ``layered``: the shipped templates (``lock-1-cuda``, ``lock-2-libs``, ``lock-3-framework``, ``lock-4-rest``);
  the target row.
- ``single layer``: the same locks with every layer file installed by ONE ``RUN pip install`` (an override of
  ``partials/install-lock.j2`` through ``[paths] templates``): the way before the split, the baseline.
- ``layered, same day``: both locked as of B's day (``[lock] as_of``), so that only the packages that the
  release pins differ: what the split alone gives.
- ``layered, B cold``: B built again with ``--no-cache --force`` (a builder that never built A), against A of
  ``layered``.

The stand-in base and the JIT layer (gcc, g++, python3.11-dev from Debian) are real-size; the lock layers are 1/SCALE.
So each fraction is printed twice: as built, and at real wheel size (the lock layers' bytes times SCALE, the others
as built), which is the number the target is about; with ``--scale 1`` the two are the same.  Exits 1 when the
real-size fraction of ``layered`` is over 0.40.

Needs the Docker engine, ``docker-registry``, ``uv`` and the Debian archive (for the JIT packages; the stand-in
rootfs is cached by the integration tests' support).  Everything it makes is named ``imagectl-bench*`` or lives
under its own registry's ``127.0.0.1:PORT/``, and is removed at the end (images and the temporary folder); the
shared stand-in rootfs image ``imagectl-test/standin-rootfs:*`` is left in place.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

A = "torch-2.3.0-cu121-py3.11"
B = "torch-2.3-cu121-py3.11"  # torch 2.3.1
BASE = "nvidia/cuda:12.1.1-base-ubuntu22.04"  # the base flavour of both (show --json: base_image)
TARGET = 0.40
SAME_DAY = "2024-06-12"  # B's as-of day (torch 2.3.1 uploaded 2024-06-05, plus 7 days)
PREFIX = "imagectl-bench"
ASSEMBLED_INSTALL = "imagectl: install"  # imagectl.images.assembled.INSTALL_STEP (not imported: the bench starts fast)

# The wheels a cp311 manylinux_2_28 x86_64 install of each locked version takes (pip's tag order), as PyPI lists them:
# https://pypi.org/simple/<name>/ with Accept: application/vnd.pypi.simple.v1+json (PEP 691), the file's `size` and
# `upload-time` (PEP 700); Requires-Dist from its PEP 658 `.metadata` (read by HTTP Range from the wheel where PyPI
# has none: nvidia-nccl-cu12, nvidia-nvjitlink-cu12, torch, ...), requirements of extras left out.  The versions are
# those of `imagectl lock torch-2.3.0-cu121-py3.11` (as of 2024-05-01) and `imagectl lock torch-2.3.1-cu121-py3.11`
# (as of 2024-06-12) against PyPI, before and after the CUDA layer was locked as of its pins' upload day (2024-03-13:
# nvidia-nvjitlink-cu12 12.4.99 for both).  Read 2026-12-01.  (name, version, size in bytes, upload time, Requires-Dist)
PYPI_WHEELS: tuple[tuple[str, str, int, str, tuple[str, ...]], ...] = (
    ("filelock", "3.14.0", 12_001, "2024-04-29T15:59:29Z", ()),
    ("filelock", "3.15.1", 15_946, "2024-06-12T22:54:12Z", ()),
    ("fsspec", "2024.3.1", 171_991, "2024-03-18T19:35:11Z", ()),
    ("fsspec", "2024.6.0", 176_923, "2024-06-04T00:49:10Z", ()),
    ("jinja2", "3.1.3", 133_236, "2024-01-10T23:12:19Z", ("MarkupSafe >=2.0",)),
    ("jinja2", "3.1.4", 133_271, "2024-05-05T23:41:59Z", ("MarkupSafe>=2.0",)),
    ("markupsafe", "2.1.5", 28_220, "2024-02-02T16:30:24Z", ()),
    ("mpmath", "1.3.0", 536_198, "2023-03-07T16:47:09Z", ()),
    ("networkx", "3.3", 1_702_396, "2024-04-06T12:59:44Z", ()),
    ("numpy", "1.26.4", 18_252_005, "2024-02-05T23:53:15Z", ()),
    ("nvidia-cublas-cu12", "12.1.3.1", 410_594_774, "2023-04-19T15:50:03Z", ()),
    ("nvidia-cuda-cupti-cu12", "12.1.105", 14_109_015, "2023-04-19T15:47:32Z", ()),
    ("nvidia-cuda-nvrtc-cu12", "12.1.105", 23_671_734, "2023-04-19T15:48:32Z", ()),
    ("nvidia-cuda-runtime-cu12", "12.1.105", 823_596, "2023-04-19T15:47:22Z", ()),
    ("nvidia-cudnn-cu12", "8.9.2.26", 731_725_872, "2023-06-01T19:24:57Z", ("nvidia-cublas-cu12",)),
    ("nvidia-cufft-cu12", "11.0.2.54", 121_635_161, "2023-04-19T15:50:46Z", ()),
    ("nvidia-curand-cu12", "10.3.2.106", 56_467_784, "2023-04-19T15:51:04Z", ()),
    ("nvidia-cusolver-cu12", "11.4.5.107", 124_161_928, "2023-04-19T15:51:25Z",
     ("nvidia-cublas-cu12", "nvidia-nvjitlink-cu12", "nvidia-cusparse-cu12")),
    ("nvidia-cusparse-cu12", "12.1.0.106", 195_958_278, "2023-04-19T15:51:49Z", ("nvidia-nvjitlink-cu12",)),
    ("nvidia-nccl-cu12", "2.20.5", 176_249_402, "2024-03-06T04:30:20Z", ()),
    ("nvidia-nvjitlink-cu12", "12.4.99", 21_062_671, "2024-03-06T01:17:26Z", ()),  # the CUDA layer's, as of its pins
    ("nvidia-nvjitlink-cu12", "12.4.127", 21_066_810, "2024-04-03T20:59:46Z", ()),
    ("nvidia-nvjitlink-cu12", "12.5.40", 21_297_869, "2024-05-21T17:00:15Z", ()),
    ("nvidia-nvtx-cu12", "12.1.105", 99_138, "2023-04-19T15:48:43Z", ()),
    ("pillow", "10.3.0", 4_507_469, "2024-04-01T12:17:41Z", ()),
    ("sympy", "1.12", 5_742_435, "2023-05-10T18:22:14Z", ("mpmath (>=0.19)",)),
    ("sympy", "1.12.1", 5_743_129, "2024-05-29T17:56:05Z", ("mpmath <1.4.0,>=1.1.0",)),
    ("torch", "2.3.0", 779_160_265, "2024-04-24T15:46:28Z", ()),  # Requires-Dist: TORCH_REQUIRES
    ("torch", "2.3.1", 779_156_414, "2024-06-05T16:41:48Z", ()),
    ("torchaudio", "2.3.0", 3_355_687, "2024-04-24T15:48:50Z", ("torch (==2.3.0)",)),
    ("torchaudio", "2.3.1", 3_355_690, "2024-06-05T16:44:55Z", ("torch (==2.3.1)",)),
    ("torchvision", "0.18.0", 6_955_003, "2024-04-24T15:48:25Z",
     ("numpy", "torch (==2.3.0)", "pillow (!=8.3.*,>=5.3.0)")),
    ("torchvision", "0.18.1", 6_955_165, "2024-06-05T16:43:14Z",
     ("numpy", "torch (==2.3.1)", "pillow (!=8.3.*,>=5.3.0)")),
    ("triton", "2.3.0", 168_079_300, "2024-04-05T02:47:52Z", ("filelock",)),
    ("triton", "2.3.1", 168_079_264, "2024-05-27T21:44:29Z", ("filelock",)),
    ("typing-extensions", "4.11.0", 34_698, "2024-04-05T12:35:44Z", ()),
    ("typing-extensions", "4.12.2", 37_438, "2024-06-07T18:52:13Z", ()),
)
# torch 2.3.0's and 2.3.1's Requires-Dist, identical but for triton's version ({triton}).
_LINUX = '; platform_system == "Linux" and platform_machine == "x86_64"'
TORCH_REQUIRES = (
    "filelock", "typing-extensions (>=4.8.0)", "sympy", "networkx", "jinja2", "fsspec",
    *(f"{name} (=={version}) {_LINUX}" for name, version in (
        ("nvidia-cuda-nvrtc-cu12", "12.1.105"), ("nvidia-cuda-runtime-cu12", "12.1.105"),
        ("nvidia-cuda-cupti-cu12", "12.1.105"), ("nvidia-cudnn-cu12", "8.9.2.26"), ("nvidia-cublas-cu12", "12.1.3.1"),
        ("nvidia-cufft-cu12", "11.0.2.54"), ("nvidia-curand-cu12", "10.3.2.106"),
        ("nvidia-cusolver-cu12", "11.4.5.107"), ("nvidia-cusparse-cu12", "12.1.0.106"),
        ("nvidia-nccl-cu12", "2.20.5"), ("nvidia-nvtx-cu12", "12.1.105"))),
    f'triton (=={{triton}}) {_LINUX} and python_version < "3.12"',
    'mkl (<=2021.4.0,>=2021.1.1) ; platform_system == "Windows"',
)
TRITON_OF_TORCH = {"2.3.0": "2.3.0", "2.3.1": "2.3.1"}

# partials/install-lock.j2 as it was before the split: all of the lock in one RUN (same macros, same arguments).
SINGLE_LAYER_PARTIAL = """\
{# bench/layers.py: the lock's layer files installed by ONE pip install (one image layer), as before the split. #}
{% macro install_layers(prefix) %}
COPY {% for layer in lock.layers %}{{ layer.file }} {% endfor %}/opt/imagectl/
{% set files %}{% for layer in lock.layers %} -r /opt/imagectl/{{ layer.file }}{% endfor %}{% endset %}
RUN {{ prefix }}pip install --no-cache-dir --no-deps --require-hashes --only-binary :all:{{ files }}

{% endmacro %}
{% macro install_extras(prefix) %}
COPY extra-requirements.txt {{ lock.extras }} /opt/imagectl/
{% set pip = prefix ~ "pip install --no-cache-dir --no-deps --require-hashes --only-binary :all:" %}
RUN {{ pip }} -r /opt/imagectl/{{ lock.extras }}
{% endmacro %}
"""


@dataclass
class Variant:
    label: str
    namespace: str
    templates: bool = False  # the single-layer override
    as_of: str | None = None  # [lock] as_of
    b_flags: tuple[str, ...] = ()  # extra flags of B's build
    a_from: str | None = None  # compare with A of another variant's namespace (B cold)
    target: bool = False


VARIANTS = (
    Variant("layered", f"{PREFIX}-layered", target=True),
    Variant("single layer", f"{PREFIX}-single", templates=True),
    Variant("layered, same day", f"{PREFIX}-sameday", as_of=SAME_DAY),
    Variant("layered, B cold", f"{PREFIX}-cold", b_flags=("--no-cache", "--force"), a_from=f"{PREFIX}-layered"),
)


@dataclass
class Layer:
    digest: str
    size: int
    what: str  # a short name from the image config's history
    lock: bool  # made by a pip install of the lock


@dataclass
class Image:
    layers: list[Layer]
    packages: dict[str, str] = field(default_factory=dict)  # imagectl.lock.packages


# --------------------------------------------------------------------------------------------- set-up


def module_files(name: str, version: str) -> dict[str, str]:
    """An importable module exposing ``__version__``, laid out as the real wheel's (``nvidia/cudnn``, ``PIL``)."""
    if name.startswith("nvidia-"):
        folder = "nvidia/" + name[len("nvidia-"):].rsplit("-cu", 1)[0].replace("-", "_")
    else:
        folder = {"pillow": "PIL"}.get(name, name.replace("-", "_"))
    return {f"{folder}/__init__.py": f"__version__ = {version!r}\n"}


def make_wheels(dest: Path, scale: int) -> int:
    """Write the stand-in of every row of :data:`PYPI_WHEELS` into ``dest``; return the payload bytes written."""
    from tests.integration.support.wheels import make_wheel, torch_standin_files

    facts = {"cuda": "12.1", "cudnn": "8.9.2.26", "nccl": "2.20.5"}
    total = 0
    for name, version, size, uploaded, requires in PYPI_WHEELS:
        when = datetime.fromisoformat(uploaded.replace("Z", "+00:00"))
        if name == "torch":
            files = torch_standin_files(version, facts)
            requires = tuple(r.replace("{triton}", TRITON_OF_TORCH[version]) for r in TORCH_REQUIRES)
        else:
            files = module_files(name, version)
        make_wheel(dest, name, version, files, requires, upload_time=when, payload_bytes=size // scale)
        total += size // scale
    return total


def write_project(project: Path, variant: Variant, registry: str, index_url: str, templates: Path) -> None:
    lines = ["[registry]", f'url = "{registry}"', f'namespace = "{variant.namespace}"', "",
             "[mirrors]", f'"docker.io" = "{registry}/{PREFIX}-hub"', "",
             "[pip]", f'index_url = "{index_url}"', "", "[build]", 'network = "host"', ""]
    if variant.templates:
        lines += ["[paths]", f'templates = ["{templates}"]', ""]
    if variant.as_of:
        lines += ["[lock]", f'as_of = "{variant.as_of}"', ""]
    project.mkdir(parents=True, exist_ok=True)
    (project / "imagectl.toml").write_text("\n".join(lines))


def build(project: Path, profile: str, flags: tuple[str, ...], env: dict[str, str]) -> float:
    argv = [sys.executable, "-m", "imagectl", "build", profile, *flags]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} (in {project}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return elapsed


# --------------------------------------------------------------------------------------------- measuring


def _layer_name(created_by: str) -> str:
    """A short name of the instruction that made a layer (``RUN pip install lock-1-cuda.txt``)."""
    text = " ".join(created_by.replace("/bin/sh -c ", "").replace("#(nop) ", "").split())
    if text.startswith(ASSEMBLED_INSTALL):  # an assembled layer: its lock file, or one file of a wheel (own_layer_mib)
        path, _, pins = text.removeprefix(ASSEMBLED_INSTALL).strip().partition(" ")
        return f"{ASSEMBLED_INSTALL} {path.split('/site-packages/')[-1].rsplit('/', 1)[-1]} {pins}"[:120]
    if "pip install" in text:
        return "RUN pip install " + " ".join(p.rsplit("/", 1)[-1] for p in text.split() if "/lock-" in p)
    if text.startswith("COPY ") and " in " in text:
        return "COPY ... " + text.rsplit(" in ", 1)[1]
    if "python3" in text and "venv" in text:
        return "RUN python -m venv /opt/venv"
    if "missing=" in text:
        return "RUN apt-get install the JIT packages (gcc, g++, python3.11-dev)"
    return text[:60]


def pushed_image(host: str, repository: str, base_layers: int) -> Image:
    """The layers of ``repository:latest`` as pushed (compressed sizes), named from the config's history."""
    from imagectl.registry import RegistryClient

    with RegistryClient(host, insecure=True) as client:
        manifest = client.get_manifest(repository, "latest")
        config = json.loads(client.read_blob(repository, manifest.config().digest))
    history = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]
    layers = []
    for number, desc in enumerate(manifest.layers()):
        made = history[number] if number < len(history) else ""
        what = "base" if number < base_layers else _layer_name(made)
        lock = "pip install" in made or made.startswith(ASSEMBLED_INSTALL)
        layers.append(Layer(desc.digest, desc.size, what, number >= base_layers and lock))
    labels = (config.get("config") or {}).get("Labels") or {}
    packages = dict(p.split("==", 1) for p in labels.get("imagectl.lock.packages", "").split(",") if "==" in p)
    return Image(layers, packages)


@dataclass
class Moved:
    total: int
    new: int
    total_real: int
    new_real: int
    chain: int = 0  # a store keyed by the chain (Docker's graph drivers): every layer from the first new one up
    chain_real: int = 0

    @property
    def fraction(self) -> float:
        return self.new / self.total

    @property
    def fraction_real(self) -> float:
        return self.new_real / self.total_real


def moved(a: Image, b: Image, scale: int) -> Moved:
    have = {layer.digest for layer in a.layers}
    real = {layer.digest: layer.size * (scale if layer.lock else 1) for layer in b.layers}
    fresh = [layer for layer in b.layers if layer.digest not in have]
    first = next((n for n, layer in enumerate(b.layers) if layer.digest not in have), len(b.layers))
    above = b.layers[first:]
    return Moved(sum(layer.size for layer in b.layers), sum(layer.size for layer in fresh),
                 sum(real.values()), sum(real[layer.digest] for layer in fresh),
                 sum(layer.size for layer in above), sum(real[layer.digest] for layer in above))


def changed_by_layer(a: Image, b: Image) -> dict[str, list[str]]:
    """The packages whose locked version differs between A and B, by the install layer they go to."""
    from imagectl.cli.workspace import Workspace
    from imagectl.lock.layers import layer_of

    layers = Workspace().profile(B).framework.layers
    out: dict[str, list[str]] = {name: [] for name, _ in layers}
    for name in sorted(set(a.packages) | set(b.packages)):
        if a.packages.get(name) != b.packages.get(name):
            out[layer_of(name, layers)].append(f"{name} {a.packages.get(name, '-')} -> {b.packages.get(name, '-')}")
    return out


def mb(n: float) -> str:
    return f"{n / 1e6:9.1f}"


# --------------------------------------------------------------------------------------------- clean-up


def remove_images(client, registry: str, refs_before: set[str]) -> list[str]:
    """Untag (and so delete, where nothing else holds them) every ``imagectl-bench/`` ref and every ref under this
    run's registry that was not there before (its port may have served an earlier registry); return failures."""
    import docker.errors

    ours = []
    for image in client.images.list():
        for ref in image.tags:
            if ref.startswith(f"{PREFIX}/") or (ref.startswith(f"{registry}/") and ref not in refs_before):
                ours.append(ref)
    # the built images first, then the stand-in base and its mirror copy (their parents)
    ours.sort(key=lambda ref: (f"/{PREFIX}-hub/" in ref or ref.startswith(f"{PREFIX}/"), ref))
    failed = []
    for ref in ours:
        try:
            client.images.remove(ref)
        except docker.errors.APIError as exc:
            failed.append(f"{ref}: {exc}")
    return failed


# --------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=200, help="stand-in wheels weigh 1/SCALE of the real ones")
    args = parser.parse_args()
    started = time.perf_counter()
    print("$", shlex.join([sys.executable, *sys.argv]))

    from tests.integration.support.engine import cuda_base_env, ensure_dockerd, push_to_registry, standin_base_image
    from tests.integration.support.registry import start_registry
    from tests.integration.support.wheels import start_simple_index

    client = ensure_dockerd()
    refs_before = {ref for image in client.images.list() for ref in image.tags}
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["IMAGECTL_NO_CACHE"] = "1"  # build-time locks keyed by this run's index port would never be read again
    results: dict[str, tuple[Moved, Image, Image]] = {}
    registry = None
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"{PREFIX}-layers-")))
        try:
            registry = start_registry(work / "registry")
            stack.callback(registry.stop)
            base = standin_base_image(client, f"{PREFIX}/{BASE}", env=cuda_base_env("12.1.1"))
            push_to_registry(client, base, registry.host, f"{PREFIX}-hub/{BASE}")
            base_layers = len(client.images.get(base).attrs["RootFS"]["Layers"])
            payload = make_wheels(work / "wheels", args.scale)
            index = start_simple_index(work / "wheels")
            stack.callback(index.stop)
            templates = work / "single-layer-templates"
            (templates / "partials").mkdir(parents=True)
            (templates / "partials" / "install-lock.j2").write_text(SINGLE_LAYER_PARTIAL)
            print(f"index: {len(PYPI_WHEELS)} stand-in wheels (both releases), {payload / 1e6:.1f} MB of payload: "
                  f"1/{args.scale} of the {sum(r[2] for r in PYPI_WHEELS) / 1e9:.2f} GB of PyPI's wheels")
            for variant in VARIANTS:
                project = work / variant.namespace
                write_project(project, variant, registry.host, index.url, templates)
                if variant.a_from is None:
                    seconds = build(project, A, (), env)
                    print(f"  {variant.label:20} built A in {seconds:6.1f} s")
                seconds = build(project, B, variant.b_flags, env)
                print(f"  {variant.label:20} built B in {seconds:6.1f} s")
                a = pushed_image(registry.host, f"{variant.a_from or variant.namespace}/{A}", base_layers)
                b = pushed_image(registry.host, f"{variant.namespace}/{B}", base_layers)
                results[variant.label] = (moved(a, b, args.scale), a, b)
        finally:
            failed = remove_images(client, registry.host if registry else "-", refs_before)
            for line in failed:
                print(f"not removed: {line}")

    print()
    print(f"{'variant':20} {'B MB':>9} {'new MB':>9} {'fraction':>8}   "
          f"{'B MB real':>9} {'new real':>9} {'fraction':>8}")
    for label, (m, _, _) in results.items():
        print(f"{label:20} {mb(m.total)} {mb(m.new)} {m.fraction:8.2f}   {mb(m.total_real)} {mb(m.new_real)} "
              f"{m.fraction_real:8.2f}")
    print(f"(real: the lock layers' bytes times {args.scale}, the others as built)")
    for label in ("layered", "single layer"):
        _, a, b = results[label]
        print(f"\n{label}: B's layers (new: not in A)")
        have = {layer.digest for layer in a.layers}
        for layer in b.layers:
            real = layer.size * (args.scale if layer.lock else 1)
            mark = "new " if layer.digest not in have else "    "
            print(f"  {mark}{mb(layer.size)} MB  real {mb(real)} MB  {layer.what}")
    for label in ("layered", "layered, same day"):
        _, a, b = results[label]
        print(f"\n{label}: locked versions that differ between A and B, by layer")
        for layer, names in changed_by_layer(a, b).items():
            print(f"  {layer:10} {', '.join(names) or '-'}")
    target = next(v for v in VARIANTS if v.target)
    fraction = results[target.label][0].fraction_real
    verdict = "met" if fraction <= TARGET else "NOT met"
    print(f"\n{target.label}: {fraction:.0%} of B is pulled to move from A (target <= {TARGET:.0%}): {verdict}; "
          f"single layer: {results['single layer'][0].fraction_real:.0%}")
    print(f"{time.perf_counter() - started:.0f} s")
    return 0 if fraction <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
