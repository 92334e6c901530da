"""`ai_evaluation`: a judge's score of the response, asked once per evaluator and prompt."""

from __future__ import annotations

import pytest

from tests.engine.builders import condition
from tests.engine.conditions.cases import uncovered
from workflows.engine import EvalContext, evaluate_condition
from workflows.engine.conditions.ai_evaluation import CONDITION_TYPE

AI_CASES = [
    ("greater_equal", 8, "Score: 9", True, "judge scored 9 >= 8"),
    ("greater_equal", 8, "6", False, "judge scored 6, needs >= 8"),
    ("greater_than", 7, "**7.5**", True, "judge scored 7.5 > 7"),
    ("greater_than", 7, "7 out of 10", False, "judge scored 7, needs > 7"),
    ("less_than", 6, "5/10", True, "judge scored 5 < 6"),
    ("less_than", 6, "6/10", False, "judge scored 6, needs < 6"),
    ("less_equal", 6, "6", True, "judge scored 6 <= 6"),
    ("less_equal", 6, "7", False, "judge scored 7, needs <= 6"),
    ("equals", 9, "Rating: 9", True, "judge scored 9 == 9"),
    ("equals", 9, "8", False, "judge scored 8, needs == 9"),
    ("not_equals", 9, "Rating: 9", False, "judge scored 9, needs != 9"),
    ("not_equals", 9, "8", True, "judge scored 8 != 9"),
    ("greater_than_or_equal", 8, "8", True, "judge scored 8 >= 8"),
    ("less_than_or_equal", 3, "8", False, "judge scored 8, needs <= 3"),
    ("greater_equal", 8, "no idea", False, "judge answer had no score: 'no idea'"),
]


@pytest.mark.parametrize(("op", "threshold", "answer", "matched", "reason"), AI_CASES)
def test_it_compares_the_judges_score_with_every_numeric_operator(
    op: str, threshold: int, answer: str, matched: bool, reason: str
) -> None:
    asked: list[tuple[str, str, str]] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        asked.append((evaluator, prompt, text))
        return answer

    when = {
        "type": "ai_evaluation",
        "operator": op,
        "value": threshold,
        "evaluator": "judge",
        "prompt": "Rate it",
    }
    ctx = EvalContext(text="a story", judge=judge)
    assert evaluate_condition(condition(when), ctx) == (matched, reason)
    assert asked == [("judge", "Rate it", "a story")]


def test_it_reports_a_judge_that_raises_as_an_unmatched_condition() -> None:
    def judge(evaluator: str, prompt: str, text: str) -> str:
        raise RuntimeError("model down")

    when = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, "evaluator": "judge"}
    result = evaluate_condition(condition(when), EvalContext(text="x", judge=judge))
    assert result == (False, "judge 'judge' failed: RuntimeError: model down")


def test_it_asks_a_judge_once_per_evaluator_and_prompt() -> None:
    calls: list[str] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        calls.append(f"{evaluator}:{prompt}")
        return "7"

    ctx = EvalContext(text="x", judge=judge)
    for op, value, prompt in [
        ("greater_equal", 8, "Rate"),
        ("less_than", 6, "Rate"),
        ("equals", 7, "Other"),
    ]:
        when = {
            "type": "ai_evaluation",
            "operator": op,
            "value": value,
            "evaluator": "judge",
            "prompt": prompt,
        }
        evaluate_condition(condition(when), ctx)
    assert calls == ["judge:Rate", "judge:Other"]


def test_it_uses_the_default_evaluator_when_the_condition_names_none() -> None:
    seen: list[str] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        seen.append(evaluator)
        return "9"

    when = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8}
    ctx = EvalContext(text="x", judge=judge, default_evaluator="critic")
    assert evaluate_condition(condition(when), ctx) == (True, "judge scored 9 >= 8")
    assert seen == ["critic"]


def test_it_does_not_match_an_ai_evaluation_without_a_judge() -> None:
    when = {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, "evaluator": "judge"}
    assert evaluate_condition(condition(when), EvalContext(text="x")) == (
        False,
        "no judge available to ask 'judge'",
    )


def test_every_operator_has_a_true_and_a_false_case() -> None:
    cases = [({"operator": op}, "", {}, matched, reason) for op, _, _, matched, reason in AI_CASES]
    assert uncovered(CONDITION_TYPE, cases) == []
