"""`classification_failed`: the classify step got no readable answer (or, with `false`, did).

A classifier whose answer about a route stays unreadable after its reclassifications leaves
the selection unknown. The step then fails with the reason, and only a branch taken that reads
this condition (`asks_about_classification`) or asks about errors takes the run on: choosing
the default branch on an unknown selection would hide the failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.answers import shorten
from workflows.engine.conditions.base import ConditionScope, ConditionType, ConditionUse, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.flag import check_flag, prepare_flag
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition, StepSpec

NAME = "classification_failed"
CLASSIFY = "classify"  # the step kind, by name: conditions import no step kinds
_REASON_LIMIT = 200  # the reasons of several routes, each with its answer shortened


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the true/false value."""
    return check_flag(value, path, scope)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the classifier's failing is what the condition asks."""
    failure = ctx.classification_failure
    if failure is None:
        return prepared is False, "classification did not fail"
    return prepared is True, f"classification failed: {shorten(failure, _REASON_LIMIT)}"


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about the condition on a step that classifies nothing: it never holds."""
    if step.kind == CLASSIFY:
        return []
    return [f"{use.path}: never holds: only a classify step can fail to classify" for use in uses]


CONDITION_TYPE = ConditionType(
    name=NAME,
    label="Classification failed",
    help="The classify step got no readable answer from its classifier, even after asking "
    "again: the step fails, and only a branch taken on this condition (or an error branch) "
    "takes the run on.",
    operators=(Operator("equals", "is", "="),),
    fields=(
        FieldSpec(
            "value",
            "Failed",
            "boolean",
            default=True,
            display={"true": "unclassified", "": "unclassified", "false": "classified"},
        ),
    ),
    summary={"*": "{value}"},
    check=check,
    prepare=prepare_flag,
    evaluate=evaluate,
    lint=lint,
    asks_about_classification=True,
)
