"""`tool_result`: a field of the last result of a tool compares true, like `field_compare`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions import field_compare
from workflows.engine.conditions.base import ConditionScope, ConditionType
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.numeric import (
    NUMERIC_OPERATOR_ALIASES,
    NUMERIC_OPERATORS,
)
from workflows.engine.conditions.tool_use import NO_TOOLS, check_tool, lint_for, tool_field
from workflows.engine.conditions.values import field_path, lookup
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition
from workflows.engine.tools import ToolCalls, json_data


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the tool, the field path (empty: the whole result) and the value."""
    ok = check_tool(fields, path, scope, required=True)
    if fields.get("field") in (None, ""):
        # No path: the result itself is compared, so `field` need not be given.
        fields = {**fields, "field": "result"}
    valid, checked = field_compare.check(op, value, fields, path, scope)
    return ok and valid, checked


def prepare(condition: Condition) -> object:
    """Return the split field path (empty: the whole result) and the value."""
    name = str(condition.fields.get("field") or "")
    prepared = field_compare.prepare(condition)
    assert isinstance(prepared, tuple)
    expected = prepared[1]
    return (field_path(name) if name else ()), expected


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Read the field of the tool's last successful result (JSON) and compare it."""
    path, expected = prepared
    tool = str(condition.fields.get("tool") or "")
    calls = ctx.tools()
    if calls is None:
        return False, NO_TOOLS
    made = [c for c in calls.of(tool) if not ToolCalls.failed(c)]
    if not made:
        return False, f"no result of {tool}"
    text = str(made[-1].get("result") or "")
    data = json_data(text)
    value: object = text if data is None else data
    name = ".".join(path)
    label = f"tool {tool} field {name}" if name else f"tool {tool} result"
    if path:
        if not isinstance(value, Mapping):
            return False, f"tool {tool} result is not a JSON object"
        found, value = lookup(value, path)
        if not found:
            return False, f"{label} missing"
    return field_compare.compare_found(condition.operator, label, value, expected)


CONDITION_TYPE = ConditionType(
    name="tool_result",
    label="Tool result",
    help=(
        "A field of the last successful result of the tool (a JSON object) compares true; "
        "without a field, the result itself. A missing field, or no result, is false."
    ),
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        tool_field(required=True),
        FieldSpec(
            "field",
            "Field",
            "path",
            help="e.g. total or data.items (a list counts its items); empty: the whole result.",
            display={"": "result"},
        ),
        FieldSpec(
            "value",
            "Value",
            "number",
            required=True,
            help="A number; equals and not_equals also compare text, true, false or null.",
        ),
    ),
    summary={"*": "{tool} {field} {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint_for("tool_result"),
)
