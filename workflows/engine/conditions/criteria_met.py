"""`criteria_met`: a judge finds the step's answer meets the success criteria of an intent step.

The criteria are those of the intent step's latest answer in the run. The judge is asked once
for all of them, as a numbered list answered with one JSON verdict per criterion, rather than
once per criterion: one call instead of up to twenty, and the judge sees every criterion when
it weighs each. `all` needs every criterion met; `at_least` a share of them (0 to 1), since
how many criteria there are is the intent model's choice at run time.

The run keeps a progress record (`RunState.progress`): a criterion met by one answer stays
met for the later answers of the run, as long as the intent step's criteria stay the same.
A loop that builds its answer up (adaptive mode's progress check) thus stops once every
criterion has been met, without a model having to say "100". `so_far: false` judges the
answer alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from workflows.engine.answers import shorten
from workflows.engine.checks import actor_alias_problem, is_number
from workflows.engine.conditions.base import (
    ConditionScope,
    ConditionType,
    ConditionUse,
    Operator,
)
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.values import format_number
from workflows.engine.errors import AnswerUnreadable
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition, StepSpec
from workflows.engine.intent import Verdict, criteria_prompt, read_intent, read_verdicts

INTENT_KIND = "intent"
# How much of each criterion and of the judge's why the ledger's reason keeps.
_CRITERION_SHOWN = 50
_WHY_SHOWN = 80

EVALUATOR = FieldSpec(
    "evaluator",
    "Judge",
    "actor",
    help="Default: the step's validation judge, else the step's actor.",
    display={"": "judge"},
)
INTENT_STEP = FieldSpec(
    "intent_step",
    "Intent step",
    "step",
    required=True,
    help="The key of an intent step earlier in the recipe, whose criteria are checked.",
)


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the intent step (an intent step before this one), the evaluator and the value:
    none for `all`, a share from 0 (exclusive) to 1 for `at_least`."""
    ok = check_intent_step(fields.get("intent_step"), f"{path}.intent_step", scope)
    evaluator = fields.get("evaluator")
    problem = None if evaluator is None else actor_alias_problem(evaluator, scope.actors)
    if problem:
        scope.error(f"{path}.evaluator", problem)
        ok = False
    so_far = fields.get("so_far")
    if so_far is not None and not isinstance(so_far, bool):
        scope.error(f"{path}.so_far", f"must be true or false, got {so_far!r}")
        ok = False
    if op == "all":
        if value is not None:
            scope.error(f"{path}.value", "all takes no value; use at_least for a share")
            return False, None
        return ok, None
    if not is_number(value) or not 0 < value <= 1:
        scope.error(
            f"{path}.value",
            f"must be the share of criteria to meet, above 0 and at most 1 (0.5 is half), "
            f"got {value!r}",
        )
        return False, None
    return ok, value


def check_intent_step(key: object, path: str, scope: ConditionScope) -> bool:
    if key is None or key == "":
        scope.error(path, "is required: the key of the intent step whose criteria are checked")
        return False
    if not isinstance(key, str):
        scope.error(path, f"must be a step key, got {type(key).__name__}")
        return False
    keys = list(scope.step_kinds)
    if key not in scope.step_kinds:
        intents = [k for k, kind in scope.step_kinds.items() if kind == INTENT_KIND]
        scope.error(path, f"there is no step '{key}'; intent steps: {', '.join(intents) or 'none'}")
        return False
    if scope.step_kinds[key] != INTENT_KIND:
        scope.error(
            path, f"step '{key}' is not an intent step (its kind is {scope.step_kinds[key]})"
        )
        return False
    if scope.step_key in keys and keys.index(key) >= keys.index(scope.step_key):
        where = "this step" if key == scope.step_key else "after this step"
        scope.error(path, f"step '{key}' is {where}; name an intent step that comes before it")
        return False
    return True


def prepare(condition: Condition) -> object:
    """Return the share `at_least` needs (None for `all`)."""
    return float(condition.value) if is_number(condition.value) else None


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Ask the judge about the intent step's criteria (once per step result) and count."""
    key = str(condition.fields.get("intent_step"))
    try:
        answer = ctx.step_answer(key)
    except LookupError as exc:  # the run's record lacks it: a reason, not a crash
        return False, f"intent step '{key}': {exc}"
    if answer is None:
        return False, f"intent step '{key}' has not answered yet"
    try:
        criteria = read_intent(answer).success_criteria
    except AnswerUnreadable as exc:
        return False, f"intent step '{key}' left no criteria: {exc}"
    evaluator = condition.fields.get("evaluator") or ctx.default_evaluator
    if not evaluator:
        return False, "no evaluator for criteria_met"
    verdicts = _verdicts(ctx, str(evaluator), criteria)
    if isinstance(verdicts, str):
        return False, verdicts
    earlier: list[bool] = [False] * len(verdicts)
    if condition.fields.get("so_far", True) and ctx.progress is not None:
        earlier = record_progress(ctx.progress, key, criteria, verdicts)
    met = sum(v.met or before for v, before in zip(verdicts, earlier, strict=True))
    if condition.operator == "all":
        holds, needed = met == len(verdicts), "all"
    else:
        holds = met >= prepared * len(verdicts)
        needed = f"at least {format_number(prepared)} of them"
    head = f"{met}/{len(verdicts)} criteria met (needs {needed})"
    return holds, f"{head}: " + "; ".join(
        f"{n}. {shorten(v.criterion, _CRITERION_SHOWN)!r} "
        + ("met" if v.met else "met earlier" if before else "not met")
        + (f" ({shorten(v.why, _WHY_SHOWN)})" if v.why else "")
        for n, (v, before) in enumerate(zip(verdicts, earlier, strict=True), 1)
    )


def record_progress(
    progress: dict[str, dict[str, object]],
    key: str,
    criteria: tuple[str, ...],
    verdicts: tuple[Verdict, ...],
) -> list[bool]:
    """Add the criteria met now to the run's record for intent step `key`; return which
    were met before (all False when the record held other criteria: the intent changed)."""
    kept = progress.get(key) or {}
    before = kept.get("met") if kept.get("criteria") == list(criteria) else None
    earlier = (
        [bool(b) for b in before]
        if isinstance(before, list) and len(before) == len(criteria)
        else [False] * len(criteria)
    )
    progress[key] = {
        "criteria": list(criteria),
        "met": [v.met or b for v, b in zip(verdicts, earlier, strict=True)],
    }
    return earlier


def _verdicts(
    ctx: EvalContext, evaluator: str, criteria: tuple[str, ...]
) -> tuple[Verdict, ...] | str:
    """Return the judge's verdicts, asked once per step result, or why there are none."""
    cache_key = ("criteria_met", evaluator, *criteria)
    cached = ctx.judged.get(cache_key)
    if cached is None:
        cached = ctx.judged[cache_key] = _ask(ctx, evaluator, criteria)
    return cast("tuple[Verdict, ...] | str", cached)


def _ask(ctx: EvalContext, evaluator: str, criteria: tuple[str, ...]) -> tuple[Verdict, ...] | str:
    if ctx.judge is None:
        return f"no judge available to ask '{evaluator}'"
    try:
        answer = ctx.judge(evaluator, criteria_prompt(criteria), ctx.text)
    except Exception as exc:  # a failing judge is a reason, not a crash of the run
        return f"judge '{evaluator}' failed: {type(exc).__name__}: {exc}"
    try:
        return read_verdicts(answer, criteria)
    except AnswerUnreadable as exc:
        return f"judge '{evaluator}' answer unreadable, criteria not met: {exc}"


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about each use that names no evaluator: say which actor will judge."""
    fallback = (step.validation or {}).get("judge") or step.actor
    return [
        f"{use.path}.evaluator: not set; the step's judge or actor '{fallback}' will check "
        "the criteria"
        for use in uses
        if not use.condition.fields.get("evaluator")
    ]


CONDITION_TYPE = ConditionType(
    name="criteria_met",
    label="Success criteria met (intent)",
    help=(
        "A judge checks the step's answer against each success criterion of an earlier "
        "intent step's latest answer, in one call (one verdict and why per criterion, all in "
        "the ledger's reason). all: every criterion met; at_least: a share of them, 0 to 1 "
        "(0.5 is half). False when the intent step has not answered or the judge's answer "
        "cannot be read."
    ),
    operators=(
        Operator("all", "all met", "all"),
        Operator("at_least", "at least (share)", "≥"),
    ),
    fields=(
        INTENT_STEP,
        FieldSpec(
            "value",
            "Share",
            "number",
            help="For at_least: the share of criteria to meet, above 0 and at most 1.",
        ),
        EVALUATOR,
        FieldSpec(
            "so_far",
            "Count earlier answers",
            "boolean",
            default=True,
            help="Count criteria met by the run's earlier answers too (the progress record); "
            "off: judge this answer alone.",
        ),
    ),
    summary={"all": "all criteria of {intent_step}", "*": "criteria of {intent_step} ≥ {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
    reads_answer=True,
)
