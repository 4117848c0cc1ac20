"""Which registries imagectl may talk to without TLS, and clients for them from the configuration."""

from __future__ import annotations

import ipaddress

from ..config import Config
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


def is_insecure(domain: str, config: Config) -> bool:
    """Plain HTTP / unverified TLS only for the configured registry marked insecure, or loopback."""
    return (config.insecure and domain == config.registry_url) or is_loopback(domain)


def client_for(domain: str, config: Config) -> RegistryClient:
    """A registry client for ``domain`` with credentials from the Docker config."""
    return connect(domain, insecure=is_insecure(domain, config))
