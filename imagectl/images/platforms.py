"""The platforms of a build, and the image index that holds several (pure, but for reading binfmt_misc).

Which platforms ``build`` makes (:func:`chosen_platforms`): those ``--platform`` names (comma-separated), else the
configuration's ``[build] platforms``, else the host's.  Each must be one the profile's build has CUDA wheels for
(``matrices/platforms.toml``); with ``--all`` the configured list is cut to each profile's platforms instead.

How a platform's image is checked (:func:`check_mode`): natively where the host has that architecture, under QEMU
user emulation where binfmt_misc has an enabled handler for it (``/proc/sys/fs/binfmt_misc/qemu-aarch64``), else
not at all.  A build never makes an image it cannot check: the RUN steps of a foreign platform need the same
emulation (:func:`refuse_unbuildable`).

The index (:func:`index_manifest`): an OCI image index naming one image manifest per platform, each entry
annotated with how that image was checked (:data:`CHECK_ANNOTATION`: ``native``, ``emulated by qemu-aarch64`` or
``not checked on linux/arm64``), in the order the platforms were asked for.  Its build key (:func:`index_key`) is
derived from the children's keys, so an unchanged multi-platform build is found and reused by one tag listing.
"""

from __future__ import annotations

import hashlib
import json
import platform as host
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import InputError, OperationError
from ..matrix.model import AMD64, MACHINES, Profile
from ..matrix.platforms import platform_name, platform_of_machine
from .tester import BINFMT, emulator

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
CHECK_ANNOTATION = "dev.imagectl.check"  # on each entry of an index imagectl writes: how that image was checked
CheckHow = Literal["native", "emulated", "not checked"]


@dataclass(frozen=True)
class CheckMode:
    """How one platform's image can be checked on this host: ``native``, ``emulated`` (by ``emulator``, the
    binfmt_misc handler) or ``not checked``."""

    platform: str
    how: CheckHow
    emulator: str = ""

    def describe(self) -> str:
        """``native``, ``emulated by qemu-aarch64`` or ``not checked on linux/arm64`` (what the index records)."""
        if self.how == "emulated":
            return f"emulated by {self.emulator}"
        return "native" if self.how == "native" else f"not checked on {self.platform}"


@dataclass(frozen=True)
class IndexEntry:
    """One platform's image as an index names it: its manifest's media type, digest and size, and how it was
    checked (:meth:`CheckMode.describe`)."""

    platform: str
    media_type: str
    digest: str
    size: int
    checked: str


def parse_platforms(text: str, what: str = "--platform") -> tuple[str, ...]:
    """The platforms of a comma-separated list (``linux/amd64,arm64``), each named once, in the order given;
    raises InputError naming ``what`` for an empty list or a platform imagectl does not build."""
    return normalized_platforms([p for p in text.split(",")], what)


def normalized_platforms(names: Sequence[str], what: str) -> tuple[str, ...]:
    """``names`` as OCI platforms (:func:`platform_name`), duplicates dropped; raises InputError naming ``what``."""
    if not [n for n in names if n.strip()]:
        raise InputError(f"{what}: name at least one platform ({', '.join(MACHINES)})")
    found: list[str] = []
    for name in names:
        platform = platform_name(name, what)
        if platform not in found:
            found.append(platform)
    return tuple(found)


def chosen_platforms(profile: Profile, asked: tuple[str, ...], configured: tuple[str, ...], host: str, *,
                     every: bool = False) -> tuple[str, ...]:
    """The platforms ``build`` makes of ``profile`` (see the module docstring): ``asked`` (``--platform``), else
    ``configured`` (``[build] platforms``; with ``every``, ``--all``, cut to the profile's platforms), else
    ``host``.  Raises InputError for a platform the profile's build has no CUDA wheels for."""
    if asked:
        return offered_platforms(profile, asked, "--platform")
    if configured:
        if every:
            return tuple(p for p in configured if p in profile.platforms) or (profile.platforms[0],)
        return offered_platforms(profile, configured, "[build] platforms")
    return offered_platforms(profile, (host,), f"this host's platform ({host}; --platform chooses another)")


def offered_platforms(profile: Profile, platforms: tuple[str, ...], what: str) -> tuple[str, ...]:
    """``platforms`` when ``profile``'s build has CUDA wheels for each; raises InputError naming ``what`` otherwise."""
    for platform in platforms:
        if platform not in profile.platforms:
            why = dict(profile.variant.platform_sources).get(platform)
            raise InputError(f"{what}: {profile.name} has no CUDA wheels for {platform} (its platforms: "
                             f"{', '.join(profile.platforms)}, matrices/platforms.toml){': ' + why if why else ''}")
    return platforms


def check_mode(platform: str, host: str, binfmt: Path = BINFMT) -> CheckMode:
    """How ``platform``'s image can run on this ``host`` platform (see the module docstring)."""
    if platform == host:
        return CheckMode(platform, "native")
    handler = emulator(platform, binfmt)
    return CheckMode(platform, "emulated", handler) if handler else CheckMode(platform, "not checked")


def refuse_unbuildable(platforms: Sequence[str], host: str, engine_name: str, binfmt: Path = BINFMT) -> None:
    """Refuse, before anything is planned, a build of ``platforms`` this host and engine cannot make and check.

    Raises InputError for a foreign platform with the Docker engine (its image store holds one platform per name:
    Docker 20.10 records a foreign base as ``amd64`` and looks for the image on Docker Hub to run it; buildah
    builds any platform with ``--platform``), OperationError for a foreign platform without a QEMU handler in
    binfmt_misc (its RUN steps, and its check, cannot run here)."""
    foreign = [p for p in platforms if p != host]
    if foreign and engine_name == "docker":
        raise InputError(f"build --platform {foreign[0]}: the Docker engine builds this host's platform ({host}) "
                         "only; set [build] engine = \"buildah\" (buildah --platform, QEMU for the RUN steps)")
    for platform in foreign:
        if check_mode(platform, host, binfmt).how == "not checked":
            raise OperationError(f"build --platform {platform}: this {host} host cannot run {platform} programs "
                                 f"(no enabled QEMU handler in {binfmt}: apt-get install qemu-user-static "
                                 "binfmt-support), so neither the RUN steps nor the check can run; build it on "
                                 f"a {platform} host")


def index_key(keys: Mapping[str, str]) -> str:
    """The build key of an index of the images of build keys ``keys`` (platform -> key), in that order (pure)."""
    h = hashlib.sha256(b"imagectl-index-key-v1\0")
    for platform, key in keys.items():
        h.update(f"{platform}\0{key}\0".encode())
    return h.hexdigest()


def index_manifest(entries: Sequence[IndexEntry]) -> bytes:
    """The bytes of the OCI image index of ``entries``, in their order, each with its platform and how it was
    checked (:data:`CHECK_ANNOTATION`); the same entries give the same bytes (pure)."""
    manifests = []
    for entry in entries:
        os_name, _, arch = entry.platform.partition("/")
        manifests.append({"mediaType": entry.media_type, "digest": entry.digest, "size": entry.size,
                          "platform": {"architecture": arch, "os": os_name},
                          "annotations": {CHECK_ANNOTATION: entry.checked}})
    return json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}, indent=2,
                      sort_keys=True).encode() + b"\n"


def this_host(machine: str | None = None) -> str:
    """The OCI platform of this host (``machine``: a ``uname -m`` to use instead); ``linux/amd64`` for a CPU
    imagectl builds no images for (nothing is native there)."""
    return platform_of_machine(machine or host.machine()) or AMD64
