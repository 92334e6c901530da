"""`execution_error`: the step failed, or its error contains a text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.answers import shorten
from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.flag import check_flag, prepare_flag
from workflows.engine.conditions.values import quote
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the true/false value (equals) or the text to look for (contains)."""
    if op == "equals":
        return check_flag(value, path, scope)
    if not isinstance(value, str) or not value:
        scope.error(f"{path}.value", "must be the text to look for in the error")
        return False, None
    return True, value


def prepare(condition: Condition) -> object:
    """Return the folded text to look for (contains), else the value as a bool."""
    if condition.operator == "contains":
        return str(condition.value).casefold()
    return prepare_flag(condition)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the step failed (as asked), or whether its error holds the text."""
    error = ctx.error
    if condition.operator == "contains":
        if error is None:
            return False, "step did not fail"
        if prepared in error.casefold():
            return True, f"error contains {quote(prepared)}"
        return False, f"error does not contain {quote(prepared)}"
    if error is None:
        return prepared is False, "step did not fail"
    return prepared is True, f"step failed: {shorten(error)}"


CONDITION_TYPE = ConditionType(
    name="execution_error",
    label="Step failed",
    help="The step failed (a provider error after its retries), or its error contains the text.",
    operators=(Operator("equals", "is", "="), Operator("contains", "contains", "has")),
    fields=(
        FieldSpec(
            "value",
            "Failed / error text",
            "text",
            default=True,
            help="true or false with equals; the text to look for in the error with contains.",
            display={"true": "error", "": "error", "false": "no error"},
        ),
    ),
    # The display map reads true/false: the text `contains` looks for is shown as written.
    summary={"contains": 'error has "{value!raw}"', "*": "{value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    asks_about_failure=True,
)
