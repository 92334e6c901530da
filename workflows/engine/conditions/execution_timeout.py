"""`execution_timeout`: the step timed out (or, with `false`, did not)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.flag import check_flag, prepare_flag
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the true/false value."""
    return check_flag(value, path, scope)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the step's timing out is what the condition asks."""
    reason = "step timed out" if ctx.timed_out else "step did not time out"
    return ctx.timed_out == prepared, reason


CONDITION_TYPE = ConditionType(
    name="execution_timeout",
    label="Step timed out",
    help="The step timed out (a model that did not answer in time, a human task past due).",
    operators=(Operator("equals", "is", "="),),
    fields=(
        FieldSpec(
            "value",
            "Timed out",
            "boolean",
            default=True,
            display={"true": "timeout", "": "timeout", "false": "no timeout"},
        ),
    ),
    summary={"*": "{value}"},
    check=check,
    prepare=prepare_flag,
    evaluate=evaluate,
    asks_about_failure=True,
)
