"""``imagectl test``: run the in-image check of a profile's current image or of any image.

A profile's current image is what its moving tag points to.  With a registry configured that is the
registry's moving tag, read by digest (one HEAD) and tested as ``REPO@DIGEST``, pulled when the engine lacks
it: after a rollback (here or on another machine) the local ``REPO:latest`` may still be the image rolled back
from, and a test must not report on that.  Without a registry it is the local ``REPO:latest``.
"""

from __future__ import annotations

from ..config import Config
from ..engine import Engine, LineSink
from ..errors import OperationError, UnknownProfileError, ValidationError
from ..imagecheck.compare import Finding
from ..imagecheck.run import check_findings
from ..matrix.model import Matrix
from ..matrix.names import resolve_profile
from ..reference import parse_reference
from ..tags.managed import open_tag_store
from ..tags.naming import LOCAL_DOMAIN, MOVING_TAG, moving_reference, repository


def target_image(target: str, matrix: Matrix, config: Config, engine: Engine) -> str:
    """The image a ``test`` target means: a profile's current image (see the module docstring), else ``target``
    as an image reference.

    Raises ValidationError when it is neither, OperationError when the registry has no moving tag for the
    profile, RegistryError when the registry cannot be asked.
    """
    try:
        profile = resolve_profile(target, matrix)
    except UnknownProfileError as profile_error:
        try:
            return parse_reference(target).familiar
        except ValidationError:
            raise ValidationError(f"test: {target!r} is neither a profile nor an image reference "
                                  f"({profile_error})") from None
    if not config.registry_url:
        return moving_reference(profile.name, config).familiar
    repo = repository(profile.name, config)
    digest = open_tag_store(repo, config, engine).digest(MOVING_TAG)
    if digest is None:
        raise OperationError(f"test: {repo.familiar}:{MOVING_TAG} does not exist in the registry"
                             " (build or import it first)")
    return f"{repo.familiar}@{digest}"


def check_image(  # noqa: PLR0913 - what ``imagectl test`` was given, as cli/building.py passes it
        target: str, matrix: Matrix, config: Config, engine: Engine, log: LineSink, *,
        gpu: bool = False) -> tuple[str, list[Finding]]:
    """``(image, findings)`` for ``target``; pulls the image when the engine lacks it.

    Raises OperationError if the image cannot be had or its check does not run, RegistryError when the
    registry cannot be asked where the moving tag points.
    """
    image = target_image(target, matrix, config, engine)
    info = engine.inspect(image)
    if info is None and parse_reference(image).domain == LOCAL_DOMAIN:  # a local-only name: never pulled
        raise OperationError(f"test: the engine has no image {image} (local images are never pulled: build it "
                             "first, or configure [registry] url)")
    info = info or engine.pull(image, log)
    try:
        return image, check_findings(engine, info.id, dict(info.labels), config.build_network, gpu=gpu)
    except OperationError as exc:
        raise OperationError(f"test {image}: {exc}") from None
