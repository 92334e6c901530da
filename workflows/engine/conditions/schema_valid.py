"""`schema_valid`: the step's answer met its `output_schema` (or, with `false`, none did).

A step whose answers never met the schema fails, with the errors as its error: a branch with
this condition (`false`) takes the run on, as an error branch would. On a step that checked
no answer (no schema, or its model failed before answering) it holds neither way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, ConditionUse, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.flag import check_flag, prepare_flag
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition, StepSpec

NOT_CHECKED = "no answer of the step was checked against an output schema"


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the true/false value."""
    return check_flag(value, path, scope)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the step's last answer meeting its schema is what the condition asks."""
    schema = ctx.schema
    if schema is None:
        return False, NOT_CHECKED
    return schema.valid == prepared, schema.reason()


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about the condition on a step with no output schema: it never holds."""
    if step.output_schema is not None:
        return []
    return [
        f"{use.path}: never holds: the step has no output_schema (set one on an llm step)"
        for use in uses
    ]


CONDITION_TYPE = ConditionType(
    name="schema_valid",
    label="Schema valid",
    help=(
        "The step's answer met its output_schema (false: no answer did, within its "
        "output_schema_attempts; a branch with it takes that failed step on)."
    ),
    operators=(Operator("equals", "is", "="),),
    fields=(
        FieldSpec(
            "value",
            "Valid",
            "boolean",
            default=True,
            display={"true": "schema valid", "": "schema valid", "false": "schema invalid"},
        ),
    ),
    summary={"*": "{value}"},
    check=check,
    prepare=prepare_flag,
    evaluate=evaluate,
    lint=lint,
    asks_about_failure=True,
)
