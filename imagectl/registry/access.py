"""Which registries imagectl may talk to without TLS, and clients for them.

The caller says which hosts the user marked insecure (``Config.insecure_hosts``) and how long a request may
take (``Config.registry_timeout``); this package never reads the application's configuration itself.
"""

from __future__ import annotations

from collections.abc import Collection

from .client import RegistryClient, connect
from .loopback import is_loopback

__all__ = ["client_for", "is_insecure", "is_loopback"]


def is_insecure(domain: str, insecure_hosts: Collection[str] = ()) -> bool:
    """Plain HTTP / unverified TLS only for a host the user marked insecure, or loopback."""
    return domain in insecure_hosts or is_loopback(domain)


def client_for(domain: str, insecure_hosts: Collection[str] = (), timeout: float | None = None) -> RegistryClient:
    """A registry client for ``domain`` with credentials from the Docker config.

    ``timeout`` is the deadline of each request in seconds (the client's default when None).  Raises
    InputError if it is not a positive number.
    """
    return connect(domain, insecure=is_insecure(domain, insecure_hosts), timeout=timeout)
