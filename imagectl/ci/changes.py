"""``--changed-since REF``: the profiles whose image would differ from the one built at git ref ``REF``.

The matrix as it was at ``REF`` is loaded from the files ``git show REF:path`` gives (into a temporary
directory) and compared, profile by profile, with the working tree's: a profile is changed when it is new
or when its data differs (its release's version, Pythons and companions, its CUDA variant, toolkit, OS,
flavour, base image, framework settings, or the build context rendered from them), or when its lock file
changed.  Data is compared,
not TOML text, so an edited comment rebuilds nothing.  A change to any template file changes every profile.

Git runs in the current working directory's repository (the CI checkout); matrix and template
directories outside it (the shipped ones of an installed imagectl, when the matrices live in your own
repository) count as unchanged.  :func:`changed_profiles` is pure; the rest talks to git through
``subprocess`` with argument lists, never a shell.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import ImagectlError, InputError
from ..image_spec import ImageSpec
from ..matrix.load import load_matrix
from ..matrix.sources import matrix_files
from ..matrix.model import Matrix, Profile
from ..matrix.names import list_profiles
from ..lock.store import lock_dirs
from ..lock.target import profile_lock_id
from ..render.context import render_context
from ..shipped import matrix_dirs, template_dirs


def fingerprint(profile: Profile, config: Config) -> tuple[Any, ...]:
    """Everything about a profile that shapes its image (data, not text; comments do not count)."""
    fw, release = profile.framework, profile.release
    framework = (fw.name, fw.label, fw.package, fw.companions, fw.cuda_tag, fw.index_url, fw.pypi_index_url, fw.check)
    return (framework, release.version, release.python, release.companions, profile.variant, profile.toolkit,
            profile.os, profile.flavor, profile.python, str(profile.base_image),
            render_context(ImageSpec(profile), config))


def changed_profiles(new: Sequence[Profile], old: Sequence[Profile] | None, config: Config, *,
                     templates_changed: bool) -> list[Profile]:
    """The profiles of ``new`` that are absent from ``old`` or differ from their namesake there.

    ``old`` is ``None`` when the old matrix could not be read (then, as when a template changed,
    every profile counts as changed).
    """
    if old is None or templates_changed:
        return list(new)
    before = {p.name: fingerprint(p, config) for p in old}
    return [p for p in new if before.get(p.name) != fingerprint(p, config)]


# --- git ----------------------------------------------------------------------------------------


def git(args: Sequence[str], cwd: Path) -> str:
    """Run ``git ARGS`` in ``cwd`` and return its stdout.

    Raises:
        InputError: git is not installed, or the command failed (its stderr's first line is given).
    """
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise InputError("--changed-since needs git, which is not installed") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["failed"])[0]
        raise InputError(f"git {args[0]}: {first}")
    return done.stdout


def repo_root(cwd: Path) -> Path:
    """The top directory of the git repository holding ``cwd``.

    Raises:
        InputError: ``cwd`` is not inside a git repository (or git is missing).
    """
    try:
        return Path(git(["rev-parse", "--show-toplevel"], cwd).strip()).resolve()
    except InputError as exc:
        raise InputError(f"--changed-since: {cwd} is not inside a git repository ({exc})") from None


def resolve_ref(root: Path, ref: str) -> str:
    """The commit id ``ref`` names.

    Raises:
        InputError: ``ref`` starts with ``-`` or names no commit.
    """
    if not ref or ref.startswith("-"):
        raise InputError(f"--changed-since {ref!r}: not a git ref")
    try:
        return git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root).strip()
    except InputError:
        raise InputError(f"--changed-since {ref!r}: no such commit in {root}") from None


def changed_paths(root: Path, commit: str) -> set[Path]:
    """Absolute paths of files that differ between ``commit`` and the working tree, untracked ones included.

    Raises:
        InputError: git failed.
    """
    listed = git(["diff", "--name-only", "--no-renames", "-z", commit, "--"], root)
    untracked = git(["ls-files", "--others", "--exclude-standard", "-z"], root)
    return {(root / name).resolve() for name in (listed + untracked).split("\0") if name}


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root)


def export_matrix_dir(root: Path, commit: str, directory: Path, dest: Path) -> None:
    """Write the ``*.toml`` files ``directory`` held at ``commit`` into ``dest`` (the current ones when
    ``directory`` is outside the repository; none when it did not exist then).

    Raises:
        InputError: git failed.
    """
    dest.mkdir(parents=True)
    if not _inside(directory, root):
        for path in matrix_files([directory]):
            shutil.copyfile(path, dest / path.name)
        return
    rel = directory.resolve().relative_to(root).as_posix()
    prefix = "" if rel == "." else rel + "/"
    names = git(["ls-tree", "--name-only", "-z", commit, "--", prefix or "."], root).split("\0")
    for name in filter(None, names):
        base = name.removeprefix(prefix)
        if "/" not in base and base.endswith(".toml"):
            done = subprocess.run(["git", "show", f"{commit}:{name}"], cwd=root, capture_output=True, check=False)
            if done.returncode != 0:
                raise InputError(f"git show {commit}:{name}: {done.stderr.decode(errors='replace').strip()}")
            (dest / base).write_bytes(done.stdout)


def old_matrix(root: Path, commit: str, dirs: Sequence[Path]) -> Matrix | None:
    """The matrix as it was at ``commit``, or ``None`` when it could not be loaded then.

    Raises:
        InputError: git failed.
    """
    with tempfile.TemporaryDirectory(prefix="imagectl-changed-") as tmp:
        exported = [Path(tmp) / str(i) for i in range(len(dirs))]
        for directory, dest in zip(dirs, exported, strict=True):
            export_matrix_dir(root, commit, directory, dest)
        try:
            return load_matrix(exported)
        except ImagectlError:
            return None


def profiles_changed_since(ref: str, cwd: Path, matrix: Matrix, config: Config,
                           framework: str | None = None) -> list[Profile]:
    """The profiles of ``matrix`` (read from ``config``'s matrix directories; of ``framework`` only, when given)
    changed since git ref ``ref``.

    Raises:
        InputError: not in a git repository, an unknown ref, or git failed.
    """
    root = repo_root(cwd)
    commit = resolve_ref(root, ref)
    paths = changed_paths(root, commit)
    templates = [d.resolve() for d in template_dirs(config) if _inside(d, root)]
    templates_changed = any(p.is_relative_to(t) for p in paths for t in templates)
    before = old_matrix(root, commit, matrix_dirs(config))
    old = _profiles(before, framework) if before is not None else None
    current = list_profiles(matrix, framework)
    changed = {p.name for p in changed_profiles(current, old, config, templates_changed=templates_changed)}
    relocked = changed_locks(paths, config)
    return [p for p in current
            if p.name in changed or any(profile_lock_id(p, platform) in relocked for platform in p.platforms)]


def changed_locks(paths: set[Path], config: Config) -> set[str]:
    """The lock ids of the changed lock files among ``paths`` (``<lock dir>/<lock id>.txt``, see
    :mod:`imagectl.lock.store`): a profile whose lock changed installs something else."""
    dirs = {d.resolve() for d, _ in lock_dirs(config)}
    return {p.stem for p in paths if p.suffix == ".txt" and p.parent in dirs}


def _profiles(matrix: Matrix, framework: str | None) -> list[Profile] | None:
    try:
        return list_profiles(matrix, framework)
    except ImagectlError:
        return None
