"""On a failed step, the conditions that read the answer are not applicable (DESIGN §9)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, condition, graph, step
from workflows.engine import EvalContext, RunState, StepResult, decide, evaluate_condition
from workflows.engine.conditions.registry import TYPES

SHORT = {"type": "length_check", "operator": "less_than", "value": 200}
TIMEOUT = {"type": "execution_timeout", "operator": "equals", "value": True}
ERROR = {"type": "execution_error", "operator": "equals", "value": True}
TIMED_OUT = "not applicable: the step failed: timed out"

READING_THE_ANSWER: list[tuple[dict[str, Any], str]] = [
    (SHORT, "llm"),
    ({"type": "length_check", "operator": "greater_equal", "value": 0}, "llm"),
    ({"type": "pattern_match", "operator": "regex_not_match", "value": "x"}, "llm"),
    ({"type": "pattern_match", "operator": "not_contains", "value": "x"}, "llm"),
    ({"type": "content_type", "operator": "is_not", "value": "code"}, "llm"),
    ({"type": "ai_evaluation", "operator": "less_than", "value": 8, "evaluator": "judge"}, "llm"),
    ({"type": "confidence", "operator": "less_than", "value": 0.9}, "llm"),
    ({"type": "validation_passed", "operator": "equals", "value": False}, "llm"),
    ({"type": "fallback_used", "operator": "equals", "value": False}, "llm"),
    ({"type": "cites_source", "operator": "cites_none"}, "llm"),
]


def failed(**fields: Any) -> EvalContext:
    """Return the context of a step that timed out with no answer; a judge would say 10."""

    def judge(evaluator: str, prompt: str, text: str) -> str:
        raise AssertionError("a failed step's answer is not judged")

    return EvalContext(text="", timed_out=True, judge=judge, decision="approve", **fields)


@pytest.mark.parametrize(("when", "kind"), READING_THE_ANSWER)
def test_a_condition_that_reads_the_answer_is_not_applicable_on_a_timeout(
    when: dict[str, Any], kind: str
) -> None:
    assert evaluate_condition(condition(when, kind=kind), failed()) == (False, TIMED_OUT)


def test_the_reason_is_the_failures_own() -> None:
    ctx = EvalContext(text="", error="provider said no")
    assert evaluate_condition(condition(SHORT), ctx) == (
        False,
        "not applicable: the step failed: provider said no",
    )


def test_a_condition_that_reads_the_answer_is_evaluated_when_the_step_did_not_fail() -> None:
    assert evaluate_condition(condition(SHORT), EvalContext(text="")) == (True, "length 0 < 200")


def test_the_conditions_about_failure_and_the_default_stay_applicable() -> None:
    ctx = failed()
    assert evaluate_condition(condition(TIMEOUT), ctx) == (True, "step timed out")
    assert evaluate_condition(condition({"type": "default"}), ctx)[0] is True


def test_every_type_that_asks_about_failure_does_not_read_the_answer() -> None:
    # A condition cannot both handle a failure and be not applicable to it.
    assert not [t.name for t in TYPES if t.asks_about_failure and t.reads_answer]


@pytest.mark.parametrize(
    ("when", "holds", "reason"),
    [
        # not of not applicable is not applicable too: a failed step is not "long enough".
        ({"type": "not", "conditions": [SHORT]}, False, f"not: [{TIMED_OUT}]"),
        (
            {"type": "not", "conditions": [{"type": "not", "conditions": [SHORT]}]},
            False,
            f"not: [not: [{TIMED_OUT}]]",
        ),
        # or: true when another operand is.
        (
            {"type": "or", "conditions": [SHORT, TIMEOUT]},
            True,
            f"or: [{TIMED_OUT}; step timed out]",
        ),
        (
            {"type": "or", "conditions": [SHORT, ERROR]},
            False,
            f"or: [{TIMED_OUT}; step did not fail]",
        ),
        # and: false whatever the other operands say; never true.
        (
            {"type": "and", "conditions": [SHORT, TIMEOUT]},
            False,
            f"and: [{TIMED_OUT}; step timed out]",
        ),
        # ... so not of it is not applicable, not true...
        (
            {"type": "not", "conditions": [{"type": "and", "conditions": [SHORT, TIMEOUT]}]},
            False,
            f"not: [and: [{TIMED_OUT}; step timed out]]",
        ),
        # ... unless another operand is false: then the and is false, and not of it true.
        (
            {"type": "not", "conditions": [{"type": "and", "conditions": [SHORT, ERROR]}]},
            True,
            f"not: [and: [{TIMED_OUT}; step did not fail]]",
        ),
    ],
)
def test_combinations_treat_not_applicable_as_unknown(
    when: dict[str, Any], holds: bool, reason: str
) -> None:
    assert evaluate_condition(condition(when), failed()) == (holds, reason)


NOTE_BRANCHES = [
    branch(
        "story_too_short",
        1,
        SHORT,
        "REQUEST_MORE_DETAIL",
        "@repeat",
        params={"retry_suffix": "Longer.", "max_retries": 2},
    ),
    branch(
        "inappropriate_content",
        2,
        {"type": "pattern_match", "operator": "regex_not_match", "value": "(violence)"},
        "END_RECIPE",
        "@end",
    ),
    branch(
        "model_timeout",
        5,
        TIMEOUT,
        "RETRY_WITH_DIFFERENT_ACTOR",
        "@repeat",
        params={"alternative_actor": "critic", "max_retries": 2},
    ),
    branch("on_error", 6, ERROR, "ERROR_HANDLER", "b"),
    branch("default_evaluation", 999, action="DEFAULT_CONTINUE", target="b"),
]


def test_a_timeout_passes_the_branches_that_read_the_answer_and_takes_the_timeout_branch() -> None:
    g = graph(step("a", *NOTE_BRANCHES), step("b"))
    decision = decide(g, RunState.start(g, {"topic": "t"}), StepResult("a", timed_out=True))
    assert (decision.kind, decision.branch) == ("retry_actor", "model_timeout")
    assert [(e.branch, e.matched, e.taken, e.reason) for e in decision.evaluations] == [
        ("story_too_short", False, False, TIMED_OUT),
        ("inappropriate_content", False, False, TIMED_OUT),
        ("model_timeout", True, True, "step timed out"),
    ]


def test_an_error_reaches_the_error_branch_after_the_timeout_branch() -> None:
    g = graph(step("a", *NOTE_BRANCHES), step("b"))
    decision = decide(g, RunState.start(g, {"topic": "t"}), StepResult("a", error="quota"))
    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "b", "on_error")
    assert decision.evaluations[0].reason == "not applicable: the step failed: quota"


def test_a_reviewers_decision_stays_applicable_when_a_later_step_fails() -> None:
    # human_decision reads the run's latest decision, not the failed step's answer: a
    # `reject -> @end` branch on the step after the review still ends the run.
    when = {"type": "human_decision", "operator": "user_choice", "value": "approve"}
    holds, _ = evaluate_condition(condition(when, kind="human"), failed())
    assert holds is True
