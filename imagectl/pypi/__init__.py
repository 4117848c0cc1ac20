"""Read Python package indexes: project file lists (PEP 691 / PEP 503) and wheel core metadata.

The public surface is re-exported here; see :mod:`imagectl.pypi.simple` (index pages),
:mod:`imagectl.pypi.metadata` (PEP 658 metadata, Range-read fallback, pins), :mod:`imagectl.pypi.wheels`
(wheel filenames and platform filters) and :mod:`imagectl.pypi.transport` (the one request path).
Every failure is an :class:`imagectl.errors.PackageIndexError` (or an ``InputError`` for a bad argument).
"""

from imagectl.pypi.metadata import (
    MetadataDocument,
    WheelMetadata,
    applicable_requirements,
    exact_pins,
    fetch_metadata,
    loose_requirements,
    marker_environment,
    parse_metadata,
    pinned_version,
    wheel_metadata,
)
from imagectl.pypi.simple import (
    DistFile,
    normalize_project_name,
    parse_html_page,
    parse_json_page,
    project_files,
    project_url,
)
from imagectl.pypi.transport import DEFAULT_SETTINGS, IndexSettings, index_settings, new_session
from imagectl.pypi.wheels import (
    WheelName,
    cpython_abis,
    cpython_tag,
    is_wheel,
    linux_x86_64_wheels,
    parse_wheel,
    tag_runs_on_cpython,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "DistFile",
    "IndexSettings",
    "MetadataDocument",
    "WheelMetadata",
    "WheelName",
    "applicable_requirements",
    "cpython_abis",
    "cpython_tag",
    "exact_pins",
    "fetch_metadata",
    "index_settings",
    "is_wheel",
    "linux_x86_64_wheels",
    "loose_requirements",
    "marker_environment",
    "new_session",
    "normalize_project_name",
    "parse_html_page",
    "parse_json_page",
    "parse_metadata",
    "parse_wheel",
    "pinned_version",
    "project_files",
    "project_url",
    "tag_runs_on_cpython",
    "wheel_metadata",
]
