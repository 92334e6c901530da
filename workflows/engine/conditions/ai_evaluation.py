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


# The reference seeds spell the fields `evaluator_actor` and `eval_prompt`: read as the same.
EVALUATOR = FieldSpec(
    "evaluator",
    "Judge",
    "actor",
    help="Default: the step's validation judge, else the step's actor.",
    display={"": "judge"},
    aliases=("evaluator_actor",),
)
PROMPT = FieldSpec(
    "prompt", "Judge prompt", "text", default=DEFAULT_EVALUATION_PROMPT, aliases=("eval_prompt",)
)


def _spelling_problems(
    spec: FieldSpec, fields: Mapping[str, Any], path: str
) -> list[tuple[str, str]]:
    """Return (path, message) for each alias whose value differs from the field's own."""
    given = fields.get(spec.name)
    return [
        (f"{path}.{alias}", f"names {other!r}, but {spec.name} says {given!r}; give one of them")
        for alias in spec.aliases
        if given is not None and (other := fields.get(alias)) is not None and other != given
    ]


def _given_key(spec: FieldSpec, fields: Mapping[str, Any]) -> str:
    """Return the key the document gives the field under (its name when it gives none)."""
    return next((k for k in (spec.name, *spec.aliases) if fields.get(k) is not None), spec.name)


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the evaluator alias, the prompt (either spelling, not two different values)
    and that the threshold is a number."""
    ok = True
    for spec in (EVALUATOR, PROMPT):
        for where, message in _spelling_problems(spec, fields, path):
            scope.error(where, message)
            ok = False
    evaluator = EVALUATOR.value_in(fields)
    problem = None if evaluator is None else actor_alias_problem(evaluator, scope.actors)
    if problem:
        scope.error(f"{path}.{_given_key(EVALUATOR, fields)}", problem)
        ok = False
    prompt = PROMPT.value_in(fields)
    if prompt is not None and not isinstance(prompt, str):
        scope.error(
            f"{path}.{_given_key(PROMPT, fields)}", f"must be a string, got {type(prompt).__name__}"
        )
        ok = False
    valid, number = check_number(value, path, scope)
    return ok and valid, number


def prepare(condition: Condition) -> object:
    """Return the threshold."""
    return number_value(condition)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Ask the judge (once per evaluator and prompt) and compare its score."""
    evaluator = EVALUATOR.value_in(condition.fields) or ctx.default_evaluator
    if not evaluator:
        return False, "no evaluator for ai_evaluation"
    prompt = PROMPT.value_in(condition.fields) or DEFAULT_EVALUATION_PROMPT
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
        if not EVALUATOR.value_in(use.condition.fields)
    ]


CONDITION_TYPE = ConditionType(
    name="ai_evaluation",
    label="Judge score (AI evaluation)",
    help=(
        "An evaluator model's score of the response compares true: the number its answer "
        "marks as the score (`Score: 7`, `8/10`, or its one number), on the scale its prompt "
        "names (the default prompt asks for 1 to 10, where `4/5` reads as 8; a prompt that "
        "names none takes the number as written); no score (an answer off the scale, a "
        "refusal, several unmarked numbers) is false, with why. Asked once per step result "
        "per evaluator and prompt, with the response passed as quoted data. The branch's "
        "`params` may give the evaluator, prompt and score as the seeds do "
        "(`evaluator_actor`, `eval_prompt`, `threshold`); they are stored as `when` fields."
    ),
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        FieldSpec("value", "Score", "number", required=True),
        EVALUATOR,
        PROMPT,
    ),
    summary={"*": "{evaluator} {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
    # Note 000 gives a judge branch's settings in its metadata (`params`), as these keys.
    params={"evaluator_actor": "evaluator", "eval_prompt": "prompt", "threshold": "value"},
    reads_answer=True,
)
