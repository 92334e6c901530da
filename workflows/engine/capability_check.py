"""Check at publish that each step's actors have what the step needs (`capabilities.py`): what
it `requires`, and vision for a step that shows its model `images` (`images.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from workflows.engine.actor_choice import model_aliases
from workflows.engine.capabilities import Capabilities, lacking_reason, missing
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.images import NEEDS as IMAGES_NEED
from workflows.engine.vocabulary import LEARNED


def capability_errors(graph: RecipeGraph, offered: Mapping[str, Capabilities | None]) -> list[str]:
    """Return the publish errors of steps whose actors lack what they need.

    `offered`: each model alias's capabilities (None or absent: not declared). A step's own
    actor and a retry's `alternative_actor` must have every requirement; a `@learned` step
    needs at least one candidate that has (the others are skipped when it chooses). What the
    step's `requires` names is reported there, the vision its `images` need at `images`.
    """
    errors: list[str] = []
    for i, step in enumerate(graph.steps):
        where = f"steps[{i}] ('{step.key}')"
        for field, required in _needs(step):
            errors += _errors(graph, step, offered, f"{where}.{field}", required)
    return errors


def _needs(step: StepSpec) -> list[tuple[str, Capabilities]]:
    """Each field of the step that needs something of its actor, and what it needs."""
    needs = [("requires", step.requires)] if step.requires else []
    if step.images and not IMAGES_NEED.names <= step.requires.names:
        needs.append(("images", IMAGES_NEED))
    return needs


def _errors(
    graph: RecipeGraph,
    step: StepSpec,
    offered: Mapping[str, Capabilities | None],
    where: str,
    required: Capabilities,
) -> list[str]:
    errors: list[str] = []
    if step.actor == LEARNED:
        aliases = model_aliases(graph, step)
        if aliases and all(missing(required, offered.get(a)) for a in aliases):
            reasons = "; ".join(
                lacking_reason(a, missing(required, offered.get(a))) for a in aliases
            )
            errors.append(f"{where}: no candidate actor has it all: {reasons}")
    elif step.actor:
        lacking = missing(required, offered.get(step.actor))
        if lacking:
            errors.append(f"{where}: {lacking_reason(step.actor, lacking)}")
    for j, branch in enumerate(step.branches):
        j = branch.source_index if branch.source_index is not None else j
        alternative = branch.params.get("alternative_actor")
        named = [alternative] if isinstance(alternative, str) else alternative
        for k, alias in enumerate(named if isinstance(named, list) else []):
            if not isinstance(alias, str) or alias not in offered:
                continue
            lacking = missing(required, offered.get(alias))
            if lacking:
                at = "" if isinstance(alternative, str) else f"[{k}]"
                # The retry's branch is where to change it, whichever field needs it.
                errors.append(
                    f"{where.rsplit('.', 1)[0]}.branches[{j}].params.alternative_actor{at}: "
                    f"{lacking_reason(alias, lacking)}"
                )
    return errors
