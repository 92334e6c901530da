"""`human_decision`: the reviewer of the preceding human step chose an option."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, ConditionUse, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition, StepSpec


def choices(value: object) -> frozenset[str]:
    """Return the options a `human_decision` value names: `approve` or `approve|revise`."""
    parts = [str(v) for v in value] if isinstance(value, list | tuple) else str(value).split("|")
    return frozenset(p.strip().lower() for p in parts if p.strip())


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the options named; on a step that offers options, they must be among them."""
    names = choices(value) if isinstance(value, str | list) else frozenset()
    if not names or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
        scope.error(f"{path}.value", "must name an option, e.g. 'approve' or 'approve|revise'")
        return False, None
    if scope.step_options is not None:
        unknown = sorted(names - set(scope.step_options))
        if unknown:
            scope.error(
                f"{path}.value",
                f"unknown option '{unknown[0]}'; "
                f"the step's options are {', '.join(scope.step_options)}",
            )
            return False, None
    return True, "|".join(sorted(names))


def prepare(condition: Condition) -> object:
    """Return the options named."""
    return choices(condition.value)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the reviewer's decision is one of the options."""
    if ctx.decision is None:
        return False, "no reviewer decision"
    chosen = ctx.decision.strip().lower()
    if chosen in prepared:
        return True, f"reviewer chose {chosen}"
    return False, f"reviewer chose {chosen}, not {'|'.join(sorted(prepared))}"


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about each option of a human step that no active branch of the type handles."""
    # Only a `human` step offers options (every StepSpec carries the default ones).
    if step.kind != "human":
        return []
    handled: set[str] = set()
    for use in uses:
        if use.branch.active:
            handled |= choices(use.condition.value)
    return [
        f"{step_path}.options: no human_decision branch handles the option '{option}'"
        for option in step.options
        if option not in handled
    ]


CONDITION_TYPE = ConditionType(
    name="human_decision",
    label="Reviewer decision",
    help="The reviewer of the preceding human step chose the option (or one of them).",
    operators=(Operator("user_choice", "reviewer chose", "="),),
    fields=(
        FieldSpec(
            "value",
            "Option",
            "text",
            required=True,
            help="An option of the human step, or several: approve|revise.",
        ),
    ),
    summary={"*": "human: {value}"},
    words="{value}",
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
)
