"""`classification_failed`: the classify step got no readable answer (or, with `false`, did).

A classifier whose answer about a route stays unreadable after its reclassifications leaves
the selection unknown. The step then fails with the reason (its error branch, if any, takes
the run on) unless one of its branches reads this condition (`handles_failure`): choosing
the default branch on an unknown selection would hide the failure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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


def _conditions(condition: Condition) -> Iterator[Condition]:
    yield condition
    for sub in condition.conditions:
        yield from _conditions(sub)


def handles_failure(step: StepSpec) -> bool:
    """Tell whether an active branch of the step reads `classification_failed`."""
    return any(c.type == NAME for branch in step.active_branches for c in _conditions(branch.when))


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about the condition on a step that classifies nothing: it never holds."""
    if step.kind == CLASSIFY:
        return []
    return [f"{use.path}: never holds: only a classify step can fail to classify" for use in uses]


CONDITION_TYPE = ConditionType(
    name=NAME,
    label="Classification failed",
    help="The classify step got no readable answer from its classifier, even after asking "
    "again; without such a branch (or an error branch) the step fails.",
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
)
