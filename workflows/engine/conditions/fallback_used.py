"""`fallback_used`: the step's validation loop ended below its threshold and its fallback
text replaced the answer (or, with `false`, did not)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.flag import check_flag, prepare_flag
from workflows.engine.conditions.validation_loop import NO_LOOP, lint, verdict
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the true/false value."""
    return check_flag(value, path, scope)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the fallback's use is what the condition asks."""
    loop = ctx.validation
    if loop is None:
        return False, NO_LOOP
    said = "fallback used" if loop.fallback_used else "fallback not used"
    return loop.fallback_used == prepared, f"{said}: {verdict(loop)}"


CONDITION_TYPE = ConditionType(
    name="fallback_used",
    label="Validation fallback used",
    help="No answer of the step's validation loop reached its threshold: the fallback "
    "text replaced it.",
    operators=(Operator("equals", "is", "="),),
    fields=(
        FieldSpec(
            "value",
            "Fallback used",
            "boolean",
            default=True,
            display={"true": "fallback", "": "fallback", "false": "no fallback"},
        ),
    ),
    summary={"*": "{value}"},
    check=check,
    prepare=prepare_flag,
    evaluate=evaluate,
    lint=lint,
    reads_answer=True,
)
