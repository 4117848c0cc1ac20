"""The plain-dict context templates render from: every value validated, every collection sorted.

``render_context`` is pure: the profile, the configuration and a few build facts in, a dict out.  Nothing
user-controlled reaches a template without passing a grammar of :mod:`imagectl.grammar` (the matrix and
the configuration are checked when loaded; extras are checked here).

Index credentials (``[pip] index_url = "https://user:token@host/simple"``) never reach the context: the
templates see each URL without its userinfo, and only the name of the netrc file (:func:`pip_netrc`) that a
first build stage installs with; the final stage copies the installed environment, never the file.
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..config import Config
from ..engine.features import assembles_wheels, has_cache_mounts
from ..errors import ValidationError
from ..grammar import check_deb_package, check_driver, check_text, check_version, url_credentials
from ..image_spec import ImageSpec
from ..labels import labels_for
from ..lock.layers import split_layers
from ..lock.lockfile import Lock, canonical_name, requirement_lines
from ..matrix.admission import require_cuda
from ..matrix.facts import profile_facts
from ..matrix.model import Profile
from ..pip_index import configured_index, extra_index_urls, index_url
from ..requirements import check_requirement

NETRC_FILE = "imagectl-pip.netrc"  # in the build context only when an index URL carries credentials
LOCK_PATH = "/opt/imagectl/lock.txt"  # the lock the image was installed from, as the lock file (header and hashes)
EXTRAS_LOCK_FILE = "extras-lock.txt"  # the extras' closure, in the context and in /opt/imagectl/
EXTRAS_LOCK_PATH = f"/opt/imagectl/{EXTRAS_LOCK_FILE}"
# Every installed package ==, for a later `pip install` in a derived image (ENV PIP_CONSTRAINT, as NGC does): it
# cannot silently replace a locked package.
CONSTRAINTS_PATH = "/opt/imagectl/constraints.txt"
# Flavours whose base image carries the CUDA toolkit, and where: nvidia/cuda's devel images install it in
# /usr/local/cuda (a link to /usr/local/cuda-X.Y) with nvcc in its bin/, which their PATH holds.
TOOLKIT_HOMES = {"devel": "/usr/local/cuda"}
# What the NVIDIA container runtime exposes to a container (nvidia/cuda's images set the same): every GPU the
# runtime is given, and the compute (CUDA) and utility (nvidia-smi, NVML) driver libraries.
NVIDIA_RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
ENTRY_PATH = "/opt/imagectl/entry.sh"  # the image's ENTRYPOINT (templates/entry.sh.j2)
DRIVER_VERSION_FILE = "/proc/driver/nvidia/version"  # the kernel module's version line, when nvidia-smi is absent
# nvidia/cuda's own ENTRYPOINT (banner, its driver notices; bash without a command): the entry script hands over
# to it where the base has it, so the base's behaviour stays.
BASE_ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"


def pip_netrc(profile: Profile, config: Config) -> str:
    """The netrc file (``machine HOST login USER password PASSWORD`` lines, sorted) for every configured index
    URL of ``profile`` that carries credentials; empty when none does.  Raises ValidationError when two URLs
    give one host different credentials (netrc holds one per host)."""
    urls = [configured_index(profile, config), *config.pip_extra_index_urls]
    machines: dict[str, tuple[str, str]] = {}
    for host, user, password in filter(None, (url_credentials(u) for u in urls if u)):
        if machines.setdefault(host, (user, password)) != (user, password):
            raise ValidationError(f"[pip]: two index URLs give {host} different credentials (one per host)")
    return "".join(f"machine {host} login {user} password {password}\n"
                   for host, (user, password) in sorted(machines.items()))


def check_extra(text: str) -> str:
    """A team's extra requirement, normalised by ``packaging`` (PEP 508; markers allowed, direct URLs not);
    raises InputError.  It reaches only the record file ``extra-requirements.txt`` and the resolver: what the
    Dockerfile installs are the resolved ``name==version`` lines with hashes."""
    return check_requirement(text, "extra requirement", markers=True)


def cuda_home(profile: Profile) -> str:
    """Where the profile's base image keeps the CUDA toolkit (nvcc), or "" for a flavour without one."""
    return TOOLKIT_HOMES.get(profile.flavor, "")


def image_env(profile: Profile) -> dict[str, str]:
    """Environment variables users expect in the image: versions, the driver requirement, what the NVIDIA
    container runtime exposes (stated, not inherited: a ``base`` flavour or a ``--base`` image may lack them)
    and, on a flavour with the CUDA toolkit, ``CUDA_HOME``.

    ``NVIDIA_REQUIRE_CUDA`` is NVIDIA's own for the release (:func:`~imagectl.matrix.admission.require_cuda`:
    ``cuda>=X.Y`` or a forward-compatible branch on a data-center brand), so the runtime starts the image on exactly
    the drivers ``compat`` calls compatible; ``NVIDIA_DISABLE_REQUIRE`` is not set: on other drivers the image's
    cuda-compat libraries would take the host's place and fail (CUDA error 804 on a consumer GPU)."""
    fw = profile.framework.name.upper().replace("-", "_")
    env = {
        "IMAGECTL_PROFILE": profile.name,
        f"{fw}_VERSION": profile.release.version,
        "IMAGECTL_CUDNN_VERSION": profile.variant.cudnn or "",
        "IMAGECTL_NCCL_VERSION": profile.variant.nccl or "",
        "NVIDIA_REQUIRE_CUDA": require_cuda(profile.toolkit),
        **NVIDIA_RUNTIME_ENV,
    }
    if cuda_home(profile):
        env["CUDA_HOME"] = cuda_home(profile)
    return dict(sorted(env.items()))


def entry_context(profile: Profile) -> dict[str, str]:
    """What the entry script (``templates/entry.sh.j2``) needs: the profile's full-support driver (its branch is the
    oldest ``cuda>=X.Y`` admits), the older branches its cuda-compat supports (forward compatibility), where it reads
    the node's driver and which entrypoint it hands over to: it judges a driver as
    :func:`~imagectl.matrix.admission.admission` does.  Raises ValidationError for a floor that is not a driver
    version or a branch that is not a number (they are interpolated into a shell script)."""
    toolkit = profile.toolkit
    branches = [str(b) for b in toolkit.forward_compat]
    for value in branches:
        if not value.isdigit():
            raise ValidationError(f"cuda.{toolkit.version}.forward_compat: {value!r} is not a driver branch")
    return {
        "path": ENTRY_PATH,
        "profile": check_text(profile.name, "profile name"),
        "cuda": check_version(toolkit.version, "cuda version"),
        "min_driver": check_driver(toolkit.min_driver, f"cuda.{toolkit.version}.min_driver"),
        "forward_compat": " ".join(branches),
        "driver_version_file": DRIVER_VERSION_FILE,
        "next_entrypoint": BASE_ENTRYPOINT,
    }


def jit_packages(profile: Profile) -> list[str]:
    """The OS packages the framework's JIT compilers need (``[framework] jit_packages``) for the profile's
    Python, sorted; raises ValidationError for one that is not a Debian package name."""
    patterns = profile.framework.jit_packages
    return sorted({check_deb_package(p.format(python=profile.python), "jit_packages") for p in patterns})


def layer_file(number: int, name: str) -> str:
    """The file of install layer ``name``, the ``number``-th from 1, in the context and in ``/opt/imagectl``."""
    return f"lock-{number}-{name}.txt"


def lock_layers(profile: Profile, lock: Lock) -> list[tuple[str, str]]:
    """``(file name in the context, requirement lines)`` of each install layer of ``lock`` (pure)."""
    layers = split_layers(lock.packages, profile.framework.layers)
    return [(layer_file(number, name), requirement_lines(packages))
            for number, (name, packages) in enumerate(layers, start=1)]


def layer_files(profile: Profile, lock: Lock) -> list[dict[str, Any]]:
    """What the Dockerfile's comments say of each install layer: its file and from how many MiB a file of it is a
    layer of its own in an assembled build (0: never; ``[framework] layers``' ``own_layer_mib``) (pure)."""
    return [{"file": layer_file(number, name), "own_mib": profile.framework.own_layer_mib(name)}
            for number, (name, _) in enumerate(split_layers(lock.packages, profile.framework.layers), start=1)]


def import_names(profile: Profile) -> list[str]:
    """The modules the in-image check imports: the framework's companions the release pins."""
    return sorted(canonical_name(name).replace("-", "_") for name, _ in profile.release.companions)


def template_profile(profile: Profile) -> dict[str, str]:
    """The ``profile`` the templates see: its facts (:func:`~imagectl.matrix.facts.profile_facts`) under the
    template's names, unrecorded ones as ``""``, and the framework's check partial."""
    facts = profile_facts(profile)
    keys = {"name": "name", "framework": "framework", "version": "framework_version", "cuda": "cuda",
            "cudnn": "cudnn", "nccl": "nccl", "python": "python", "flavor": "flavor", "os": "os"}
    return {**{key: facts[fact] or "" for key, fact in keys.items()}, "check": profile.framework.check}


APT_CACHE_DIR = "/var/cache/imagectl/apt"  # the apt steps' cache mount: apt's lists and downloaded packages
PIP_CACHE_DIR = "/var/cache/imagectl/pip"  # the install steps' cache mount: the locked files, by name


def python_apt_packages(python: str) -> list[str]:
    """What the Python step asks apt for when the base lacks the profile's Python (with ``venv`` and ``ensurepip``)."""
    return [f"python{python}", f"python{python}-venv", "ca-certificates"]


def system_context(spec: ImageSpec) -> dict[str, Any]:
    """What the apt steps' templates read of the image's system lock: whether there is one, its file name and the
    ``name=version`` pins of each step (validated when the lock was read)."""
    lock = None if spec.on_user_base else spec.system_lock
    if lock is None:
        return {"locked": False, "file": "", "python": [], "jit": []}
    return {"locked": True, "file": spec.system_lock_file or lock.header.lock_id,
            "python": [p.pin for p in lock.packages("python")], "jit": [p.pin for p in lock.packages("jit")]}


def assembled(spec: ImageSpec, config: Config, netrc_file: str = "") -> bool:
    """Whether the build writes the lock's layers and ``/opt/imagectl``'s files itself (:mod:`imagectl.assemble`):
    the Dockerfile then ends with the system image (base, Python, venv, JIT packages, env, labels).  Not for
    extras on a user's base, nor with index credentials (pip's steps keep them in a stage of their own), nor with
    extra indexes (the wheels are fetched from the lock's index alone)."""
    return (not spec.on_user_base and not netrc_file and not config.pip_extra_index_urls
            and assembles_wheels(config.build_engine, config.build_install, spec.install_lock.header.oci_platform))


def render_context(spec: ImageSpec, config: Config, netrc_file: str = "") -> dict[str, Any]:
    """The template context of the image ``spec`` describes; ``netrc_file`` names the context's netrc file of
    index credentials (see :func:`pip_netrc`), if it has one.  Raises InputError for a bad extra requirement."""
    profile, lock, base = spec.profile, spec.install_lock, spec.pulled_base(config.mirrors)
    own = not spec.on_user_base  # the profile's own image (else: extras layered on the user's image)
    env = {**image_env(profile), "PIP_CONSTRAINT": CONSTRAINTS_PATH}
    return {
        "imagectl_version": __version__,
        "profile": template_profile(profile),
        "base_image": str(base),
        "python": profile.python,
        "apt_mirror": config.apt_mirror or "",
        "apt": {"mirror": config.apt_mirror or "", "snapshot": config.apt_snapshot or "", "cache_dir": APT_CACHE_DIR,
                "system_lock": spec.system_lock_file},
        "system": system_context(spec),
        "python_apt": python_apt_packages(profile.python),
        "cache_mounts": has_cache_mounts(config.build_engine),
        "assembled": assembled(spec, config, netrc_file),
        "jit_packages": jit_packages(profile),
        "ca_bundle": config.ca_bundle is not None,
        "pip": {
            "index_url": index_url(profile, config),
            "extra_index_urls": extra_index_urls(config),
            "trusted_hosts": sorted(config.pip_trusted_hosts),
            "netrc": netrc_file,
            "cache_dir": PIP_CACHE_DIR,
        },
        "packages": [f"{name}=={version}" for name, version in profile.packages],
        "extras": sorted(check_extra(e) for e in spec.extras),
        "lock": {
            "layers": layer_files(profile, lock),
            "path": LOCK_PATH,
            "constraints": CONSTRAINTS_PATH,
            "extras": EXTRAS_LOCK_FILE if spec.extras else "",
        },
        "lock_check": {"lock_path": LOCK_PATH, "extras_lock_path": EXTRAS_LOCK_PATH if spec.extras else "",
                       "imports": import_names(profile) if own else []},
        "constraints": dict(spec.installed),
        "labels": labels_for(spec, base),
        "env": dict(sorted(env.items())),
        "cuda_home": cuda_home(profile),
        "entry": entry_context(profile),
        "entrypoint": own,  # build --base keeps the base's ENTRYPOINT and CMD
    }
