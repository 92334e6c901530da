"""`default`: always true; the branch taken when no earlier one is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Accept any value: a default has none (it is dropped)."""
    return True, None


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Hold, always."""
    return True, "default"


CONDITION_TYPE = ConditionType(
    name="default",
    label="Default (always)",
    help="Always: put it last, as the branch taken when no earlier one is.",
    operators=(Operator("always", "always", ""),),
    fields=(),
    summary={"*": "default"},
    words="otherwise",
    check=check,
    evaluate=evaluate,
)
