"""Transform steps in the engine: `set` read and compiled at parse time (each error at its
path), the run's JSON view, evaluation and its run-time errors, and the facts it adds to."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import RecipeInvalid, RunState, StepResult, decide, parse_recipe
from workflows.engine.transform import (
    TransformError,
    answer_value,
    evaluate,
    run_view,
    steps_read,
)


def transform(expressions: object, **fields: Any) -> dict[str, Any]:
    return {"key": "calc", "name": "Calc", "kind": "transform", "set": expressions, **fields}


def test_it_reads_a_transform_step_with_no_actor() -> None:
    expressions = {
        "total": "sum(items[].price)",
        "first": "items[0].name",
        "said": 'steps."ask-me".text',
        "own": "steps.calc",
    }
    parsed = graph(step("ask-me"), transform(expressions))

    calc = parsed.step("calc")
    assert (calc.kind, calc.actor) == ("transform", None)
    assert calc.set == expressions


BAD_SETS: list[tuple[object, list[str]]] = [
    (None, ["steps[0].set: is required: an object of fact name: JMESPath expression"]),
    ({}, ["steps[0].set: is required: an object of fact name: JMESPath expression"]),
    (["a"], ["steps[0].set: must be an object, got list"]),
    (
        {"total": "sum(items[].price"},
        ["steps[0].set.total: Invalid jmespath expression: Incomplete expression (at column 17)"],
    ),
    (
        {"x": "a.b."},
        [
            "steps[0].set.x: Expecting: ['quoted_identifier', 'unquoted_identifier', 'lbracket', "
            "'lbrace'], got: eof: Parse error at column 4, token \"\" (EOF)"
        ],
    ),
    ({"x": "eval(a)"}, ["steps[0].set.x: unknown function eval()"]),
    ({"x": ""}, ["steps[0].set.x: must be a JMESPath expression (non-empty text)"]),
    (
        {"x": "length(steps.ask.items)"},
        ["steps[0].set.x: there is no step 'ask' (steps.KEY reads its answer)"],
    ),
    ({"x": 3}, ["steps[0].set.x: must be a JMESPath expression (non-empty text)"]),
    (
        {"9lives": "a"},
        ["steps[0].set.9lives: a fact's name is a letter or _, then letters, digits or _"],
    ),
    (
        {"steps": "a"},
        ["steps[0].set.steps: facts, inputs, steps are the view's own names; choose another"],
    ),
    ({"x": "a" * 2001}, ["steps[0].set.x: an expression has at most 2000 characters"]),
    ({f"f{i}": "a" for i in range(51)}, ["steps[0].set: at most 50 expressions, got 51"]),
]


@pytest.mark.parametrize(("expressions", "errors"), BAD_SETS)
def test_it_refuses_a_set_it_cannot_run_naming_the_expression(
    expressions: object, errors: list[str]
) -> None:
    with pytest.raises(RecipeInvalid) as refused:
        parse_recipe(recipe(transform(expressions)))

    assert refused.value.errors == errors


def test_it_refuses_fields_a_transform_has_not() -> None:
    doc = recipe(transform({"a": "b"}, output_schema={"type": "object"}, tools=["demo.add"]))

    with pytest.raises(RecipeInvalid) as refused:
        parse_recipe(doc)

    assert refused.value.errors == [
        "steps[0].tools: a transform step has no tools",
        "steps[0].output_schema: a transform step has no output_schema",
    ]


def test_the_view_holds_the_facts_at_its_root_the_inputs_and_each_answer_as_json_or_text() -> None:
    answers = {
        "bare": '{"a": 1}',
        "fenced": "```json\n[1, 2]\n```",
        "chatty": '{"b": 2} Hope this helps!',
        "number": " 42 ",
        "prose": "Just words {not json}",
        "nan": '{"x": NaN}',
    }

    view = run_view({"items": [1], "steps": "a fact"}, {"topic": "owls"}, answers)

    assert view == {
        "items": [1],
        "facts": {"items": [1], "steps": "a fact"},
        "inputs": {"topic": "owls"},
        "steps": {
            "bare": {"a": 1},
            "fenced": [1, 2],
            "chatty": {"b": 2},
            "number": 42,
            "prose": "Just words {not json}",
            "nan": '{"x": NaN}',
        },
    }
    assert answer_value("") == ""


def test_it_evaluates_every_expression_over_the_same_view() -> None:
    view = run_view({"items": [{"price": 2.5}, {"price": 4}]}, {}, {"ask": '{"n": 3}'})

    results = evaluate(
        {"total": "sum(items[].price)", "n": "steps.ask.n", "seen": "total", "none": "nope"},
        view,
        "steps[1]",
    )

    assert results == {"total": 6.5, "n": 3, "seen": None, "none": None}


@pytest.mark.parametrize(
    ("expression", "facts", "message"),
    [
        (
            "sum(names)",
            {"names": ["a"]},
            "steps[2].set.x: In function sum(), invalid type for value: a, expected one of: "
            "['array-number'], received: \"str\"",
        ),
        (
            "sum(big)",
            {"big": [1e308, 1e308]},
            "steps[2].set.x: the result holds NaN or Infinity, which JSON has not",
        ),
        (
            "length(`3`)",
            {},
            "steps[2].set.x: In function length(), invalid type for value: 3, expected one of: "
            "['string', 'array', 'object'], received: \"number\"",
        ),
    ],
)
def test_an_expression_that_fails_at_run_time_is_named(
    expression: str, facts: dict[str, Any], message: str
) -> None:
    with pytest.raises(TransformError) as failed:
        evaluate({"x": expression}, run_view(facts, {}, {}), "steps[2]")

    assert str(failed.value) == message
    assert failed.value.path == "steps[2].set.x"


def test_results_too_large_to_keep_fail_the_step() -> None:
    view = run_view({"text": "x" * 150_000}, {}, {})

    with pytest.raises(TransformError) as failed:
        evaluate({"a": "text", "b": "text"}, view, "steps[0]")

    assert str(failed.value) == (
        "steps[0].set: the results are 300018 characters of JSON, at most 200000"
    )


def test_its_results_are_added_to_the_facts_the_step_saw() -> None:
    parsed = graph(step("ask"), transform({"total": "sum(items)"}), step("after"))
    state = RunState.start(parsed, {"topic": "owls"})
    decide(parsed, state, StepResult("ask", response='{"items": [1, 2]}'))

    decide(parsed, state, StepResult("calc", response='{"total": 3}'))
    assert state.facts == {"topic": "owls", "items": [1, 2], "total": 3}

    # The step after answers text: the facts are the inputs again, as after any answer.
    decide(parsed, state, StepResult("after", response="Done."))
    assert state.facts == {"topic": "owls"}


@pytest.mark.parametrize(
    ("expressions", "read"),
    [
        ({"a": "items[0]", "b": "inputs.topic"}, frozenset()),
        ({"a": "steps.ask.items[0].name", "b": 'length(steps."check-it")'}, {"ask", "check-it"}),
        ({"a": "steps.ask.steps", "b": "items[].steps.x", "c": "facts.steps"}, {"ask"}),
        ({"a": "max_by(steps.ask.owls, &steps)", "b": "items[?steps.x > `1`]"}, {"ask"}),
        ({"a": "[steps.ask, {b: steps.tell}] | [0]"}, {"ask", "tell"}),
        ({"a": "steps.ask", "b": "keys(steps)"}, None),
        ({"a": "steps.*.total"}, None),
        ({"a": "steps[0]"}, None),
        ({"a": "steps"}, None),
    ],
)
def test_it_tells_which_steps_answers_the_expressions_read(
    expressions: dict[str, str], read: frozenset[str] | None
) -> None:
    assert steps_read(expressions) == read


def test_an_expression_doubling_its_value_at_each_level_fails_quickly_by_name() -> None:
    bomb = " | ".join(["to_string([@, @])"] * 30)
    parse_recipe(recipe(transform({"x": bomb})))  # a valid expression: the recipe is read
    started = time.monotonic()

    with pytest.raises(TransformError) as failed:
        evaluate({"x": bomb}, run_view({}, {}, {}), "steps[2]")

    assert str(failed.value) == (
        "steps[2].set.x: the expression builds a value of more than 200000 characters of JSON"
    )
    assert time.monotonic() - started < 1


def test_an_expression_nested_too_deeply_is_refused_at_its_path() -> None:
    with pytest.raises(RecipeInvalid) as refused:
        parse_recipe(recipe(transform({"x": "[" * 600 + "@" + "]" * 600})))

    assert refused.value.errors == ["steps[0].set.x: the expression nests more than 40 levels deep"]
