"""Host names of registries and token realms: which machine a ``host[:port]`` names, and whether it is this one."""

from __future__ import annotations

import ipaddress


def hostname(domain: str) -> str:
    """The host of ``domain`` without its port or IPv6 brackets, lower case (``[::1]:5000`` -> ``::1``).

    Never raises.
    """
    if domain.startswith("["):
        return domain[1:].split("]", 1)[0].lower()
    return domain.split(":", 1)[0].lower()


def is_loopback_name(host: str) -> bool:
    """True for ``localhost`` and a 127.0.0.0/8 or ::1 address (a bare host, no port); never raises."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback(domain: str) -> bool:
    """True for ``localhost`` and 127.0.0.0/8 or ::1 hosts (with any port), as dockerd treats them."""
    return is_loopback_name(hostname(domain))
