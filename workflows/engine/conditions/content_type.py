"""`content_type`: the response's detected content type is (or is not) a given one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition

CONTENT_TYPES: tuple[str, ...] = ("code", "numbers", "json", "list", "prose")


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check that the value names a content type."""
    if value not in CONTENT_TYPES:
        scope.error(
            f"{path}.value",
            f"unknown content type {value!r}; expected one of: {', '.join(CONTENT_TYPES)}",
        )
        return False, None
    return True, value


def prepare(condition: Condition) -> object:
    """Return the content type named."""
    return str(condition.value)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare the response's detected content type with the one named."""
    detected = ctx.content_type()
    same = detected == prepared
    reason = (
        f"content type is {detected}" if same else f"content type is {detected}, not {prepared}"
    )
    return same if condition.operator == "is" else not same, reason


CONDITION_TYPE = ConditionType(
    name="content_type",
    label="Content type",
    help="The response's content type, detected by rules, is (or is not) the one named.",
    operators=(Operator("is", "is", "="), Operator("is_not", "is not", "≠")),
    fields=(FieldSpec("value", "Content type", "choice", required=True, choices=CONTENT_TYPES),),
    summary={"is_not": "is not {value}", "*": "is {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    reads_answer=True,
)
