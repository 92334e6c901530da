"""`tool_error`: a call to the tool (one named, or any) failed, or every call succeeded.

A tool step whose tool fails fails itself: a branch with this condition handles that, as one
asking about `execution_error` does. An llm step's model gets a failed call's error back and
goes on; the condition reads the calls it recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.answers import shorten
from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.tool_use import NO_TOOLS, check_tool, lint_for, tool_field
from workflows.engine.graph import Condition
from workflows.engine.tools import ToolCalls


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the optional tool name; the condition has no value."""
    return check_tool(fields, path, scope, required=False), None


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """`failed` holds when a call failed; `succeeded` when there were calls and none failed."""
    calls = ctx.tools()
    failed_asked = condition.operator == "failed"
    if calls is None:
        return False, NO_TOOLS
    tool = str(condition.fields.get("tool") or "")
    made = calls.of(tool)
    if not made:
        return False, f"did not call {tool or 'tools'}"
    failure = next((c for c in made if ToolCalls.failed(c)), None)
    if failure is not None:
        name = failure.get("tool") or tool
        return failed_asked, f"{name} failed: {shorten(ToolCalls.message(failure))}"
    count = "the call" if len(made) == 1 else f"all {len(made)} calls"
    return not failed_asked, f"{count} to {tool or 'tools'} succeeded"


CONDITION_TYPE = ConditionType(
    name="tool_error",
    label="Tool failed",
    help=(
        "A call to the tool (any tool, when none is named) failed, or there were calls and "
        "none failed. A branch with it handles a tool step whose tool failed."
    ),
    operators=(
        Operator("failed", "failed", "failed"),
        Operator("succeeded", "succeeded", "succeeded"),
    ),
    fields=(tool_field(),),
    summary={"*": "{tool} {symbol}"},
    check=check,
    evaluate=evaluate,
    lint=lint_for("tool_error"),
    asks_about_failure=True,
)
