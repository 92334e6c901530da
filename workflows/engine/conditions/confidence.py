"""`confidence`: the final confidence of the step's validation loop compares true."""

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
from workflows.engine.conditions.validation_loop import NO_LOOP, lint, shown
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check that the value is a number from 0 to 1 (confidences are)."""
    ok, number = check_number(value, path, scope)
    if ok and not 0 <= number <= 1:
        scope.error(f"{path}.value", f"must be a confidence from 0 to 1, got {value!r}")
        return False, None
    return ok, number


def prepare(condition: Condition) -> object:
    """Return the value compared with."""
    return number_value(condition)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare the loop's final confidence with the value."""
    if ctx.validation is None:
        return False, NO_LOOP
    actual = ctx.validation.confidence
    result, symbol = compare_numbers(condition.operator, actual, prepared)
    return result, f"confidence {shown(actual)} {symbol} {shown(prepared)}"


CONDITION_TYPE = ConditionType(
    name="confidence",
    label="Validation confidence",
    help="The final confidence (0 to 1) of the step's validation loop compares true.",
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(FieldSpec("value", "Confidence", "number", required=True),),
    summary={"*": "confidence {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
    reads_answer=True,
)
