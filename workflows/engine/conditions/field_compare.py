"""`field_compare` (alias `check_count`): a field of the run's facts compares true."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from workflows.engine.answers import shorten
from workflows.engine.conditions.base import ConditionScope, ConditionType
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.numeric import (
    NUMERIC_OPERATOR_ALIASES,
    NUMERIC_OPERATORS,
    check_number,
    compare_numbers,
)
from workflows.engine.conditions.values import (
    as_number,
    field_path,
    format_number,
    lookup,
    quote,
)
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the field path and the value: a number, or with (not_)equals any JSON scalar."""
    ok = True
    name = fields.get("field")
    if not isinstance(name, str) or not name.strip():
        scope.error(
            f"{path}.field", "is required" if name is None else "must be a dotted field path"
        )
        ok = False
    # equals / not_equals may compare a field with text, a boolean or null, too.
    textual = isinstance(value, bool) or (
        (isinstance(value, str) or value is None) and as_number(value) is None
    )
    if op in ("equals", "not_equals") and textual:
        return ok, value
    valid, number = check_number(value, path, scope)
    return ok and valid, number


def prepare(condition: Condition) -> object:
    """Return the split field path and the value (a number when it reads as one)."""
    name = str(condition.fields.get("field", ""))
    number = as_number(condition.value)
    is_number = number is not None and not isinstance(condition.value, list | tuple | dict)
    return field_path(name), number if is_number else condition.value


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare the fact at the path: as numbers when the value is one, else as equal or not."""
    path, expected = prepared
    name = ".".join(path)
    found, value = lookup(ctx.facts, path)
    if not found:
        return False, f"field {name} missing"
    return compare_found(condition.operator, f"field {name}", value, expected)


def compare_found(op: str, label: str, value: object, expected: object) -> tuple[bool, str]:
    """Compare a value found (a fact, a tool's result) with the condition's: as numbers when
    the expected value is one, else as equal or not; the reason starts with `label`."""
    if isinstance(expected, int | float) and not isinstance(expected, bool):
        actual = as_number(value)
        if actual is None:
            return False, f"{label} is not a number: {shorten(repr(value))}"
        result, symbol = compare_numbers(op, actual, expected)
        return result, f"{label} {format_number(actual)} {symbol} {format_number(expected)}"
    same = value == expected or (
        isinstance(expected, str) and not isinstance(value, str) and str(value) == expected
    )
    result = same if op == "equals" else not same
    shown = quote(value) if isinstance(value, str) else shorten(json.dumps(value, default=str))
    want = quote(expected) if isinstance(expected, str) else json.dumps(expected, default=str)
    return result, f"{label} {shown} {'==' if same else '!='} {want}"


CONDITION_TYPE = ConditionType(
    name="field_compare",
    aliases=("check_count",),
    label="Compare a field",
    help=(
        "A field of the run's facts (the inputs, overlaid with the previous response when "
        "it is a JSON object) compares true; a missing field is false."
    ),
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        FieldSpec(
            "field",
            "Field",
            "path",
            required=True,
            help="e.g. image_count or data.score (a list counts its items).",
            display={"": "?"},
        ),
        FieldSpec(
            "value",
            "Value",
            "number",
            required=True,
            help="A number; equals and not_equals also compare text, true, false or null.",
        ),
    ),
    summary={"*": "{field} {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
)
