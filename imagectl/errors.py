"""The one error root of imagectl and its few families.

Every error a user can cause or meet derives from :class:`ImagectlError`.  The CLI catches it once, in
``imagectl.cli.main``, prints ``imagectl: <message>`` on stderr and exits with :attr:`exit_code`:
2 for bad input or usage (:class:`InputError`), 1 for an operation that failed (:class:`OperationError`).
"""

from __future__ import annotations


class ImagectlError(Exception):
    """Root of every imagectl error; ``str(err)`` is one line that says what is wrong and where."""

    exit_code = 1


class InputError(ImagectlError):
    """Bad input from the user: a flag, a name, a config file, a matrix, a reference (exit 2)."""

    exit_code = 2


class OperationError(ImagectlError):
    """An operation that was asked for correctly but failed (exit 1)."""

    exit_code = 1


class MatrixError(InputError):
    """A matrix file that cannot be read or does not follow the schema."""


class ConfigError(InputError):
    """An imagectl.toml or IMAGECTL_* variable that cannot be used."""


class UnknownProfileError(InputError):
    """A profile name that resolves to no profile, or to several."""


class ValidationError(InputError):
    """A value that would reach a Dockerfile or a shell and does not match its grammar."""


class ExtrasConflictError(InputError):
    """A team's extra requirement that names a package of a profile's lock at another version."""


class TemplateError(InputError):
    """A template that is missing, malformed or uses an undefined variable."""


class RegistryError(OperationError):
    """A registry answered with an error or could not be reached."""


class NotFoundError(RegistryError):
    """The registry (or engine) has no such repository, tag, manifest or blob."""


class AuthError(RegistryError):
    """The registry refused the credentials (or asked for some and none were found)."""


class EngineError(OperationError):
    """The container engine could not be reached or refused an operation."""


class BuildError(OperationError):
    """A build, an in-image check or a push failed; carries the failing step and the log tail."""

    def __init__(self, message: str, step: str = "build", log_tail: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.log_tail = log_tail


class PackageIndexError(OperationError):
    """A package index answered with an error or with something that is not a simple index."""
