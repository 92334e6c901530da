"""The reference seeds' semantics: outcomes set by the action, the seed's `ai_evaluation` keys,
and a ledger that marks as taken only the branch the run followed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, recipe, step
from workflows.engine import (
    RecipeInvalid,
    RunState,
    StepResult,
    catalog,
    decide,
    parse_recipe,
)
from workflows.engine.docs import conditions_table

BAD = {"type": "pattern_match", "operator": "contains", "value": "bad"}
ERROR = {"type": "execution_error", "operator": "equals", "value": True}


def judge_score(**fields: Any) -> dict[str, Any]:
    return {"type": "ai_evaluation", "operator": "greater_equal", "value": 8, **fields}


@pytest.mark.parametrize(
    ("action", "when", "error", "outcome"),
    [
        ("QUALITY_APPROVED", None, None, "approved"),
        ("ERROR_HANDLER", ERROR, "provider down", "error_handled"),
        ("CONTINUE", None, None, "ended"),
        ("END_RECIPE", None, None, "ended"),
    ],
)
def test_the_action_sets_the_outcome_of_a_run_its_target_ends(
    action: str, when: dict[str, Any] | None, error: str | None, outcome: str
) -> None:
    g = graph(step("a", branch("stop", 1, when, action, "@end")), step("b"))
    decision = decide(g, RunState.start(g, {"topic": "x"}), StepResult("a", "ok", error=error))

    assert (decision.kind, decision.outcome) == ("end", outcome)


def test_an_approval_outlives_the_step_that_gave_it_but_not_an_end_recipe() -> None:
    g = graph(
        step("a", branch("good", 1, action="QUALITY_APPROVED", target="b")),
        step("b", branch("stop", 1, BAD, "END_RECIPE", "@end")),
    )
    state = RunState.start(g, {"topic": "x"})
    assert decide(g, state, StepResult("a", "fine")).outcome is None
    assert (
        decide(g, RunState.from_dict(state.to_dict()), StepResult("b", "fine")).outcome
        == "approved"
    )
    assert decide(g, state, StepResult("b", "bad")).outcome == "ended"


def test_a_failed_step_no_branch_handles_marks_no_branch_taken() -> None:
    g = graph(step("a", branch("onward", 99, target="b")), step("b"))
    decision = decide(g, RunState.start(g, {"topic": "x"}), StepResult("a", error="down"))

    assert (decision.kind, decision.branch, decision.action, decision.outcome) == (
        "fail",
        None,
        None,
        "failed",
    )
    [evaluation] = decision.evaluations
    assert (evaluation.matched, evaluation.taken) == (True, False)
    assert "does not handle" in evaluation.reason


def test_the_seed_evaluator_actor_and_eval_prompt_keys_ask_the_named_judge() -> None:
    asked: list[tuple[str, str]] = []

    def judge(evaluator: str, prompt: str, text: str) -> str:
        asked.append((evaluator, prompt))
        return "9"

    when = judge_score(evaluator_actor="critic", eval_prompt="Rate story quality 1-10")
    g = graph(step("a", branch("great", 1, when, "QUALITY_APPROVED", "@complete")))
    decision = decide(g, RunState.start(g, {"topic": "x"}), StepResult("a", "story"), judge=judge)

    assert asked == [("critic", "Rate story quality 1-10")]
    assert (decision.branch, decision.outcome) == ("great", "approved")


def test_the_seed_keys_agree_with_the_format_s_when_both_are_given() -> None:
    when = judge_score(evaluator="critic", evaluator_actor="critic", prompt="R", eval_prompt="R")
    parse_recipe(recipe(step("a", branch("great", 1, when))))


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"evaluator_actor": "nobody"},
            "steps[0].branches[0].when.evaluator_actor: unknown actor alias 'nobody'; declared:"
            " critic, editors, judge, writer",
        ),
        (
            {"evaluator": "judge", "evaluator_actor": "critic"},
            "steps[0].branches[0].when.evaluator_actor: names 'critic', but evaluator says"
            " 'judge'; give one of them",
        ),
        (
            {"prompt": "Rate it", "eval_prompt": "Score it"},
            "steps[0].branches[0].when.eval_prompt: names 'Score it', but prompt says"
            " 'Rate it'; give one of them",
        ),
        (
            {"eval_prompt": 3},
            "steps[0].branches[0].when.eval_prompt: must be a string, got int",
        ),
    ],
)
def test_it_refuses_a_seed_key_it_cannot_honour_at_its_path(
    fields: dict[str, Any], error: str
) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("a", branch("great", 1, judge_score(**fields)))))
    assert error in raised.value.errors


def test_the_catalog_documents_the_seed_keys_as_aliases() -> None:
    [spec] = [c for c in catalog()["conditions"] if c["type"] == "ai_evaluation"]
    aliases = {f["name"]: f["aliases"] for f in spec["fields"]}
    assert aliases["evaluator"] == ["evaluator_actor"]
    assert aliases["prompt"] == ["eval_prompt"]


def test_the_format_page_documents_the_seed_keys() -> None:
    [row] = [r for r in conditions_table().splitlines() if r.startswith("| `ai_evaluation`")]
    assert "`evaluator` (actor, also read as `evaluator_actor`)" in row
    assert "also read as `eval_prompt`" in row
