"""One registry client per host for a whole ``bases`` run, and hosts that could not be reached asked no further."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..config import Config
from ..errors import AuthError, ImagectlError, NotFoundError
from ..registry.access import client_for
from ..registry.client import RegistryClient
from ..registry.manifest import DigestMismatchError

T = TypeVar("T")


class HostClients:
    """Clients by host, opened on first use.  A host whose request failed other than by a refusal, a missing
    manifest or a wrong digest (it is down, out of time, or answers garbage) is not asked again: later calls raise
    its first error at once, so sixty bases behind one unreachable registry cost one set of retries, not sixty."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._open: dict[str, RegistryClient] = {}
        self._down: dict[str, ImagectlError] = {}

    def ask(self, domain: str, call: Callable[[RegistryClient], T]) -> T:
        """``call(client of domain)``; raises what it raises (ImagectlError), or the host's first failure."""
        if domain in self._down:
            raise self._down[domain]
        client = self._open.get(domain)
        if client is None:
            client = self._open[domain] = client_for(domain, self._config.insecure_hosts,
                                                     self._config.registry_timeout)
        try:
            return call(client)
        except (AuthError, NotFoundError, DigestMismatchError):
            raise
        except ImagectlError as exc:
            self._down[domain] = exc
            raise

    def close(self) -> None:
        """Close every client opened."""
        for client in self._open.values():
            client.close()
        self._open.clear()

    def __enter__(self) -> HostClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
