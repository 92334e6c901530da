"""Check at publish that each step's actors have what the step `requires` (`capabilities.py`)."""

from __future__ import annotations

from collections.abc import Mapping

from workflows.engine.actor_choice import model_aliases
from workflows.engine.capabilities import Capabilities, lacking_reason, missing
from workflows.engine.graph import RecipeGraph
from workflows.engine.vocabulary import LEARNED


def capability_errors(graph: RecipeGraph, offered: Mapping[str, Capabilities | None]) -> list[str]:
    """Return the publish errors of steps whose actors lack what they require.

    `offered`: each model alias's capabilities (None or absent: not declared). A step's own
    actor and a retry's `alternative_actor` must have every requirement; a `@learned` step
    needs at least one candidate that has (the others are skipped when it chooses).
    """
    errors: list[str] = []
    for i, step in enumerate(graph.steps):
        if not step.requires:
            continue
        where = f"steps[{i}] ('{step.key}')"
        if step.actor == LEARNED:
            aliases = model_aliases(graph, step)
            if aliases and all(missing(step.requires, offered.get(a)) for a in aliases):
                reasons = "; ".join(
                    lacking_reason(a, missing(step.requires, offered.get(a))) for a in aliases
                )
                errors.append(f"{where}.requires: no candidate actor has it all: {reasons}")
        elif step.actor:
            lacking = missing(step.requires, offered.get(step.actor))
            if lacking:
                errors.append(f"{where}.requires: {lacking_reason(step.actor, lacking)}")
        for j, branch in enumerate(step.branches):
            j = branch.source_index if branch.source_index is not None else j
            alternative = branch.params.get("alternative_actor")
            named = [alternative] if isinstance(alternative, str) else alternative
            for k, alias in enumerate(named if isinstance(named, list) else []):
                if not isinstance(alias, str) or alias not in offered:
                    continue
                lacking = missing(step.requires, offered.get(alias))
                if lacking:
                    at = "" if isinstance(alternative, str) else f"[{k}]"
                    errors.append(
                        f"{where}.branches[{j}].params.alternative_actor{at}: "
                        f"{lacking_reason(alias, lacking)}"
                    )
    return errors
