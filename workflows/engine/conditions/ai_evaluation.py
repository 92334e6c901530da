"""`ai_evaluation`: an evaluator model's score of the response compares true."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.checks import actor_alias_problem
from workflows.engine.conditions.base import ConditionScope, ConditionType, ConditionUse
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.numeric import (
    NUMERIC_OPERATOR_ALIASES,
    NUMERIC_OPERATORS,
    check_number,
    holds,
    number_value,
    reason_symbol,
)
from workflows.engine.conditions.values import format_number
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition, StepSpec

DEFAULT_EVALUATION_PROMPT = "Rate the quality of this text from 1 to 10."


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the evaluator alias, the prompt and that the threshold is a number."""
    ok = True
    evaluator = fields.get("evaluator")
    problem = None if evaluator is None else actor_alias_problem(evaluator, scope.actors)
    if problem:
        scope.error(f"{path}.evaluator", problem)
        ok = False
    else:
        prompt = fields.get("prompt")
        if prompt is not None and not isinstance(prompt, str):
            scope.error(f"{path}.prompt", f"must be a string, got {type(prompt).__name__}")
            ok = False
    valid, number = check_number(value, path, scope)
    return ok and valid, number


def prepare(condition: Condition) -> object:
    """Return the threshold."""
    return number_value(condition)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Ask the judge (once per evaluator and prompt) and compare its score."""
    evaluator = condition.fields.get("evaluator") or ctx.default_evaluator
    if not evaluator:
        return False, "no evaluator for ai_evaluation"
    prompt = condition.fields.get("prompt") or DEFAULT_EVALUATION_PROMPT
    score, problem = ctx.score(str(evaluator), str(prompt))
    if score is None:
        return False, problem
    symbol = reason_symbol(condition.operator)
    scored = f"judge scored {format_number(score)}"
    if holds(condition.operator, score, prepared):
        return True, f"{scored} {symbol} {format_number(prepared)}"
    return False, f"{scored}, needs {symbol} {format_number(prepared)}"


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about each judge score that names no evaluator: say which actor will judge."""
    fallback = (step.validation or {}).get("judge") or step.actor
    return [
        f"{use.path}.evaluator: not set; the step's judge or actor '{fallback}' will evaluate"
        for use in uses
        if not use.condition.fields.get("evaluator")
    ]


CONDITION_TYPE = ConditionType(
    name="ai_evaluation",
    label="Judge score (AI evaluation)",
    help=(
        "An evaluator model's score of the response (the first number of its answer, 1 to 10 "
        "by default) compares true; asked once per step result per evaluator and prompt, "
        "with the response passed as quoted data."
    ),
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        FieldSpec("value", "Score", "number", required=True),
        FieldSpec(
            "evaluator",
            "Judge",
            "actor",
            help="Default: the step's validation judge, else the step's actor.",
            display={"": "judge"},
        ),
        FieldSpec("prompt", "Judge prompt", "text", default=DEFAULT_EVALUATION_PROMPT),
    ),
    summary={"*": "{evaluator} {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
)
