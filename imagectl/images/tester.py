"""``imagectl test``: run the in-image check of a profile's current image or of any image.

A profile's current image is what its moving tag points to.  With a registry configured that is the
registry's moving tag, read by digest (one HEAD) and tested as ``REPO@DIGEST``, pulled when the engine lacks
it: after a rollback (here or on another machine) the local ``REPO:latest`` may still be the image rolled back
from, and a test must not report on that.  Without a registry it is the local ``REPO:latest``.

A multi-platform image (an OCI image index or a Docker manifest list, read from the registry by the reference
tested: the profile's moving tag, or an image reference that names its registry) is tested by one of its
children, pulled by its own digest (``REPO@CHILD``) and run: the host's platform (``platform.machine()``:
``x86_64`` is ``linux/amd64``, ``aarch64`` ``linux/arm64``), or the one ``platform`` names.  Another platform
than the host's runs under emulation where binfmt_misc has an enabled QEMU handler for it
(``/proc/sys/fs/binfmt_misc/qemu-aarch64``); without one it is not run (OperationError: nothing is reported ok
that did not run).  The findings then start with ``platform``: the platform tested, natively or emulated, and how
long its check took.  A single-platform image in a registry is tested as before; asked for another platform than
its config's, it fails.  A reference that names no registry (a local image) is run as the engine has it.
"""

from __future__ import annotations

import platform as host
import time
from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..engine import Engine, LineSink
from ..errors import OperationError, RegistryError, UnknownProfileError, ValidationError
from ..imagecheck.compare import Finding
from ..imagecheck.run import check_findings
from ..matrix.model import Matrix
from ..matrix.names import resolve_profile
from ..matrix.platforms import platform_name, platform_of_machine
from ..reference import names_registry, parse_reference
from ..tags.managed import open_tag_store
from ..tags.naming import LOCAL_DOMAIN, MOVING_TAG, moving_reference, repository, short_digest
from ..tags.store import RegistryTagStore, TagStore

BINFMT = Path("/proc/sys/fs/binfmt_misc")


@dataclass(frozen=True)
class Picked:
    """The image a test runs: ``image`` (``REPO@DIGEST`` of one platform's image, or the reference as given), its
    ``platform`` ("" when not read from a registry), the binfmt_misc handler that runs it when it is not the
    host's (``qemu-aarch64``; "" native) and the index it was picked from ("" for none)."""

    image: str
    platform: str = ""
    emulator: str = ""
    index: str = ""


def target_image(target: str, matrix: Matrix, config: Config, engine: Engine) -> str:
    """The image a ``test`` target means: a profile's current image (see the module docstring), else ``target``
    as an image reference.

    Raises ValidationError when it is neither, OperationError when the registry has no moving tag for the
    profile, RegistryError when the registry cannot be asked.
    """
    return _target(target, matrix, config, engine)[0]


def _target(target: str, matrix: Matrix, config: Config, engine: Engine) -> tuple[str, TagStore | None]:
    """(:func:`target_image`, the tag store of its registry repository: None for an image that names none)."""
    try:
        profile = resolve_profile(target, matrix)
    except UnknownProfileError as profile_error:
        try:
            ref = parse_reference(target)
        except ValidationError:
            raise ValidationError(f"test: {target!r} is neither a profile nor an image reference "
                                  f"({profile_error})") from None
        if ref.domain == LOCAL_DOMAIN or not names_registry(target):
            return ref.familiar, None
        from ..registry.access import client_for  # here: the registry package loads requests

        client = client_for(ref.domain, config.insecure_hosts, config.registry_timeout)
        return ref.familiar, RegistryTagStore(client, ref)
    if not config.registry_url:
        return moving_reference(profile.name, config).familiar, None
    repo = repository(profile.name, config)
    store = open_tag_store(repo, config, engine)
    digest = store.digest(MOVING_TAG)
    if digest is None:
        raise OperationError(f"test: {repo.familiar}:{MOVING_TAG} does not exist in the registry"
                             " (build or import it first)")
    return f"{repo.familiar}@{digest}", store


def host_platform(machine: str | None = None) -> str:
    """The OCI platform of this host (``machine``: a ``uname -m`` to use instead); raises OperationError for a CPU
    imagectl builds no images for."""
    machine = machine or host.machine()
    found = platform_of_machine(machine)
    if found is None:
        raise OperationError(f"test: this host's CPU ({machine}) is none of the platforms imagectl builds")
    return found


def emulator(platform: str, binfmt: Path = BINFMT) -> str:
    """The enabled binfmt_misc handler that runs ``platform``'s programs on this host (``qemu-aarch64`` for
    ``linux/arm64``), or "" when there is none."""
    machine = {"linux/arm64": "aarch64", "linux/amd64": "x86_64"}.get(platform, platform.rpartition("/")[2])
    try:
        state = (binfmt / f"qemu-{machine}").read_text(encoding="ascii", errors="replace").split("\n", 1)[0]
    except OSError:
        return ""
    return f"qemu-{machine}" if state.strip() == "enabled" else ""


def pick_image(image: str, store: TagStore | None, platform: str | None = None, *, binfmt: Path = BINFMT,
               machine: str | None = None) -> Picked:
    """What a test of ``image`` runs (see the module docstring): an index's child for ``platform`` (default: the
    host's), read through ``store``, the tag store of its registry repository; with no store (a reference that
    names no registry), or a registry that cannot be read and no ``platform`` asked, ``image`` as given (the
    engine resolves it, as it pulls it), on the host's platform only.

    Raises InputError for a platform imagectl does not know, OperationError when the image has no such platform,
    cannot run here, or is not in the registry, RegistryError when the registry cannot be read.
    """
    wanted = platform_name(platform) if platform else host_platform(machine)
    if store is None:
        if platform and wanted != host_platform(machine):
            raise OperationError(f"test --platform {wanted}: {image} names no registry, so its platforms cannot be "
                                 "read; name it with its registry (HOST/REPOSITORY:TAG)")
        return Picked(image)
    ref = parse_reference(image)
    try:
        digest = ref.digest or store.digest(ref.tag or MOVING_TAG)
        entries = [c for c in store.children(digest) if not c.attachment] if digest else []
    except RegistryError:
        if platform:
            raise
        return Picked(image)  # unreadable here (a registry only the engine's mirror reaches): the engine pulls it
    if digest is None:
        raise OperationError(f"test: the registry has no image {image}")
    if not entries:
        if not platform:
            return Picked(image)
        found = next((i.platform for i in store.platforms(digest) if i.platform), "")
        if found != wanted:
            raise OperationError(f"test: {image} is a {found or 'single-platform'} image only, not {wanted}")
        return _runnable(Picked(f"{ref.repository}@{digest}", wanted), machine, binfmt)
    child = next((c for c in entries if c.platform == wanted), None)
    if child is None:
        have = ", ".join(c.platform or short_digest(c.digest) for c in entries)
        raise OperationError(f"test: {image} has no {wanted} image (its platforms: {have})")
    return _runnable(Picked(f"{ref.repository}@{child.digest}", wanted, index=digest), machine, binfmt)


def _runnable(picked: Picked, machine: str | None, binfmt: Path) -> Picked:
    """``picked`` with the emulator that runs it here; raises OperationError when another platform's has none."""
    here = host_platform(machine)
    if picked.platform == here:
        return picked
    handler = emulator(picked.platform, binfmt)
    if not handler:
        raise OperationError(f"test: {picked.platform} cannot run on this {here} host: {binfmt} has no enabled QEMU "
                             "handler for it (qemu-user-static, binfmt-support); not checked")
    return Picked(picked.image, picked.platform, handler, picked.index)


def check_image(  # noqa: PLR0913 - what ``imagectl test`` was given, as cli/building.py passes it
        target: str, matrix: Matrix, config: Config, engine: Engine, log: LineSink, *,
        gpu: bool = False, platform: str | None = None) -> tuple[str, list[Finding]]:
    """``(image, findings)`` for ``target``; pulls the image when the engine lacks it.  For a multi-platform
    image, ``image`` is the child tested (``platform``, default the host's) and the findings start with the
    platform, native or emulated (see the module docstring).

    Raises InputError for an unknown platform, OperationError if the image (or that platform of it) cannot be had
    or run, or its check does not run, RegistryError when the registry cannot be asked.
    """
    picked = pick_image(*_target(target, matrix, config, engine), platform)
    if picked.platform:
        how = f"emulated by {picked.emulator}" if picked.emulator else "native"
        of = f" of index {short_digest(picked.index)}" if picked.index else ""
        log(f"testing the {picked.platform} image {short_digest(picked.image.rpartition('@')[2])}{of} ({how})")
    image = picked.image
    info = engine.inspect(image)
    if info is None and parse_reference(image).domain == LOCAL_DOMAIN:  # a local-only name: never pulled
        raise OperationError(f"test: the engine has no image {image} (local images are never pulled: build it "
                             "first, or configure [registry] url)")
    info = info or engine.pull(image, log)
    started = time.monotonic()
    try:
        findings = check_findings(engine, info.id, dict(info.labels), config.build_network, gpu=gpu)
    except OperationError as exc:
        raise OperationError(f"test {image}: {exc}") from None
    if not picked.platform:
        return image, findings
    return image, [platform_finding(picked, time.monotonic() - started), *findings]


def platform_finding(picked: Picked, seconds: float) -> Finding:
    """The finding that says which platform ran, natively or emulated, and how long its check took (pure)."""
    how = f"emulated by {picked.emulator}" if picked.emulator else "native"
    return Finding("platform", picked.platform, f"{picked.platform} ({how}, {seconds:.1f} s)", ok=True)
