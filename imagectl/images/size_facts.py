"""Where an expected size's inputs come from (:mod:`.size` computes it): the wheels' sizes, the base's manifest, the
rendered files.

A wheel's sizes (:class:`~.size.WheelSize`) are read, cheapest first:

1. from the wheel cache, where an assembled build downloaded it (``cache_dir()/wheels/<sha256>/<file>``): the file's
   size and its zip central directory, no request;
2. from the ``wheel-size`` cache entries (:mod:`imagectl.cache`, keyed by the sha256 the index lists for the file),
   which step 3 writes;
3. only where asked (``build --plan``, and ``build`` when a size budget applies): the project's page on the lock's
   index (one request per package, as the assembled build's download makes), the file the build would install
   (:func:`~imagectl.assemble.fetch.pick_wheel`), its size from the page (PEP 700 ``size``, JSON pages), and its
   central directory by HTTP Range requests (:mod:`imagectl.pypi.rangezip`: the zip's last 64 KiB and the
   directory, never the file).  An index that answers no Range request gives the file's size only (its members
   stay unknown, and so does the ``.pyc`` estimate).

The base's layers are read from its manifest (one or two GETs at the registry the build pulls it from, for the plan's
platform).  ``show`` reads neither an index nor a registry (:func:`profile_size`): what steps 1 and 2 know, the rest
"unknown (not fetched)".
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import Kind, cache_dir, cached, peek
from ..config import Config
from ..errors import ImagectlError, PackageIndexError
from ..image_spec import ImageSpec
from ..lock.layers import split_layers
from ..lock.lockfile import Lock, LockedPackage, canonical_name
from ..matrix.model import Profile
from ..redact import redact, userinfo_secrets
from ..reference import Reference
from .size import BaseLayers, ExpectedSize, SizeInputs, WheelSize, expected_size

if TYPE_CHECKING:
    import requests
    from packaging.tags import Tag

    from ..pypi.simple import DistFile
    from ..pypi.transport import IndexSettings
    from .plan import Plan

FETCH_JOBS = 4  # packages sized at once (each: one index page, two or three Range requests)
# the files of the /opt/imagectl layer, as the build context names them (imagectl.images.assembled._files_layer; and
# render.context.EXTRAS_LOCK_FILE, not imported: show loads nothing of rendering)
FILES_LAYER = ("lock.txt", "constraints.txt", "imagectl-check.py", "imagectl-entry.sh", "extra-requirements.txt",
               "extras-lock.txt")
NOT_FETCHED = "not fetched: show reads no index (build --plan does)"


def _encode(size: WheelSize) -> str:
    return json.dumps(asdict(size), sort_keys=True)


def _decode(text: str) -> WheelSize:
    data = json.loads(text)
    return WheelSize(str(data["filename"]), *(_count(data[key]) for key in ("size", "unpacked", "py", "py_files")))


def _count(value: object) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ValueError(f"not a byte count: {value!r}")


WHEEL_SIZE: Kind[WheelSize] = Kind("wheel-size", _encode, _decode, keep=4096)


def members_size(filename: str, size: int, infos: Sequence[zipfile.ZipInfo]) -> WheelSize:
    """A wheel's sizes from its central directory's entries (pure): every member's bytes, and its ``.py`` members'
    (outside ``.dist-info`` and ``.data/scripts``: those the image's Python compiles)."""
    files = [i for i in infos if not i.is_dir()]
    py = [i for i in files if i.filename.endswith(".py") and ".dist-info/" not in i.filename
          and ".data/scripts/" not in i.filename]
    return WheelSize(filename, size, sum(i.file_size for i in files), sum(i.file_size for i in py), len(py))


def local_wheel_size(path: Path) -> WheelSize | None:
    """The sizes of the wheel file at ``path`` (its size and central directory); None when it cannot be read."""
    try:
        with zipfile.ZipFile(path) as archive:
            return members_size(path.name, path.stat().st_size, archive.infolist())
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
        return None


def _pick(candidates: list[DistFile], package: LockedPackage, python: str, platform: str) -> DistFile | None:
    """The candidate the build would install (one alone is taken as it is: nothing heavier is imported for it)."""
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    from ..assemble.fetch import pick_wheel, supported_tags  # packaging.tags and requests: only when several fit
    from ..errors import BuildError

    try:
        return pick_wheel(candidates, package, supported_tags(python, platform))
    except (BuildError, ImagectlError):
        return None


def _dist(filename: str, sha256: str) -> DistFile:
    from ..pypi.simple import DistFile

    return DistFile(filename, "", {"sha256": sha256})


def known_wheel(package: LockedPackage, python: str, platform: str, wheels: Path | None, *,
                entries: bool = True) -> WheelSize | None:
    """What the wheel cache (``wheels``; None: there is none) or the ``wheel-size`` entries (``entries``: there may
    be some) know of ``package``'s wheel for CPython ``python`` on ``platform`` (a lock header's,
    ``x86_64-manylinux_2_28``); None when neither does.  No request."""
    on_disk = [_dist(name, digest) for digest in package.hashes for name in _listing(wheels / digest)
               if name.endswith(".whl")] if wheels is not None else []
    picked = _pick(on_disk, package, python, platform)
    if picked is not None:
        found = local_wheel_size(wheels / picked.hashes["sha256"] / picked.filename) if wheels is not None else None
        if found is not None:
            return found
    if not entries:
        return None
    peeked = peek(WHEEL_SIZE, [{"sha256": digest} for digest in package.hashes])
    sized = {digest: entry for digest, entry in zip(package.hashes, peeked, strict=True) if entry is not None}
    picked = _pick([_dist(e.filename, d) for d, e in sized.items()], package, python, platform)
    return sized[picked.hashes["sha256"]] if picked is not None else None


def _listing(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def remote_wheel_size(session: requests.Session, index: str, package: LockedPackage, tags: Sequence[Tag],
                      settings: IndexSettings) -> WheelSize:
    """``package``'s wheel as the build would pick it on ``index``: its size from the page, its members from its
    central directory by Range requests (cached by the file's listed sha256; an index that refuses Range gives the
    size alone).  Raises PackageIndexError (the page), BuildError (no file fits)."""
    from ..assemble.fetch import pick_wheel
    from ..pypi.simple import project_files

    file = pick_wheel(project_files(index, package.name, session, settings), package, tags, index_url=index)
    listed = file.hashes.get("sha256")
    try:
        if listed:
            return cached(WHEEL_SIZE, {"sha256": listed}, lambda: _range_read(session, file, settings))
        return _range_read(session, file, settings)
    except PackageIndexError:
        return WheelSize(file.filename, file.size)


def _range_read(session: requests.Session, file: DistFile, settings: IndexSettings) -> WheelSize:
    """The file's sizes from its central directory, read by Range requests.  Raises PackageIndexError."""
    from ..pypi.rangezip import RangeReader
    from ..pypi.transport import index_error

    reader = RangeReader(session, file.url, settings)
    try:
        with zipfile.ZipFile(reader) as archive:
            return members_size(file.filename, reader.size, archive.infolist())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise index_error(file.url, f"not a readable wheel (zip): {exc}") from None


@contextmanager
def _index_session(settings: IndexSettings, config: Config) -> Iterator[requests.Session]:
    from ..assemble.fetch import _session  # the wheel download's session: [build] ca_bundle its only trust store

    with _session(settings, config.ca_bundle) as session:
        yield session


def wheel_sizes(packages: Sequence[LockedPackage], lock: Lock, python: str, config: Config, *,
                fetch: bool) -> tuple[dict[str, WheelSize], str]:
    """canonical name -> sizes of every package's wheel that is known (:func:`known_wheel`), and with ``fetch``
    read from the lock's index for the rest (:func:`remote_wheel_size`, a few at a time); and the note of those left
    unknown.  Raises nothing of imagectl's own: an index that cannot be read leaves its packages unknown, the note
    says why (redacted)."""
    header, folder = lock.header, cache_dir()
    names = _listing(folder)  # one listing: most runs of show find no wheel and no sizes there, and ask no more
    wheels = folder / "wheels" if "wheels" in names else None
    entries = any(name.startswith(f"{WHEEL_SIZE.name}-") for name in names)
    found = {canonical_name(p.name): w for p in packages
             if (w := known_wheel(p, python, header.platform, wheels, entries=entries)) is not None}
    missing = [p for p in packages if canonical_name(p.name) not in found]
    if not fetch or not missing:
        return found, NOT_FETCHED
    from concurrent.futures import ThreadPoolExecutor

    from ..assemble.fetch import supported_tags
    from ..pypi.transport import index_settings

    settings = index_settings(config.pip_timeout)
    try:
        tags = supported_tags(python, header.platform)

        def one(package: LockedPackage) -> WheelSize:
            with _index_session(settings, config) as session:
                return remote_wheel_size(session, header.index, package, tags, settings)

        with ThreadPoolExecutor(max_workers=FETCH_JOBS) as pool:
            found.update((canonical_name(p.name), w) for p, w in zip(missing, pool.map(one, missing), strict=True))
    except ImagectlError as exc:
        return found, f"not fetched: {redact(str(exc), userinfo_secrets(header.index))}"
    return found, NOT_FETCHED


def base_layers(spec: ImageSpec, platform: str, config: Config) -> BaseLayers:
    """The base image the build pulls (``spec.pulled_base``, pinned to its digest), its layers for ``platform``
    (``linux/amd64``) as its manifest lists them.  Raises RegistryError (and InputError for a bad timeout)."""
    from ..registry.access import client_for
    from ..registry.manifest import is_platform_entry, pick_platform

    ref = spec.pulled_base(config.mirrors)
    os_name, _, arch = platform.partition("/")
    with client_for(ref.domain, config.insecure_hosts, config.registry_timeout) as client:
        top = client.get_manifest(ref.path, ref.digest or ref.tag or "latest")
        image = top
        if top.is_index:
            entry = pick_platform([c for c in top.children() if is_platform_entry(c)], os_name, arch.split("/")[0])
            image = client.get_manifest(ref.path, entry.digest)
    shown = Reference(ref.domain, ref.path, ref.tag, None).familiar
    return BaseLayers(shown, top.digest, tuple(layer.size for layer in image.layers()))


def plan_lock_groups(plan: Plan) -> tuple[tuple[str, tuple[LockedPackage, ...]], ...]:
    """The install layers ``plan``'s image gets (its lock's, then the extras'; on a user's base the extras' alone)."""
    from ..render.context import EXTRAS_LOCK_FILE
    from .assembled import layer_groups

    groups = layer_groups(plan)
    if plan.spec.on_user_base:
        groups = [g for g in groups if g.file == EXTRAS_LOCK_FILE]
    return tuple((g.name, g.packages) for g in groups)


def plan_size(plan: Plan, config: Config) -> ExpectedSize:
    """The expected size of ``plan``'s image (``build --plan``, and a build a budget applies to): every wheel known
    or read from the index, the base's manifest read from its registry; what cannot be read is unknown, with why.
    Raises nothing of imagectl's own."""
    from ..render.context import assembled
    from .plan import pushed_compression

    groups = plan_lock_groups(plan)
    packages = [p for _, packages in groups for p in packages]
    wheels, note = wheel_sizes(packages, plan.spec.install_lock, plan.request.profile.python, config, fetch=True)
    base, base_note = None, "not fetched"
    try:
        base = base_layers(plan.spec, plan.platform, config)
    except ImagectlError as exc:
        base_note = f"its manifest cannot be read: {exc}"
    if base is not None and pushed_compression(config) == "zstd":
        base = replace(base, note="their size as its registry holds them: this build pushes them again as zstd")
    writes = assembled(plan.spec, config, "netrc" if plan.netrc else "")
    stored = writes and pushed_compression(config) == "gzip"
    files = {name: plan.files[name] for name in FILES_LAYER if name in plan.files}
    return expected_size(SizeInputs(groups, wheels, note, base, base_note, files,
                                    kind="stored" if stored else "compressed", pyc_layer=writes))


def own_image_assembled(profile: Profile, lock: Lock, config: Config) -> bool:
    """:func:`imagectl.render.context.assembled` for the profile's own image (no user base, no extras), without
    loading rendering (``show``): no extra index, no credentials in the index URL (they make a netrc), and an engine
    that assembles wheels (``tests/unit/images/test_size.py`` holds the two to one answer)."""
    from ..engine.features import assembles_wheels
    from ..grammar import url_credentials
    from ..pip_index import configured_index

    index = configured_index(profile, config)
    return (not config.pip_extra_index_urls and not (index and url_credentials(index))
            and assembles_wheels(config.build_engine, config.build_install, lock.header.oci_platform))


def profile_size(profile: Profile, lock: Lock | None, config: Config) -> ExpectedSize | None:
    """What ``show`` says of ``profile``'s size with ``lock`` (None: locked at build time: nothing to say): the
    wheels the caches know; no index, no registry, no rendering."""
    if lock is None:
        return None
    groups = tuple(split_layers(lock.packages, profile.framework.layers))
    wheels, note = wheel_sizes([p for _, packages in groups for p in packages], lock, profile.python, config,
                               fetch=False)
    writes = own_image_assembled(profile, lock, config)
    stored = writes and (config.registry_compression == "gzip")
    return expected_size(SizeInputs(groups, wheels, note, None, "not fetched: show reads no registry (build --plan "
                                    "reads the base's manifest)", None, kind="stored" if stored else "compressed",
                                    pyc_layer=writes))
