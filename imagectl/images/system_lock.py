"""Making a system lock (:mod:`imagectl.lock.system`), and the one a build installs.

:func:`make_system_lock` asks apt in the base image itself: the base is pinned by digest (as a build pins it), pulled,
and ``templates/system-lock.sh.j2`` runs in a throw-away container of it: the sources as the apt steps set them
(``[apt] snapshot`` or ``mirror``), ``apt-get update``, then ``apt-get install --simulate`` of what each step would
install (the Python step only where the base lacks the profile's Python; the JIT step only the packages the base
lacks, after the Python step's).  Every ``Inst`` line apt prints is a package of the lock, with the version and archive
apt chose: nothing is guessed.

:func:`with_system_lock` is what planning uses: the profile's system lock file, if there is one, is attached to the
image; once the base digest is known, :func:`check_system_base` refuses a lock made on another digest (its versions
were chosen against that base's packages).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace

from ..config import Config
from ..engine import Engine
from ..errors import InputError, OperationError
from ..image_spec import ImageSpec
from ..lock.lockfile import DEFAULT_PLATFORM
from ..lock.system import STEPS, SUFFIX, SystemLock, SystemLockHeader, parse_simulation
from ..lock.system_store import find_system_lock
from ..matrix.model import Profile
from ..render.context import render_context
from ..render.dockerfile import make_environment, render_template
from ..shipped import template_dirs
from .base_digest import resolve_base_digest

PROBE_TEMPLATE = "system-lock.sh.j2"
MARKER = "imagectl-step "


def with_system_lock(spec: ImageSpec, config: Config, platform: str = DEFAULT_PLATFORM,
                     log: Callable[[str], None] = lambda line: None) -> ImageSpec:
    """``spec`` with its profile's system lock for ``platform`` attached, when there is one (never on a user's base:
    no apt step runs there); raises InputError for a system lock file that cannot be read."""
    if spec.on_user_base:
        return spec
    found = find_system_lock(spec.profile, config, platform)
    if found is None:
        return spec
    log(f"system lock {found.path.name} ({found.origin}: {found.path}, sha256 {found.lock.sha256[:12]})")
    return replace(spec, system_lock=found.lock, system_lock_file=found.path.name)


def check_system_base(spec: ImageSpec) -> None:
    """Raises InputError when ``spec``'s system lock was made on another base digest than the one it is pinned to."""
    lock = spec.system_lock
    if lock is None or not spec.base_digest or lock.header.digest == spec.base_digest:
        return
    raise InputError(f"system lock {spec.system_lock_file} was made on {lock.header.base}@{lock.header.digest}; the "
                     f"base is now {spec.base_digest}: remake it with 'imagectl lock {spec.profile.name} --system'")


def archive_of(config: Config) -> str:
    """The archive the apt steps read, as the header says it."""
    if config.apt_snapshot:
        return f"snapshot {config.apt_snapshot} (snapshot.debian.org / snapshot.ubuntu.com)"
    if config.apt_mirror:
        return f"mirror {config.apt_mirror}"
    return "the base image's apt sources"


def read_probe(output: str) -> tuple[tuple[str, tuple, str], ...]:
    """Each step's packages (and why none) from the probe's output; the JIT step's without the Python step's (it
    runs after it).  Raises OperationError when a step's marker is missing, ValidationError for a bad package."""
    sections: dict[str, tuple[list[str], str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith(MARKER):
            step, _, why = line[len(MARKER):].partition(": ")
            current = step.strip()
            sections[current] = ([], why.strip())
        elif current is not None:
            sections[current][0].append(line)
    missing = [step for step in STEPS if step not in sections]
    if missing:
        raise OperationError(f"system lock: the probe in the base image said nothing of the {missing[0]} step")
    python = parse_simulation("\n".join(sections["python"][0]))
    jit = tuple(p for p in parse_simulation("\n".join(sections["jit"][0])) if p.name not in {q.name for q in python})
    return (("python", python, sections["python"][1]), ("jit", jit, sections["jit"][1] or "nothing to install"))


def make_system_lock(profile: Profile, config: Config, engine: Engine,
                     log: Callable[[str], None] = lambda line: None, today: dt.date | None = None) -> SystemLock:
    """Ask apt in ``profile``'s base image (pinned by digest, pulled) which exact packages its apt steps install (see
    the module docstring), for linux/amd64 (the probe runs natively).  Raises BuildError when the base cannot be
    pinned, OperationError when the probe fails, ValidationError for a package that fails the grammar."""
    spec = ImageSpec(profile)
    resolved = resolve_base_digest(spec.pulled_base(config.mirrors), config, engine)
    if not resolved.digest:
        raise OperationError(f"system lock: cannot pin {spec.public_base.familiar} to a digest")
    spec = replace(spec, base_digest=resolved.digest, base_source=resolved.source)
    pinned = spec.pulled_base(config.mirrors)
    log(f"asking apt in {pinned}")
    env = make_environment(template_dirs(config))
    script = render_template(env, PROBE_TEMPLATE, render_context(spec, config))
    image = engine.pull(str(pinned), log)
    code, output = engine.run(image.id, ["sh", "-c", script], config.build_network)
    if code != 0:
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise OperationError(f"system lock: apt in {pinned} failed (exit {code}): {tail}")
    steps = read_probe(output)
    source = (f"apt-get install --simulate in the base image ({engine.name}); remake: imagectl lock {profile.name} "
              "--system")
    asked = (today or dt.datetime.now(dt.timezone.utc).date()).isoformat()
    header = SystemLockHeader(profile.framework.name, profile.base_image.familiar, resolved.digest, profile.python,
                              DEFAULT_PLATFORM, archive_of(config), asked, source)
    return SystemLock(header, steps)


def same_packages(a: SystemLock, b: SystemLock) -> bool:
    """Whether two system locks pin the same packages on the same base digest from the same archive (the day asked
    and the engine aside)."""
    return (a.steps, a.header.digest, a.header.archive) == (b.steps, b.header.digest, b.header.archive)


def system_lock_file(lock: SystemLock) -> str:
    """The file name of ``lock``."""
    return lock.header.lock_id + SUFFIX
