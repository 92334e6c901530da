from __future__ import annotations

import json

import pytest

from tests.engine.builders import graph, step
from workflows.engine import (
    EngineError,
    InputError,
    RunState,
    StepResult,
    TemplateError,
    decide,
    render,
)


def test_it_starts_a_run_with_checked_inputs_and_their_defaults() -> None:
    g = graph(
        step("a"),
        inputs={
            "topic": {"type": "string", "required": True},
            "words": {"type": "integer", "default": 200},
            "strict": {"type": "boolean"},
        },
    )
    state = RunState.start(g, {"topic": "dragons", "strict": "true"})
    assert state.inputs == {"topic": "dragons", "words": 200, "strict": True}
    assert state.facts == state.inputs
    assert state.step_order == ["a"]


def test_it_refuses_inputs_that_do_not_fit_the_schema() -> None:
    g = graph(
        step("a"), inputs={"topic": {"type": "string", "required": True}, "n": {"type": "number"}}
    )
    with pytest.raises(InputError) as raised:
        RunState.start(g, {"n": "many", "colour": "red"})
    assert raised.value.errors == [
        "inputs.colour: unknown input; declared: topic, n",
        "inputs.topic: is required",
        "inputs.n: must be a number, got 'many'",
    ]


def test_it_gives_templates_the_inputs_and_the_latest_answers() -> None:
    g = graph(
        step("draft"),
        step("review"),
        step("final", prompt="{step1_response} / {steps.review.response}"),
    )
    state = RunState.start(g, {"topic": "dragons"})
    decide(g, state, StepResult("draft", "first draft"))
    decide(g, state, StepResult("draft", "second draft"))
    answers = {1: "first draft", 2: "second draft"}
    context = state.template_context("final", answers.__getitem__, feedback="shorter")
    assert context == {
        "topic": "dragons",
        "step1_response": "second draft",
        "steps.draft.response": "second draft",
        "step2_response": "",
        "steps.review.response": "",
        "step3_response": "",
        "steps.final.response": "",
        "steps.draft.sources": "",
        "steps.review.sources": "",
        "steps.final.sources": "",
        "learned_strategies": "",
        "feedback": "shorter",
        "sources": "",
    }
    assert render(g.step("final").prompt, context) == "second draft / "
    assert state.last_answer(answers.__getitem__) == "second draft"


def test_it_keeps_references_to_answers_not_the_answers() -> None:
    g = graph(step("draft"), step("review"))
    state = RunState.start(g, {"topic": "dragons"})
    for key in ["draft", "review", "draft"]:
        decide(g, state, StepResult(key, "an answer of some length " * 200))
    assert (state.step_count, state.latest_seq) == (3, {"draft": 3, "review": 2})
    assert state.attempts == {"draft": 2, "review": 1}
    assert "an answer" not in json.dumps(state.to_dict())


def test_it_asks_only_for_the_answers_a_template_names() -> None:
    g = graph(step("draft"), step("review"), step("final", prompt="{steps.review.response}"))
    state = RunState.start(g, {"topic": "dragons"})
    decide(g, state, StepResult("draft", "a draft"))
    decide(g, state, StepResult("review", "a review"))
    asked: list[int] = []

    def answers(seq: int) -> str:
        asked.append(seq)
        return {1: "a draft", 2: "a review"}[seq]

    context = state.template_context("final", answers)
    assert render(g.step("final").prompt, context) == "a review"
    assert "step1_response" in context and "steps.nope.response" not in context
    assert asked == [2]


@pytest.mark.parametrize("name", ["step4_response", "steps.nope.response", "colour"])
def test_it_refuses_a_name_that_is_no_input_and_no_step(name: str) -> None:
    g = graph(step("a"), step("b"), step("c"))
    context = RunState.start(g, {"topic": "x"}).template_context("a", {}.__getitem__)
    with pytest.raises(TemplateError, match=f"unknown template name '{name}'"):
        render(f"{{{name}}}", context)


def test_it_refuses_a_template_context_for_an_unknown_step() -> None:
    g = graph(step("a"))
    with pytest.raises(EngineError, match="unknown step 'b'"):
        RunState.start(g, {"topic": "x"}).template_context("b", {}.__getitem__)


def test_it_forgets_the_retries_of_a_step_s_earlier_visits() -> None:
    state = RunState()
    for _ in range(50):
        state.enter("a")
        state.count_retry("a", "again")
        state.enter("b")
        state.count_retry("b", "again")
    assert state.retries == {("a", 50, "again"): 1, ("b", 50, "again"): 1}
    assert state.retries_used("a", "again") == 1


def test_it_survives_a_json_round_trip() -> None:
    g = graph(step("a"), step("b"))
    state = RunState.start(g, {"topic": "x"}, max_steps=7)
    decide(g, state, StepResult("a", '{"k": [1, 2]}', route_selection=("r",)))
    state.record_decision("b", "approve")
    state.count_retry("a", "again")
    data = json.loads(json.dumps(state.to_dict()))
    assert RunState.from_dict(data) == state
    assert RunState.from_dict({}) == RunState()


def test_it_loads_a_state_stored_with_every_response_in_full() -> None:
    # A run in flight across the upgrade: its stored state lists each result with its text.
    stored = {
        "inputs": {"topic": "x"},
        "step_order": ["a", "b"],
        "step_count": 3,
        "responses": [
            {"seq": 1, "step": "a", "response": "one"},
            {"seq": 2, "step": "b", "response": "two"},
            {"seq": 3, "step": "a", "response": "three"},
        ],
        "latest": {"a": "three", "b": "two"},
        "visits": {"a": 2, "b": 1},
    }
    state = RunState.from_dict(stored)
    assert (state.latest_seq, state.attempts) == ({"a": 3, "b": 2}, {"a": 2, "b": 1})
    assert state.step_count == 3 and state.visits == {"a": 2, "b": 1}
    assert "responses" not in state.to_dict() and "latest" not in state.to_dict()
