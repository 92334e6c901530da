"""`attempts`: the number of answers the step's validation loop asked for compares true."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.numeric import (
    NUMERIC_OPERATOR_ALIASES,
    NUMERIC_OPERATORS,
    check_number,
    compare_numbers,
    number_value,
)
from workflows.engine.conditions.validation_loop import NO_LOOP, lint
from workflows.engine.conditions.values import format_number
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check that the value is a whole number of attempts (0 or more)."""
    ok, number = check_number(value, path, scope)
    if ok and (not float(number).is_integer() or number < 0):
        scope.error(f"{path}.value", f"must be a whole number of attempts, got {value!r}")
        return False, None
    return ok, number


def prepare(condition: Condition) -> object:
    """Return the value compared with."""
    return number_value(condition)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare the loop's number of attempts with the value."""
    if ctx.validation is None:
        return False, NO_LOOP
    actual = ctx.validation.attempts
    result, symbol = compare_numbers(condition.operator, actual, prepared)
    return result, f"attempts {actual} {symbol} {format_number(prepared)}"


CONDITION_TYPE = ConditionType(
    name="attempts",
    label="Validation attempts",
    help="The number of answers the step's validation loop asked for compares true.",
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(FieldSpec("value", "Attempts", "integer", required=True),),
    summary={"*": "attempts {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
)
