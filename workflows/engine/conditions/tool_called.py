"""`tool_called`: the step called a tool (one named, or any), or did not."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.tool_use import NO_TOOLS, check_tool, lint_for, tool_field
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the optional tool name; the condition has no value."""
    return check_tool(fields, path, scope, required=False), None


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Count the calls of the tool (of any tool without one); `called` holds for one or more."""
    calls = ctx.tools()
    wanted = condition.operator == "called"
    if calls is None:
        return not wanted, NO_TOOLS
    tool = str(condition.fields.get("tool") or "")
    count = len(calls.of(tool))
    what = tool or "tools"
    if count == 0:
        return not wanted, f"did not call {what}"
    times = "once" if count == 1 else f"{count} times"
    return wanted, f"called {what} {times}"


CONDITION_TYPE = ConditionType(
    name="tool_called",
    label="Tool called",
    help="The step called the tool (any tool, when none is named) at least once, or did not.",
    operators=(
        Operator("called", "called", "called"),
        Operator("not_called", "not called", "not called"),
    ),
    fields=(tool_field(),),
    summary={"*": "{symbol} {tool}"},
    check=check,
    evaluate=evaluate,
    lint=lint_for("tool_called"),
)
