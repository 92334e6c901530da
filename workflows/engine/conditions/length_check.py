"""`length_check`: the response's length in characters or words compares true."""

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
from workflows.engine.conditions.values import format_number
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition

LENGTH_UNITS: tuple[str, ...] = ("chars", "words")


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the unit and that the value is a number."""
    unit = fields.get("unit")
    ok = True
    if unit is not None and unit not in LENGTH_UNITS:
        scope.error(f"{path}.unit", f"unknown unit {unit!r}; expected chars or words")
        ok = False
    valid, number = check_number(value, path, scope)
    return ok and valid, number


def prepare(condition: Condition) -> object:
    """Return the limit and whether it counts words."""
    return number_value(condition), condition.fields.get("unit") == "words"


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare the response's length with the limit."""
    limit, in_words = prepared
    size = ctx.word_count() if in_words else len(ctx.text)
    result, symbol = compare_numbers(condition.operator, size, limit)
    unit = " words" if in_words else ""
    return result, f"length {size}{unit} {symbol} {format_number(limit)}"


CONDITION_TYPE = ConditionType(
    name="length_check",
    label="Length of the response",
    help="The response's length, in characters or words, compares true.",
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        FieldSpec("value", "Length", "number", required=True),
        FieldSpec(
            "unit",
            "Unit",
            "choice",
            choices=LENGTH_UNITS,
            default="chars",
            display={"chars": "", "words": " words"},
        ),
    ),
    summary={"*": "len {symbol} {value}{unit}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    reads_answer=True,
)
