"""`route_selected`: a preceding classify step selected a route."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import listed
from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check that the value names a route of one of the recipe's classify steps."""
    if not isinstance(value, str) or not value:
        scope.error(f"{path}.value", "must name a route")
        return False, None
    if value not in scope.route_names:
        scope.error(
            f"{path}.value", f"unknown route '{value}'; routes: {listed(scope.route_names)}"
        )
        return False, None
    return True, value


def prepare(condition: Condition) -> object:
    """Return the route named."""
    return str(condition.value)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the latest classification selected the route."""
    selection = ctx.route_selection
    if selection is None:
        return False, "no route selection yet"
    if prepared in selection:
        return True, f"route {prepared} selected"
    return False, f"route {prepared} not selected (selected: {', '.join(selection) or 'none'})"


CONDITION_TYPE = ConditionType(
    name="route_selected",
    label="Route selected (classify)",
    help="A preceding classify step selected this route.",
    operators=(Operator("includes", "includes", "∋"),),
    fields=(
        FieldSpec("value", "Route", "text", required=True, help="The name of a classify route."),
    ),
    summary={"*": "route: {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
)
