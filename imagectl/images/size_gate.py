"""The size budget at the two points of a build where an image's size is known (:mod:`.size` says what the budget is).

1. Once planned, before anything is built or pushed (:func:`expected_gate`): the expected size of each platform's
   image (:func:`.size_facts.plan_size`: the index's wheels, the base's manifest).  Over the budget, the build stops
   there (exit 1), naming the five largest contributors.  ``build --plan`` computes the same, budget or not.
2. Once built, before any tag names the image (:func:`layout_gate`, :func:`pushed_gate`): its real compressed size,
   the layers of its manifest, with the five largest layer groups.  An assembled image is judged from its OCI layout
   before it is pushed; an image the engine built, from the manifest its push by digest left untagged in the registry
   (a local build of the engine's is judged by its expected size alone: its compressed size is made by a push).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config
from ..errors import BuildError
from ..progress.units import human_bytes
from .image_facts import config_history, layer_groups
from .size import Budget, ExpectedSize, budget_of, over_budget, real_over_budget
from .size_facts import plan_size

if TYPE_CHECKING:
    from ..reference import Reference
    from ..registry.manifest import Manifest
    from .plan import Plan

SIZE_STEP = "size"  # the step a BuildError of the budget names


@dataclass(frozen=True)
class SizeReport:
    """What a build knew of its image's size before building it: the budget (None: none applies), the expected size
    per platform, and the refusal when over the budget ("" when it fits)."""

    budget: Budget | None
    expected: Mapping[str, ExpectedSize]
    refusal: str = ""


def plan_budget(plan: Plan, config: Config) -> Budget | None:
    """The budget ``plan``'s build is held to (:func:`.size.budget_of`)."""
    framework = plan.request.profile.framework
    return budget_of(config.build_size_budget, framework.size_budget, str(framework.source))


def expected_gate(plans: Sequence[Plan], config: Config, log: Callable[[str], None], *,
                  always: bool = False) -> SizeReport | None:
    """The expected size of each of ``plans``' images (one per platform) and the budget's verdict; None when no
    budget applies and not ``always`` (nothing is read then).  Raises nothing of imagectl's own: what cannot be read
    is unknown, and a floor over the budget is over it."""
    budget = plan_budget(plans[0], config)
    if budget is None and not always:
        return None
    expected = {plan.platform: plan_size(plan, config) for plan in plans}
    refusals = [(platform, why) for platform, size in expected.items()
                if budget is not None and (why := over_budget(size, budget))]
    for platform, size in expected.items():
        floor = "" if size.complete else "at least "
        limit = f" (budget {human_bytes(budget.limit)}, {budget.source})" if budget else ""
        log(f"expected size of the {platform} image: {floor}{human_bytes(size.compressed)} compressed{limit}")
    refusal = "; ".join(f"{platform}: {why}" if len(plans) > 1 else why for platform, why in refusals)
    return SizeReport(budget, expected, refusal)


def layout_gate(plan: Plan, config: Config, layout: Path) -> None:
    """Judge the built image of the OCI ``layout`` (an assembled image, before its push) against ``plan``'s budget.
    Raises BuildError (step ``size``) when over it."""
    budget = plan_budget(plan, config)
    if budget is None:
        return
    from ..registry.layout import read_small_blob, root_manifest

    manifest = root_manifest(layout)
    _judge(manifest, lambda digest: read_small_blob(layout, digest), budget)


def pushed_gate(plan: Plan, config: Config, repo: Reference, digest: str) -> None:
    """Judge the image ``digest`` that a push by digest left untagged in ``repo`` against ``plan``'s budget (its
    manifest and config: two GETs).  Raises BuildError (step ``size``) when over it, RegistryError."""
    budget = plan_budget(plan, config)
    if budget is None:
        return
    from ..registry.access import client_for

    with client_for(repo.domain, config.insecure_hosts, config.registry_timeout) as client:
        manifest = client.get_manifest(repo.path, digest)
        _judge(manifest, lambda blob: client.read_blob(repo.path, blob), budget)


def _judge(manifest: Manifest, read: Callable[[str], bytes], budget: Budget) -> None:
    sizes = [layer.size for layer in manifest.layers()]
    config = manifest.config()
    history = config_history(read(config.digest)) if config is not None else []
    refusal = real_over_budget(layer_groups(history, sizes), sum(sizes), budget)
    if refusal:
        raise BuildError(refusal, SIZE_STEP)
