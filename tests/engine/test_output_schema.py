"""Structured output in the engine: an llm step's `output_schema` checked at parse time (each
error at its path), answers read and validated (patterns with RE2), the feedback a retry
carries, OpenAI's strict subset, and the check as the step's details keep it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import RecipeInvalid, parse_recipe
from workflows.engine.output_schema import (
    SchemaCheck,
    check_answer,
    feedback,
    instruction,
    read_answer,
    strict_compatible,
    wire_name,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z][a-z]+$"},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
}


def test_it_reads_an_output_schema_and_its_attempts() -> None:
    parsed = graph(step("ask", output_schema=PERSON, output_schema_attempts=3), step("plain"))

    ask, plain = parsed.steps
    assert (ask.output_schema, ask.output_schema_attempts) == (PERSON, 3)
    assert (plain.output_schema, plain.output_schema_attempts) == (None, 2)


BAD_SCHEMAS: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"output_schema": ["type", "object"]},
        ["steps[0].output_schema: must be a JSON Schema (an object), got list"],
    ),
    (
        {"output_schema": {"type": "array"}},
        [
            "steps[0].output_schema.type: must be \"object\": the answer's fields become the run's facts"
        ],
    ),
    (
        {"output_schema": {"type": "object", "properties": {"age": {"type": "integr"}}}},
        [
            "steps[0].output_schema.properties.age.type: 'integr' is not valid under any of "
            "the given schemas"
        ],
    ),
    (
        {"output_schema": {"type": "object", "required": "name"}},
        ["steps[0].output_schema.required: 'name' is not of type 'array'"],
    ),
    (
        {"output_schema": {"type": "object", "properties": {"a": {"$ref": "https://x.test/s"}}}},
        [
            "steps[0].output_schema.properties.a.$ref: only references within the schema "
            "(#/...) are followed"
        ],
    ),
    (
        {"output_schema": {"type": "object", "patternProperties": {"^x": {}}}},
        [
            "steps[0].output_schema.patternProperties: is not supported (its patterns would "
            "run unbounded); use propertyNames"
        ],
    ),
    (
        {"output_schema": {"type": "object", "properties": {"a": {"pattern": "(a)\\1"}}}},
        [
            "steps[0].output_schema.properties.a.pattern: pattern does not compile: "
            "backreferences and lookaround are not supported (invalid escape sequence: \\1)"
        ],
    ),
    (
        {"output_schema": {"type": "object", "description": "x" * 50_000}},
        ["steps[0].output_schema: is 50037 characters of JSON, at most 50000"],
    ),
    (
        {"output_schema": PERSON, "output_schema_attempts": 0},
        ["steps[0].output_schema_attempts: must be a whole number from 1 to 5, got 0"],
    ),
    (
        {"output_schema_attempts": 2},
        ["steps[0].output_schema_attempts: is set without an output_schema"],
    ),
    (
        {"output_schema": PERSON, "validation": {"threshold": 0.5}},
        ["steps[0].output_schema: a step with a validation loop has no output_schema (not yet)"],
    ),
    (
        {"output_schema": PERSON, "tools": ["demo.add"]},
        ["steps[0].output_schema: a step with tools has no output_schema (not yet)"],
    ),
    (
        {"kind": "classify", "routes": [{"name": "a"}], "output_schema": PERSON},
        ["steps[0].output_schema: a classify step has no output_schema"],
    ),
]


@pytest.mark.parametrize(("fields", "errors"), BAD_SCHEMAS)
def test_it_refuses_an_output_schema_it_cannot_check(
    fields: dict[str, Any], errors: list[str]
) -> None:
    with pytest.raises(RecipeInvalid) as refused:
        parse_recipe(recipe(step("ask", **fields)))

    assert refused.value.errors == errors


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ('{"name": "Ada", "age": 36}', {"name": "Ada", "age": 36}),
        ('```json\n{"name": "Ada", "age": 36}\n```', {"name": "Ada", "age": 36}),
        ('<think>{"age": 1}?</think>{"name": "Ada", "age": 36}', {"name": "Ada", "age": 36}),
        ('Here it is: {"name": "Ada", "age": 36}. Done.', {"name": "Ada", "age": 36}),
        ('{"name": "Ada", "age": NaN}', None),
        ("[1, 2]", None),
        ("No JSON at all", None),
    ],
)
def test_it_reads_the_answers_json_object_as_answers_are_read(
    answer: str, value: dict[str, Any] | None
) -> None:
    assert read_answer(answer) == value


@pytest.mark.parametrize(
    ("answer", "errors"),
    [
        ('{"name": "Ada", "age": 36, "tags": ["x"]}', []),
        ("Sorry, I can't.", ["the answer holds no JSON object"]),
        ('{"name": "Ada"}', ["$: 'age' is a required property"]),
        (
            '{"name": "ada", "age": -1, "tags": [1]}',
            [
                "age: -1 is less than the minimum of 0",
                "name: 'ada' does not match '^[A-Z][a-z]+$'",
                "tags.0: 1 is not of type 'string'",
            ],
        ),
    ],
)
def test_it_checks_an_answer_against_the_schema(answer: str, errors: list[str]) -> None:
    assert check_answer(PERSON, answer)[1] == errors


def test_it_keeps_the_first_errors_and_counts_the_others() -> None:
    schema = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(8)}}
    answer = "{" + ", ".join(f'"f{i}": {i}' for i in range(8)) + "}"

    _, errors = check_answer(schema, answer)

    assert errors == [f"f{i}: {i} is not of type 'string'" for i in range(5)] + ["… and 3 more"]


def test_a_pattern_is_matched_in_bounded_time() -> None:
    # Python's `re` backtracks on this for minutes; RE2 answers at once.
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}

    _, errors = check_answer(schema, '{"a": "' + "a" * 40 + 'b"}')

    assert errors == ["a: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…' does not match '^(a+)+$'"]


def test_a_retry_is_told_the_errors_and_a_server_that_does_not_enforce_the_schema() -> None:
    assert feedback(["age: -1 is less than the minimum of 0"]) == (
        "Your previous answer did not match the required JSON Schema: age: -1 is less than the "
        "minimum of 0. Answer again with only a JSON object that matches the schema."
    )
    assert instruction({"type": "object"}) == (
        'Answer with only a JSON object that matches this JSON Schema:\n{"type": "object"}'
    )
    assert wire_name("k" * 80) == "k" * 64


@pytest.mark.parametrize(
    ("schema", "strict"),
    [
        (PERSON, False),
        ({"type": "object", "properties": {}, "additionalProperties": False}, True),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"type": "array", "items": {"type": "object", "properties": {}}},
                },
                "required": ["a"],
                "additionalProperties": False,
            },
            False,
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                "required": ["a"],
                "additionalProperties": False,
            },
            True,
        ),
    ],
)
def test_it_tells_which_schemas_openais_strict_mode_takes(
    schema: dict[str, Any], strict: bool
) -> None:
    assert strict_compatible(schema) is strict


def test_a_check_round_trips_through_the_details_and_says_how_it_ended() -> None:
    failed = SchemaCheck(valid=False, errors=("$: 'age' is a required property",), attempts=2)

    assert SchemaCheck.from_json(failed.as_json()) == failed
    assert SchemaCheck.from_json({"answers": []}) is None
    assert SchemaCheck.from_json(None) is None
    assert failed.reason() == (
        "no answer met the output schema in 2 answers: $: 'age' is a required property"
    )
    assert SchemaCheck(valid=True).reason() == "the answer met the output schema (1 answer)"
