"""Publish the condition types, step kinds and actions as one JSON-able catalog.

The editor sends it to the page (its forms and canvas labels are built from it), lint and
the format documentation read it: nothing outside the engine keeps its own table of types,
operators or fields.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.conditions.logical import LOGICAL_TYPES
from workflows.engine.conditions.registry import TYPES
from workflows.engine.step_kinds.registry import KINDS
from workflows.engine.vocabulary import ACTION_ALIASES, ACTION_LABELS, REPEAT_ACTIONS


def catalog() -> dict[str, Any]:
    """Return the catalog: condition types, combinators, step kinds and actions."""
    return {
        "conditions": [kind.as_json() for kind in TYPES],
        "logical": list(LOGICAL_TYPES),
        "steps": [kind.as_json() for kind in KINDS],
        "actions": [
            {"name": name, "label": label, "repeats": name in REPEAT_ACTIONS}
            for name, label in ACTION_LABELS.items()
        ],
        "action_aliases": dict(ACTION_ALIASES),
    }
