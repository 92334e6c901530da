"""What the conditions on a step's tool calls (`tool_called`, `tool_error`, `tool_result`)
share: their optional `tool` field, and their lint rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionUse, Lint
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import StepSpec
from workflows.engine.tools import tool_name_problem

NO_TOOLS = "step could call no tools"


def tool_field(*, required: bool = False) -> FieldSpec:
    """Return the spec of a condition's `tool` field."""
    return FieldSpec(
        "tool",
        "Tool",
        "text",
        required=required,
        help="SERVER.TOOL" + ("" if required else "; empty: any tool the step called."),
        display={"": "a tool"},
    )


def check_tool(
    fields: Mapping[str, Any], path: str, scope: ConditionScope, *, required: bool
) -> bool:
    """Check the condition's `tool` field; report a problem at `path.tool`."""
    tool = fields.get("tool")
    if tool is None or tool == "":
        if required:
            scope.error(f"{path}.tool", "is required: the tool, as SERVER.TOOL")
            return False
        return True
    problem = tool_name_problem(tool)
    if problem is not None:
        scope.error(f"{path}.tool", problem)
        return False
    return True


def step_tools(step: StepSpec) -> tuple[str, ...]:
    """Return the tools a step may call: an llm step's `tools`, a tool step's one."""
    return (step.tool,) if step.tool else step.tools


def lint_for(type_name: str) -> Lint:
    """Return the lint rule of a condition type on tool calls: warn when the step calls none,
    or names a tool the step cannot call."""

    def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
        tools = step_tools(step)
        warnings = []
        for use in uses:
            named = use.condition.fields.get("tool")
            if not tools:
                warnings.append(f"{use.path}: the step calls no tools, so {type_name} never holds")
            elif named and named not in tools:
                warnings.append(
                    f"{use.path}: the step cannot call {named} (it calls {', '.join(tools)})"
                )
        return warnings

    return lint
