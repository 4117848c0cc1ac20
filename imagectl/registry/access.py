"""Which registries imagectl may talk to without TLS, and clients for them.

The caller says which hosts the user marked insecure (``Config.insecure_hosts``); this package never reads
the application's configuration itself.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection

from .client import RegistryClient, connect


def is_loopback(domain: str) -> bool:
    """True for ``localhost`` and 127.0.0.0/8 or ::1 hosts (with any port), as dockerd treats them."""
    if domain.startswith("["):
        host = domain[1:].split("]", 1)[0]
    else:
        host = domain.split(":", 1)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_insecure(domain: str, insecure_hosts: Collection[str] = ()) -> bool:
    """Plain HTTP / unverified TLS only for a host the user marked insecure, or loopback."""
    return domain in insecure_hosts or is_loopback(domain)


def client_for(domain: str, insecure_hosts: Collection[str] = ()) -> RegistryClient:
    """A registry client for ``domain`` with credentials from the Docker config."""
    return connect(domain, insecure=is_insecure(domain, insecure_hosts))
