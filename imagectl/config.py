"""imagectl.toml: finding it, reading it, environment overrides, and validating every key.

Where the configuration comes from, first match wins: ``--config PATH`` (passed in as ``path``),
``$IMAGECTL_CONFIG``, ``./imagectl.toml``; no file at all is a valid, empty configuration.  Then each
``IMAGECTL_<SECTION>_<KEY>`` variable replaces one key (lists are comma-separated), and
``IMAGECTL_MIRRORS`` replaces the whole mirror table (``docker.io=mirror.example.com/hub,ghcr.io=...``).
Relative paths resolve against the directory of the file that names them (the working directory for
variables).
"""

from __future__ import annotations

import datetime as dt
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from . import paths
from .errors import ConfigError, ValidationError
from .reference import parse_reference
from .tomlfile import load_toml
from .grammar import check_byte_size, check_env_name, check_host, check_text, check_url, url_credentials
from .redact import redact

NETWORK_MODES = ("default", "host", "bridge", "none")
COMPRESSIONS = ("gzip", "zstd")  # [registry] compression of pushed layers: gzip (default: every runtime reads it)
ENGINES = ("auto", "docker", "buildah")  # [build] engine (imagectl.engine.select)
NODE_RUNTIMES = ("auto", "both", "legacy", "cdi")  # [node] runtime: the container runtime mode compat judges
INSTALLS = ("assembled", "pip")  # [build] install: how the lock's wheels reach the image (imagectl.engine.features)
MAX_MIN_AGE_DAYS = 36500  # prune's age floor ([tags] prune_min_age_days, --min-age-days): 100 years at most
MAX_REGISTRY_TIMEOUT_S = 3600  # [registry] and [pip] timeout: the deadline of one request, an hour at most
MAX_REFERRERS = 100_000  # [registry] max_referrers: the most referrers bases sync and import copy per image
_ENV_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}

# section -> key -> (kind, Config field): the one declaration of every key imagectl reads.
SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "registry": {"url": ("host", "registry_url"), "namespace": ("namespace", "namespace"),
                 "insecure": ("bool", "insecure"), "timeout": ("seconds", "registry_timeout"),
                 "compression": ("compression", "registry_compression"),
                 "max_referrers": ("referrers", "max_referrers")},
    "pip": {"index_url": ("index", "pip_index_url"), "extra_index_urls": ("indexes", "pip_extra_index_urls"),
            "trusted_hosts": ("hosts", "pip_trusted_hosts"), "timeout": ("seconds", "pip_timeout")},
    "apt": {"mirror": ("url", "apt_mirror"), "snapshot": ("snapshot", "apt_snapshot")},
    "build": {"network": ("network", "build_network"), "ca_bundle": ("file", "ca_bundle"),
              "args": ("args", "build_args"), "engine": ("engine", "build_engine"),
              "install": ("install", "build_install"),
              "platforms": ("platforms", "build_platforms"), "cache": ("cache_repo", "build_cache"),
              "size_budget": ("byte_size", "build_size_budget")},
    "paths": {"matrices": ("dirs", "matrix_dirs"), "templates": ("dirs", "template_dirs"),
              "context": ("dirs", "context_dirs"), "locks": ("dirs", "lock_dirs"),
              "advisories": ("dirs", "advisory_dirs")},
    "lock": {"as_of": ("as_of", "lock_as_of"), "grace_days": ("days", "lock_grace_days")},
    "tags": {"prune_min_age_days": ("days", "prune_min_age_days")},
    "attest": {"key": ("file", "attest_key"), "public_key": ("file", "attest_public_key")},
    "advisories": {"fail_on": ("fail_on", "advisories_fail_on")},
    "node": {"runtime": ("runtime", "node_runtime")},
}
# [advisories] fail_on: a severity (this one or higher stops a build) or a list of advisory ids (imagectl.advisories)
ADVISORY_SEVERITIES = ("low", "moderate", "high", "critical")


@dataclass(frozen=True)
class Config:
    """The resolved configuration; every value already validated."""

    registry_url: str | None = None
    namespace: str = "imagectl"
    insecure: bool = False
    registry_timeout: float | None = None  # seconds per registry request; None: the registry client's default
    registry_compression: str = "gzip"  # COMPRESSIONS: of pushed layers (zstd: containerd 1.5+, Docker 23+)
    # the most referrers (attestations, signatures) bases sync and import read and copy per image; the rest is left
    max_referrers: int = 1000
    mirrors: Mapping[str, str] = field(default_factory=dict)
    pip_index_url: str | None = None
    pip_extra_index_urls: tuple[str, ...] = ()
    pip_trusted_hosts: tuple[str, ...] = ()
    pip_timeout: float | None = None  # seconds per package-index request (imagectl's own reads); None: the default
    apt_mirror: str | None = None
    apt_snapshot: str | None = None  # YYYYMMDDTHHMMSSZ: the apt steps read snapshot.debian.org / snapshot.ubuntu.com
    build_network: str | None = None
    ca_bundle: Path | None = None
    build_args: Mapping[str, str] = field(default_factory=dict)
    build_engine: str = "auto"  # ENGINES; auto: buildah where it is installed (reproducible, no daemon), else Docker
    build_install: str = "assembled"  # INSTALLS; assembled: imagectl writes the lock's layers (buildah only), pip: RUN
    build_cache: str | None = None  # REGISTRY/REPO: buildah's --cache-from/--cache-to layer cache
    build_platforms: tuple[str, ...] = ()  # what build makes by default, as written (the CLI checks them); (): the host
    build_size_budget: int | None = None  # bytes: the most an image's layers may weigh compressed (images/size.py)
    matrix_dirs: tuple[Path, ...] = ()
    template_dirs: tuple[Path, ...] = ()
    context_dirs: tuple[Path, ...] = ()
    lock_dirs: tuple[Path, ...] = ()  # the team's locks, searched before the shipped ones
    advisory_dirs: tuple[Path, ...] = ()  # the team's OSV records, read with the shipped snapshot
    # what stops a build ([advisories] fail_on): a severity (ADVISORY_SEVERITIES, it or higher), or advisory ids;
    # None: nothing does (an affected build warns and proceeds)
    advisories_fail_on: str | tuple[str, ...] | None = None
    # NODE_RUNTIMES: the NVIDIA container runtime mode compat judges (auto: read from the node where it can be, else
    # both; both: one verdict where legacy and jit-cdi agree, both where they differ)
    node_runtime: str = "auto"
    lock_as_of: str = "release"  # the --as-of policy of `imagectl lock` and of build-time locks (lock/asof.py)
    lock_grace_days: int = 7  # days after a release's upload that --as-of release still takes
    prune_min_age_days: int = 7
    attest_key: Path | None = None  # Ed25519 private key (PEM) that signs attestations; None: attached unsigned
    attest_public_key: Path | None = None  # what verify checks signatures with (default: the key's public half)
    source: str = "defaults"
    notes: tuple[str, ...] = ()  # what the CLI warns about the configuration (a file with credentials others read)

    @property
    def insecure_hosts(self) -> tuple[str, ...]:
        """The registry hosts the user allowed plain HTTP or unverified TLS for (loopback always is)."""
        return (self.registry_url,) if self.insecure and self.registry_url else ()

    @property
    def secret_values(self) -> tuple[str, ...]:
        """Values no output line may show: every build-arg value and the password of every pip index URL."""
        urls = [u for u in (self.pip_index_url, *self.pip_extra_index_urls) if u]
        passwords = [creds[2] for creds in map(url_credentials, urls) if creds]
        return tuple(sorted({*self.build_args.values(), *passwords}))


def find_config_file(path: str | None, env: Mapping[str, str], cwd: Path) -> Path | None:
    """The configuration file to read, or None; raises ConfigError for a named file that is missing or is a
    directory (also ``./imagectl.toml``), and for one that cannot be looked at (a folder on the way the user may not
    enter)."""
    if path is not None and not path.strip():
        raise ConfigError("--config: name a configuration file (the path is empty)")
    named = path or env.get("IMAGECTL_CONFIG")
    origin = ("--config" if path else "IMAGECTL_CONFIG") if named else "./imagectl.toml"
    candidate = (cwd / named).resolve() if named else cwd / "imagectl.toml"
    found = paths.status(candidate, ConfigError, f"the configuration file ({origin})")
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"{origin}: {named or candidate} is a directory, not a configuration file")
    if named and found is None:
        raise ConfigError(f"{origin}: configuration file {named} not found")
    return candidate if found is not None else None


def load_config(path: str | None = None, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Config:
    """Find, read, override from the environment and validate the configuration.

    Raises ConfigError (exit 2) naming the file or variable and the key at fault.
    """
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    file = find_config_file(path, env, cwd)
    raw: dict[str, Any] = load_toml(file, ConfigError) if file else {}
    where = str(file) if file else "configuration"
    _check_sections(raw, where)
    values = _flatten(raw, file.parent if file else cwd, where)
    overrides = _env_overrides(env, cwd)
    if ("mirrors", "*") in overrides:  # IMAGECTL_MIRRORS replaces the file's whole [mirrors] table
        replaced = {key: value for key, value in values.items() if key[0] == "mirrors"}
        _build(replaced, where)  # the file's table is still checked: a bad entry is bad input, replaced or not
        values = {key: value for key, value in values.items() if key[0] != "mirrors"}
    values.update(overrides)
    config = _build(values, str(file) if file else "defaults")
    return replace(config, notes=_exposure_notes(file, config)) if file else config


def _exposure_notes(file: Path, config: Config) -> tuple[str, ...]:
    """A warning when ``file`` holds a secret of the configuration (an index password, a build-arg value) and
    others may read it, as ssh warns about a private key; none otherwise."""
    try:
        mode, text = file.stat().st_mode, file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    if not mode & 0o077 or redact(text, config.secret_values) == text:  # no URL userinfo, no build-arg value
        return ()
    return (f"warning: {file} holds credentials and others can read it (mode {mode & 0o777:04o}); "
            f"chmod 600 {file}",)


def _check_sections(raw: dict[str, Any], where: str) -> None:
    for section, body in raw.items():
        if section == "mirrors":
            if not isinstance(body, dict):
                raise ConfigError(f"{where}: [mirrors] must be a table of registry = mirror prefix")
            continue
        if section not in SCHEMA:
            known = ", ".join(sorted([*SCHEMA, "mirrors"]))
            raise ConfigError(f"{where}: unknown section [{section}] (known: {known})")
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
        for key in body:
            if key not in SCHEMA[section]:
                raise ConfigError(f"{where}: unknown key {key!r} in [{section}] (known: {', '.join(SCHEMA[section])})")


def _flatten(raw: dict[str, Any], base: Path, where: str) -> dict[tuple[str, str], tuple[Any, str, Path]]:
    values: dict[tuple[str, str], tuple[Any, str, Path]] = {}
    for section, body in raw.items():
        for key, value in body.items():
            values[(section, key)] = (value, f"{where}: [{section}] {key}", base)
    return values


def _env_overrides(env: Mapping[str, str], cwd: Path) -> dict[tuple[str, str], tuple[Any, str, Path]]:
    values: dict[tuple[str, str], tuple[Any, str, Path]] = {}
    for section, keys in SCHEMA.items():
        for key, (kind, _) in keys.items():
            name = f"IMAGECTL_{section.upper()}_{key.upper()}"
            if name in env:
                values[(section, key)] = (_from_env(env[name], kind), name, cwd)
    if "IMAGECTL_MIRRORS" in env:
        values[("mirrors", "*")] = (_parse_pairs(env["IMAGECTL_MIRRORS"], "IMAGECTL_MIRRORS"), "IMAGECTL_MIRRORS", cwd)
    return values


def _from_env(text: str, kind: str) -> Any:
    if kind in ("indexes", "hosts", "dirs", "platforms"):
        return [part.strip() for part in text.split(",") if part.strip()]
    if kind == "bool":  # a word that is none of these stays text, which _as_bool refuses
        return _ENV_BOOLS.get(text.strip().lower(), text)
    if kind == "args":
        return _parse_pairs(text, "IMAGECTL_BUILD_ARGS")
    if kind == "fail_on":  # a severity word, else comma-separated advisory ids
        word = text.strip().lower()
        return word if word in ADVISORY_SEVERITIES else [part.strip() for part in text.split(",") if part.strip()]
    if kind == "seconds":  # text that is no number stays text, which _as_seconds refuses
        try:
            return float(text.strip())
        except ValueError:
            return text
    if kind in ("int", "days", "referrers"):  # text that is no number stays text, which _as_int refuses
        try:
            return int(text.strip())
        except ValueError:
            return text
    return text


def _parse_pairs(text: str, what: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            secret = what == "IMAGECTL_BUILD_ARGS"
            shown = "an item without '=' (not shown: a build arg may be secret)" if secret else repr(item)
            raise ConfigError(redact(f"{what}: expected KEY=VALUE pairs separated by commas, got {shown}"))
        pairs[key.strip()] = value.strip()
    return pairs


def _build(values: dict[tuple[str, str], tuple[Any, str, Path]], source: str) -> Config:
    out: dict[str, Any] = {"source": source}
    mirrors: dict[str, Any] = {}
    for (section, key), (value, where, base) in sorted(values.items()):
        try:
            if section == "mirrors":
                mirrors.update(_mirrors(value if key == "*" else {key: value}, where))
            else:
                out.update(_convert(section, key, value, base))
        except ValidationError as exc:
            raise ConfigError(redact(f"{where}: {exc}")) from None
    out["mirrors"] = mirrors
    return Config(**out)


def _mirrors(table: dict[str, Any], where: str) -> dict[str, str]:
    out = {}
    for domain, prefix in table.items():
        check_host(domain, "mirrored registry")
        if not isinstance(prefix, str):
            raise ValidationError(f"mirror for {domain}: expected a string")
        parse_reference(f"{prefix.rstrip('/')}/probe")
        out[domain] = prefix.rstrip("/")
    return out


def _convert(section: str, key: str, value: Any, base: Path) -> dict[str, Any]:
    kind, name = SCHEMA[section][key]
    return {name: _CONVERTERS[kind](value, base)}


def _as_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValidationError(f"expected a list, got {value!r}")
    return value


def _as_bool(value: Any, _base: Path) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"expected true or false (in a variable also 1/0, yes/no, on/off), got {value!r}")
    return value


def _as_int(value: Any, _base: Path, most: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or (most is not None and value > most):
        bounds = f"from 0 to {most}" if most is not None else ">= 0"
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise ValidationError(f"expected a whole number {bounds}, got {shown}")
    return value


def _as_seconds(value: Any, _base: Path) -> float:
    """A number of seconds > 0 and <= MAX_REGISTRY_TIMEOUT_S; raises ValidationError otherwise."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not 0 < value <= MAX_REGISTRY_TIMEOUT_S:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
        raise ValidationError(f"expected a number of seconds > 0 and <= {MAX_REGISTRY_TIMEOUT_S}, got {shown}")
    return float(value)


def _as_namespace(value: Any, _base: Path) -> str:
    if not isinstance(value, str) or not value.strip("/"):
        raise ValidationError(f"{value!r} is not a namespace like ml or team/ml")
    parse_reference(f"localhost/{value.strip('/')}/probe")
    return value.strip("/")


def _as_network(value: Any, _base: Path) -> str:
    if value not in NETWORK_MODES:
        raise ValidationError(f"{value!r} is not one of {', '.join(NETWORK_MODES)}")
    return value


def _as_engine(value: Any, _base: Path) -> str:
    if value not in ENGINES:
        raise ValidationError(f"{value!r} is not one of {', '.join(ENGINES)}")
    return value


def _as_install(value: Any, _base: Path) -> str:
    if value not in INSTALLS:
        raise ValidationError(f"{str(value)[:40]!r} is not one of {', '.join(INSTALLS)}")
    return value


def _as_platforms(value: Any) -> tuple[str, ...]:
    """A non-empty list of platform names as written (``linux/arm64``); which are platforms imagectl builds is the
    matrix's fact, checked where a build reads them (imagectl.images.platforms)."""
    items = _as_list(value)
    if not items or not all(isinstance(item, str) and item.strip() for item in items):
        raise ValidationError(f"expected a non-empty list of platforms such as [\"linux/amd64\", \"linux/arm64\"], "
                              f"got {str(value)[:60]!r}")
    return tuple(item.strip() for item in items)


def _as_snapshot(value: Any, _base: Path) -> str:
    """A snapshot archive's point in time, ``YYYYMMDDTHHMMSSZ`` (snapshot.debian.org, snapshot.ubuntu.com), a real
    UTC time; raises ValidationError."""
    try:
        if isinstance(value, str) and len(value) == 16:
            dt.datetime.strptime(value, "%Y%m%dT%H%M%SZ")
            return value
    except ValueError:
        pass
    raise ValidationError(f"expected a UTC time YYYYMMDDTHHMMSSZ (20240601T000000Z), got {str(value)[:40]!r}")


def _as_cache_repo(value: Any, _base: Path) -> str:
    """A registry repository for buildah's layer cache (``registry.example.com:5000/cache/imagectl``): a registry
    host, a path, no tag or digest; raises ValidationError."""
    host, _, path = value.partition("/") if isinstance(value, str) else ("", "", "")
    registry = "." in host or ":" in host or host == "localhost"
    if not (registry and path and ":" not in path and "@" not in path):
        raise ValidationError("expected REGISTRY/REPOSITORY without a tag (registry.example.com/cache/imagectl), "
                              f"got {str(value)[:60]!r}")
    parse_reference(value)
    return value


def _as_compression(value: Any, _base: Path) -> str:
    if value not in COMPRESSIONS:
        raise ValidationError(f"{str(value)[:40]!r} is not one of {', '.join(COMPRESSIONS)}")
    return value


def _as_runtime(value: Any, _base: Path) -> str:
    if value not in NODE_RUNTIMES:
        raise ValidationError(f"{str(value)[:40]!r} is not one of {', '.join(NODE_RUNTIMES)}")
    return value


def _as_file(value: Any, base: Path) -> Path:
    path = (base / str(value)).resolve()
    if not isinstance(value, str) or not paths.is_file(path, ValidationError):
        raise ValidationError(f"{value!r} is not a readable file")
    paths.check_readable(path, ValidationError)  # now: a file that cannot be read is this key's error, not a later one
    return path


def _as_dirs(value: Any, base: Path) -> tuple[Path, ...]:
    found = tuple((base / str(item)).resolve() for item in _as_list(value))
    for item, path in zip(value, found, strict=True):
        if not paths.is_dir(path, ValidationError):
            raise ValidationError(f"{item!r} is not a directory")
        paths.check_listable(path, ValidationError)  # a folder that cannot be listed is refused, not read as empty
    return found


def _as_as_of(value: Any, _base: Path) -> str:
    """A --as-of policy: ``release``, ``latest`` or a date ``YYYY-MM-DD`` (lock/asof.py); raises ValidationError."""
    if value in ("release", "latest"):
        return value
    try:
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str) and len(value) == 10:
            return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        pass
    raise ValidationError(f"expected a date YYYY-MM-DD, 'release' or 'latest', got {str(value)[:40]!r}")


def _as_fail_on(value: Any, _base: Path) -> str | tuple[str, ...]:
    """``[advisories] fail_on``: a severity (``"high"``: high and critical advisories stop a build) or a non-empty list
    of advisory ids (``["CVE-2025-32434", "GHSA-..."]``, matched against every record's id and aliases); raises
    ValidationError."""
    if isinstance(value, str) and value.lower() in ADVISORY_SEVERITIES:
        return value.lower()
    ids = value if isinstance(value, list) else None
    if ids and all(isinstance(i, str) and i.strip() and len(i) <= 100 and i.strip().isprintable() for i in ids):
        return tuple(i.strip() for i in ids)
    raise ValidationError(f"expected a severity ({', '.join(ADVISORY_SEVERITIES)}) or a non-empty list of advisory "
                          f"ids such as [\"CVE-2025-32434\"], got {str(value)[:60]!r}")


def _as_args(value: Any, _base: Path) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValidationError("expected a table of NAME = value")
    return {check_env_name(k, "build arg"): _arg_value(k, v) for k, v in value.items()}


def _arg_value(name: str, value: Any) -> str:
    """A build arg's value; raises ValidationError naming the arg, never showing the value (it may be secret)."""
    try:
        return check_text(str(value), f"build arg {name}")
    except ValidationError:
        raise ValidationError(f"build arg {name}: the value (not shown) is not one line of text without quotes, "
                              "backslashes or '$'") from None


_CONVERTERS = {
    "host": lambda v, b: check_host(v, "registry url (host[:port])"),
    "namespace": _as_namespace,
    "bool": _as_bool,
    "int": _as_int,
    "days": lambda v, b: _as_int(v, b, MAX_MIN_AGE_DAYS),
    "referrers": lambda v, b: _as_int(v, b, MAX_REFERRERS),
    "seconds": _as_seconds,
    "url": lambda v, b: check_url(v),
    "index": lambda v, b: check_url(v, credentials=True),
    "indexes": lambda v, b: tuple(check_url(item, credentials=True) for item in _as_list(v)),
    "hosts": lambda v, b: tuple(check_host(item) for item in _as_list(v)),
    "network": _as_network,
    "compression": _as_compression,
    "runtime": _as_runtime,
    "engine": _as_engine,
    "install": _as_install,
    "snapshot": _as_snapshot,
    "cache_repo": _as_cache_repo,
    "platforms": lambda v, b: _as_platforms(v),
    "file": _as_file,
    "dirs": _as_dirs,
    "args": _as_args,
    "as_of": _as_as_of,
    "fail_on": _as_fail_on,
    "byte_size": lambda v, b: check_byte_size(v),
}
