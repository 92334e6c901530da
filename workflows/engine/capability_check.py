"""Check at publish that each step's actors have what the step needs (`capabilities.py`): what
it `requires`, and vision for a step that shows its model `images` (`images.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from workflows.engine.actor_choice import model_aliases
from workflows.engine.capabilities import NONE, Capabilities, lacking_reason, missing
from workflows.engine.graph import RecipeGraph, StepSpec
from workflows.engine.images import NEEDS as IMAGES_NEED
from workflows.engine.vocabulary import LEARNED


def capability_errors(graph: RecipeGraph, offered: Mapping[str, Capabilities | None]) -> list[str]:
    """Return the publish errors of steps whose actors lack what they need.

    `offered`: each model alias's capabilities (None or absent: not declared, so not checked,
    except for images: an actor shows images only when it declares vision). A step's own
    actor and a retry's `alternative_actor` must have every requirement; a `@learned` step
    needs at least one candidate that has (the others are skipped when it chooses). What the
    step's `requires` names is reported there, the vision its `images` need at `images`.
    """
    errors: list[str] = []
    for i, step in enumerate(graph.steps):
        where = f"steps[{i}] ('{step.key}')"
        for field, required, must_declare in _needs(step):
            # A model shown images it cannot see fails every run: images need vision declared.
            has = _declared(offered) if must_declare else offered
            errors += _errors(graph, step, has, f"{where}.{field}", required)
    return errors


def _declared(offered: Mapping[str, Capabilities | None]) -> dict[str, Capabilities | None]:
    """`offered`, with an actor that declares nothing taken to have nothing."""
    return {alias: NONE if has is None else has for alias, has in offered.items()}


def _needs(step: StepSpec) -> list[tuple[str, Capabilities, bool]]:
    """Each field of the step that needs something of its actor, what it needs, and whether
    the actor must declare it (vision for images) rather than be taken to have it."""
    if not step.images:
        return [("requires", step.requires, False)] if step.requires else []
    # Vision, when the step requires it too, is reported where the recipe asks for it.
    field = "requires" if IMAGES_NEED.names <= step.requires.names else "images"
    rest = Capabilities(step.requires.names - IMAGES_NEED.names, step.requires.context)
    needs = [("requires", rest, False)] if rest else []
    return [*needs, (field, IMAGES_NEED, True)]


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
