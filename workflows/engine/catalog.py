"""Publish the condition types, step kinds and actions as one JSON-able catalog.

The editor sends it to the page (its forms and canvas labels are built from it), lint and
the format documentation read it: nothing outside the engine keeps its own table of types,
operators or fields.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.conditions.logical import LOGICAL_TYPES
from workflows.engine.conditions.registry import TYPES
from workflows.engine.field_spec import FieldSpec
from workflows.engine.outcomes import default_outcome
from workflows.engine.priority_bands import BANDS
from workflows.engine.step_kinds.registry import KINDS
from workflows.engine.vocabulary import (
    ACTION_ALIASES,
    ACTION_LABELS,
    ACTION_PARAMS,
    MAX_RETRIES_PARAM,
    OUTCOMES,
    REPEAT_ACTIONS,
    repeats_step,
)

# A branch field of its own: what taking the branch says of the step's attempt.
COUNTS_AS = FieldSpec(
    "counts_as",
    "Counts as",
    "choice",
    choices=OUTCOMES,
    help=(
        "What taking this branch says of the step's answer, for the actor statistics. "
        "Empty: the action's default (see each action's counts_as), or approve/reject for a "
        "reviewer's decision."
    ),
)


def action_params(action: str, *, target: str) -> tuple[str, ...]:
    """Return the `params` a branch with `action` (canonical) and `target` reads."""
    params = ACTION_PARAMS.get(action, ())
    return (*params, MAX_RETRIES_PARAM) if repeats_step(action, target) else params


def catalog() -> dict[str, Any]:
    """Return the catalog: condition types, combinators, step kinds, actions, the branch
    fields beside them (`counts_as`) and the bands of branch priorities."""
    return {
        "conditions": [kind.as_json() for kind in TYPES],
        "logical": list(LOGICAL_TYPES),
        "steps": [kind.as_json() for kind in KINDS],
        "actions": [
            {
                "name": name,
                "label": label,
                "repeats": name in REPEAT_ACTIONS,
                "counts_as": default_outcome(name),
            }
            for name, label in ACTION_LABELS.items()
        ],
        "action_aliases": dict(ACTION_ALIASES),
        "branch_fields": [COUNTS_AS.as_json()],
        "priority_bands": [
            {"name": b.name, "label": b.label, "low": b.low, "high": b.high} for b in BANDS
        ],
    }
