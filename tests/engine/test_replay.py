"""Replaying a run's recorded results rebuilds the state `decide` left, evaluating nothing."""

from __future__ import annotations

import pytest

from tests.engine.builders import branch, graph, step
from workflows.engine import EngineError, RecipeGraph, RunState, StepResult, decide
from workflows.engine.replay import RecordedStep, replay

SHORT = {"type": "length_check", "operator": "less_than", "value": 20}
JSON_FACTS = {"type": "field_compare", "field": "pages", "operator": "greater_than", "value": 3}


def story() -> RecipeGraph:
    """draft (repeated while short, bounded) → review (human) → polish or back to draft."""
    return graph(
        step(
            "draft",
            branch(
                "too_short",
                1,
                SHORT,
                "REQUEST_MORE_DETAIL",
                "@repeat",
                params={"retry_suffix": "Longer, please.", "max_retries": 2},
            ),
            branch("long_doc", 2, JSON_FACTS, "QUALITY_APPROVED", "review"),
            branch("onward", 999, None, "CONTINUE", "review"),
        ),
        step(
            "review",
            branch(
                "redo",
                1,
                {"type": "human_decision", "operator": "user_choice", "value": "revise"},
                "CONTINUE",
                "draft",
            ),
            branch("done", 999, None, "CONTINUE", "polish"),
            kind="human",
            actor="editors",
        ),
        step("polish", branch("finish", 1)),
    )


def run(g: RecipeGraph, results: list[StepResult]) -> tuple[RunState, list[RecordedStep]]:
    """Decide each result in turn; return the state and what a run would have recorded."""
    state = RunState.start(g, {"topic": "owls"})
    recorded = []
    for result in results:
        decision = decide(g, state, result)
        taken = next((e.branch for e in decision.evaluations if e.taken), None)
        recorded.append(RecordedStep(result, taken=taken, actor="writer"))
    return state, recorded


RESULTS = [
    StepResult("draft", response="Too short."),
    StepResult("draft", response='{"pages": 5, "text": "A long enough story about owls."}'),
    StepResult("review", comment="More owls.", decision="revise"),
    StepResult("draft", response="Still short."),
]


@pytest.mark.parametrize("upto", range(len(RESULTS) + 1))
def test_it_rebuilds_the_state_decide_left_after_any_step(upto: int) -> None:
    g = story()
    decided, recorded = run(g, RESULTS[:upto])

    replayed = RunState.start(g, {"topic": "owls"})
    replay(g, replayed, recorded)

    assert replayed.to_dict() == decided.to_dict()


def test_it_returns_the_move_the_last_result_made() -> None:
    g = story()
    _, recorded = run(g, RESULTS)

    move = replay(g, RunState.start(g, {"topic": "owls"}), recorded)

    assert move is not None
    assert (move.kind, move.next_step, move.prompt_suffix) == ("repeat", "draft", "Longer, please.")


def test_it_evaluates_no_condition_again() -> None:
    judged = graph(
        step(
            "write",
            branch(
                "great",
                1,
                {"type": "ai_evaluation", "operator": "greater_equal", "value": 8},
                "QUALITY_APPROVED",
                "@complete",
            ),
        )
    )
    state = RunState.start(judged, {"topic": "owls"})

    # No judge is given: an evaluation would fail; the branch taken is read as recorded.
    replay(judged, state, [RecordedStep(StepResult("write", response="A story."), taken="great")])

    assert (state.step_count, state.approved) == (1, True)


def test_it_refuses_a_result_of_a_step_the_version_lacks() -> None:
    g = story()

    with pytest.raises(EngineError, match="step 'outline' is not in this version"):
        replay(g, RunState.start(g, {"topic": "owls"}), [RecordedStep(StepResult("outline"))])
