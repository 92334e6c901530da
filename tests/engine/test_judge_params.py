"""A judge branch's settings in its `params`, as note 000's metadata writes them
(`evaluator_actor`, `eval_prompt`, `threshold`): read as the condition's own fields."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from workflows.engine import (
    RecipeInvalid,
    RunState,
    StepResult,
    canonical_branch,
    decide,
    parse_recipe,
)
from workflows.engine.lint import lint_recipe

# The seed's high_quality_story branch: its judge, prompt and threshold in the metadata.
SEED_PARAMS = {
    "evaluator_actor": "critic",
    "eval_prompt": "Rate story quality 1-10",
    "threshold": 8,
}
JUDGE = {"type": "ai_evaluation", "operator": "greater_equal", "value": "8"}


def judged(when: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    return branch("high_quality_story", 3, when, "QUALITY_APPROVED", "@end", params=params)


def ask(g: Any, answer: str = "9") -> tuple[Any, list[tuple[str, str]]]:
    asked: list[tuple[str, str]] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        asked.append((evaluator, prompt))
        return answer

    decision = decide(g, RunState.start(g, {"topic": "x"}), StepResult("a", "story"), judge=judge)
    return decision, asked


def test_the_seeds_params_name_the_judge_and_its_prompt() -> None:
    g = graph(step("a", judged(JUDGE, SEED_PARAMS)))
    decision, asked = ask(g)

    assert asked == [("critic", "Rate story quality 1-10")]
    assert (decision.branch, decision.outcome) == ("high_quality_story", "approved")
    assert decision.evaluations[0].reason == "judge scored 9 >= 8"


def test_the_params_threshold_is_the_score_to_reach_when_the_condition_gives_none() -> None:
    when = {"type": "ai_evaluation", "operator": "greater_equal"}
    g = graph(step("a", judged(when, SEED_PARAMS)))

    assert ask(g, "7")[0].branch is None
    assert ask(g, "8")[0].branch == "high_quality_story"


def test_the_params_no_longer_leave_the_step_s_actor_to_judge() -> None:
    g = graph(step("a", judged(JUDGE, SEED_PARAMS)))
    assert not [w for w in lint_recipe(g) if "evaluator: not set" in w]
    assert ask(g)[1][0][0] == "critic"


def test_the_condition_and_the_params_may_say_the_same() -> None:
    when = {**JUDGE, "evaluator": "critic", "prompt": "Rate story quality 1-10"}
    parse_recipe(recipe(step("a", judged(when, SEED_PARAMS))))


P = "steps[0].branches[0].params"


@pytest.mark.parametrize(
    ("when", "params", "error"),
    [
        (
            {**JUDGE, "evaluator": "judge"},
            {"evaluator_actor": "critic"},
            f"{P}.evaluator_actor: is 'critic', but when.evaluator says 'judge'; give one of them",
        ),
        (
            {**JUDGE, "eval_prompt": "Score it"},
            {"eval_prompt": "Rate it"},
            f"{P}.eval_prompt: is 'Rate it', but when.eval_prompt says 'Score it'; give one of"
            " them",
        ),
        (
            JUDGE,
            {"threshold": 6},
            f"{P}.threshold: is 6, but when.value says '8'; give one of them",
        ),
        (
            JUDGE,
            {"evaluator_actor": "nobody"},
            f"{P}.evaluator_actor: unknown actor alias 'nobody'; declared: critic, editors,"
            " judge, writer",
        ),
        (JUDGE, {"eval_prompt": 3}, f"{P}.eval_prompt: must be a string, got int"),
        (
            {"type": "ai_evaluation", "operator": "greater_equal"},
            {"threshold": "high"},
            f"{P}.threshold: must be a number, got 'high'",
        ),
    ],
)
def test_it_refuses_params_it_cannot_honour_where_they_are_written(
    when: dict[str, Any], params: dict[str, Any], error: str
) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("a", judged(when, params))))
    assert error in raised.value.errors, raised.value.errors


def test_other_conditions_leave_the_params_alone() -> None:
    when = {"type": "length_check", "operator": "less_than", "value": 200}
    parsed = graph(step("a", judged(when, {"threshold": 8, "min_length": 200})))
    assert parsed.steps[0].branches[0].params == {"threshold": 8, "min_length": 200}


def test_one_spelling_is_kept_the_format_s_own() -> None:
    doc = judged(JUDGE, {**SEED_PARAMS, "max_retries": 2})
    assert canonical_branch(doc) == {
        **doc,
        "when": {**JUDGE, "evaluator": "critic", "prompt": "Rate story quality 1-10"},
        "params": {"max_retries": 2},
    }
    aliased = judged({**JUDGE, "evaluator_actor": "critic", "eval_prompt": "Rate"}, {})
    assert canonical_branch(aliased)["when"] == {**JUDGE, "evaluator": "critic", "prompt": "Rate"}
    nested = {"type": "and", "conditions": [{**JUDGE, "evaluator_actor": "critic"}]}
    assert canonical_branch(judged(nested, {}))["when"]["conditions"] == [
        {**JUDGE, "evaluator": "critic"}
    ]


def test_the_canonical_branch_means_what_the_seed_s_did() -> None:
    seed = judged(JUDGE, SEED_PARAMS)
    one = graph(step("a", seed)).steps[0].branches[0].when
    other = graph(step("a", canonical_branch(seed))).steps[0].branches[0].when
    assert (one.fields, one.value) == (other.fields, other.value)


def test_lint_warns_of_judge_params_on_a_branch_that_is_no_judge_score() -> None:
    when = {"type": "and", "conditions": [JUDGE]}
    g = graph(step("a", judged(when, {"evaluator_actor": "critic"})))
    assert (
        "steps[0].branches[0].params.evaluator_actor: ignored: only a branch whose condition "
        "is ai_evaluation reads it"
    ) in lint_recipe(g)
    assert not [
        w for w in lint_recipe(graph(step("a", judged(JUDGE, SEED_PARAMS)))) if "ignored" in w
    ]
