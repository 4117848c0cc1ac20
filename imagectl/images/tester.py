"""``imagectl test``: run the in-image check of a profile's current image or of any image."""

from __future__ import annotations

from ..config import Config
from ..engine import Engine, LineSink
from ..errors import OperationError, UnknownProfileError, ValidationError
from ..imagecheck.compare import Finding
from ..imagecheck.run import check_findings
from ..matrix.model import Matrix
from ..matrix.names import resolve_profile
from ..reference import parse_reference
from ..tags.naming import moving_reference


def target_image(target: str, matrix: Matrix, config: Config) -> str:
    """The image a ``test`` target means: a profile's moving tag, else ``target`` as an image reference.

    Raises ValidationError when it is neither.
    """
    try:
        profile = resolve_profile(target, matrix)
        return moving_reference(profile.name, config).familiar
    except UnknownProfileError as profile_error:
        try:
            return parse_reference(target).familiar
        except ValidationError:
            raise ValidationError(f"test: {target!r} is neither a profile nor an image reference "
                                  f"({profile_error})") from None


def check_image(target: str, matrix: Matrix, config: Config, engine: Engine, gpu: bool,
               log: LineSink) -> tuple[str, list[Finding]]:
    """``(image, findings)`` for ``target``; pulls the image when the engine lacks it.

    Raises OperationError if the image cannot be had or its check does not run.
    """
    image = target_image(target, matrix, config)
    info = engine.inspect(image) or engine.pull(image, log)
    try:
        return image, check_findings(engine, info.id, dict(info.labels), config.build_network, gpu)
    except OperationError as exc:
        raise OperationError(f"test {image}: {exc}") from None
