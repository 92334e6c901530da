"""`schema_valid`: whether the step's answers met its output schema, and its lint rule."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, step
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import RunState, StepResult, decide, lint_recipe
from workflows.engine.conditions import schema_valid
from workflows.engine.output_schema import SchemaCheck

MET = {"schema": SchemaCheck(valid=True, attempts=2)}
MISSED = {"schema": SchemaCheck(valid=False, errors=("age: -1 is less than 0",), attempts=2)}
NOT_CHECKED = "no answer of the step was checked against an output schema"
VALID = {"type": "schema_valid", "operator": "equals", "value": True}
INVALID = {"type": "schema_valid", "value": False}
SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}}

CASES: list[Case] = [
    (VALID, "{}", MET, True, "the answer met the output schema (2 answers)"),
    (
        VALID,
        "",
        MISSED,
        False,
        "no answer met the output schema in 2 answers: age: -1 is less than 0",
    ),
    (
        INVALID,
        "",
        MISSED,
        True,
        "no answer met the output schema in 2 answers: age: -1 is less than 0",
    ),
    (INVALID, "{}", MET, False, "the answer met the output schema (2 answers)"),
    ({"type": "schema_valid"}, "{}", MET, True, "the answer met the output schema (2 answers)"),
    (VALID, "text", {}, False, NOT_CHECKED),
    (INVALID, "", {}, False, NOT_CHECKED),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates(
    when: dict[str, Any], text: str, context: dict[str, Any], matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_is_covered() -> None:
    assert uncovered(schema_valid.CONDITION_TYPE, CASES) == []


def test_a_false_branch_takes_on_the_step_that_failed_its_schema() -> None:
    parsed = graph(
        step(
            "ask",
            branch("bad", 1, INVALID, "ERROR_HANDLER", "fix"),
            output_schema=SCHEMA,
        ),
        step("fix"),
    )
    state = RunState.start(parsed, {"topic": "owls"})
    failed = StepResult("ask", error=MISSED["schema"].reason(), schema=MISSED["schema"])

    decision = decide(parsed, state, failed)

    assert (decision.kind, decision.next_step, decision.branch) == ("goto", "fix", "bad")


def test_a_step_whose_model_failed_is_not_taken_on_by_it() -> None:
    parsed = graph(
        step("ask", branch("bad", 1, INVALID, "ERROR_HANDLER", "fix"), output_schema=SCHEMA),
        step("fix"),
    )

    decision = decide(
        parsed, RunState.start(parsed, {"topic": "owls"}), StepResult("ask", error="503")
    )

    assert (decision.kind, decision.reason) == ("fail", "step 'ask' failed: 503")


def test_it_warns_when_the_step_has_no_output_schema() -> None:
    parsed = graph(step("ask", branch("bad", 1, INVALID, "CONTINUE", "fix")), step("fix"))

    assert lint_recipe(parsed) == [
        "steps[0].branches[0].when: never holds: the step has no output_schema (set one on an "
        "llm step)"
    ]
