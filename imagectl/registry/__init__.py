"""An OCI distribution API client: manifests, tags, blobs, auth and copying images between registries.

``RegistryClient`` talks to one registry; ``connect(host)`` makes one that reads credentials from the
Docker config when the registry asks; ``copy_image`` moves an image between repositories or registries.
``RetryPolicy`` is re-exported from :mod:`imagectl.retry`, the policy shared with the package-index reader.
Every request has a deadline (``Timeouts.request_s``, the ``[registry] timeout``) and every answer's body a
cap, so a hung or hostile registry fails a command with one line instead of holding it (see :mod:`.client`).
"""

from .auth import TokenCache
from .client import BlobReader, RegistryClient, Timeouts, api_host, connect
from .copy import CopyReport, Endpoint, copy_blob, copy_image
from .credentials import Credentials, load_credentials
from .manifest import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    MANIFEST_TYPES,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    DigestMismatchError,
    ImageConfig,
    Manifest,
    sha256_digest,
)
from ..retry import RetryPolicy

__all__ = [
    "BlobReader",
    "CopyReport",
    "Credentials",
    "DOCKER_MANIFEST",
    "DOCKER_MANIFEST_LIST",
    "Descriptor",
    "DigestMismatchError",
    "Endpoint",
    "ImageConfig",
    "MANIFEST_TYPES",
    "Manifest",
    "OCI_INDEX",
    "OCI_MANIFEST",
    "RegistryClient",
    "RetryPolicy",
    "Timeouts",
    "TokenCache",
    "api_host",
    "connect",
    "copy_blob",
    "copy_image",
    "load_credentials",
    "sha256_digest",
]
