from __future__ import annotations

import json

import pytest

from tests.engine.builders import graph, step
from workflows.engine import EngineError, InputError, RunState, StepResult, decide, render


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


def test_it_gives_templates_the_inputs_and_the_latest_responses() -> None:
    g = graph(
        step("draft"),
        step("review"),
        step("final", prompt="{step1_response} / {steps.review.response}"),
    )
    state = RunState.start(g, {"topic": "dragons"})
    decide(g, state, StepResult("draft", "first draft"))
    decide(g, state, StepResult("draft", "second draft"))
    context = state.template_context("final", feedback="shorter")
    assert context == {
        "topic": "dragons",
        "step1_response": "second draft",
        "steps.draft.response": "second draft",
        "step2_response": "",
        "steps.review.response": "",
        "step3_response": "",
        "steps.final.response": "",
        "feedback": "shorter",
    }
    assert render(g.step("final").prompt, context) == "second draft / "
    assert [r["seq"] for r in state.responses] == [1, 2]


def test_it_refuses_a_template_context_for_an_unknown_step() -> None:
    g = graph(step("a"))
    with pytest.raises(EngineError, match="unknown step 'b'"):
        RunState.start(g, {"topic": "x"}).template_context("b")


def test_it_survives_a_json_round_trip() -> None:
    g = graph(step("a"), step("b"))
    state = RunState.start(g, {"topic": "x"}, max_steps=7)
    decide(g, state, StepResult("a", '{"k": [1, 2]}', route_selection=("r",)))
    state.record_decision("b", "approve")
    state.count_retry("a", "again")
    data = json.loads(json.dumps(state.to_dict()))
    assert RunState.from_dict(data) == state
    assert RunState.from_dict({}) == RunState()
