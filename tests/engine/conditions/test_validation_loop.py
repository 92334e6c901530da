"""`confidence`, `validation_passed`, `fallback_used`, `attempts`: how the step's validation
loop ended, with every operator and alias, and their lint rule."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import branch, graph, step
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import RecipeGraph, ValidationSummary, lint_recipe
from workflows.engine.conditions import attempts, confidence, fallback_used, validation_passed
from workflows.engine.conditions.base import ConditionType

# A loop that ended below its threshold (the fallback replaced the answer), and one that passed.
LOW = {"validation": ValidationSummary(0.62, 0.7, 3, fallback_used=True)}
HIGH = {"validation": ValidationSummary(0.8, 0.75, 1, fallback_used=False)}
NONE: dict[str, Any] = {}
NO_LOOP = "the step ran no validation loop"


def when(kind: str, op: str | None = None, value: object = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": kind}
    if op is not None:
        doc["operator"] = op
    if value is not None:
        doc["value"] = value
    return doc


def conf(op: str, value: object) -> dict[str, Any]:
    return when("confidence", op, value)


def tries(op: str, value: object) -> dict[str, Any]:
    return when("attempts", op, value)


CONFIDENCE: list[Case] = [
    (conf("less_than", 0.7), "", LOW, True, "confidence 0.62 < 0.7"),
    (conf("less_than", 0.7), "", HIGH, False, "confidence 0.8 not < 0.7"),
    (conf("less_than", "0.7"), "", LOW, True, "confidence 0.62 < 0.7"),
    (conf("less_equal", 0.62), "", LOW, True, "confidence 0.62 <= 0.62"),
    (conf("less_equal", 0.6), "", LOW, False, "confidence 0.62 not <= 0.6"),
    (conf("greater_than", 0.75), "", HIGH, True, "confidence 0.8 > 0.75"),
    (conf("greater_than", 0.8), "", HIGH, False, "confidence 0.8 not > 0.8"),
    (conf("greater_equal", 0.8), "", HIGH, True, "confidence 0.8 >= 0.8"),
    (conf("greater_equal", 0.7), "", LOW, False, "confidence 0.62 not >= 0.7"),
    (conf("equals", 0.8), "", HIGH, True, "confidence 0.8 == 0.8"),
    (conf("equals", 0.7), "", HIGH, False, "confidence 0.8 != 0.7"),
    (conf("not_equals", 0.7), "", HIGH, True, "confidence 0.8 != 0.7"),
    (conf("not_equals", 0.8), "", HIGH, False, "confidence 0.8 == 0.8"),
    (conf("greater_than_or_equal", 0.5), "", LOW, True, "confidence 0.62 >= 0.5"),
    (conf("less_than_or_equal", 0.5), "", LOW, False, "confidence 0.62 not <= 0.5"),
    (conf("less_than", 1), "", NONE, False, NO_LOOP),
    # A float's noise is not shown: 0.1 + 0.2 reads 0.3.
    (
        conf("greater_than", 0.3),
        "",
        {"validation": ValidationSummary(0.1 + 0.2, 0.5, 2, fallback_used=True)},
        True,
        "confidence 0.3 > 0.3",
    ),
]

PASSED: list[Case] = [
    (
        when("validation_passed", "equals", True),
        "",
        HIGH,
        True,
        "validation passed: confidence 0.8 >= 0.75 after 1 attempt",
    ),
    (
        when("validation_passed"),
        "",
        LOW,
        False,
        "validation did not pass: confidence 0.62 < 0.7 after 3 attempts",
    ),
    (
        when("validation_passed", "equals", False),
        "",
        LOW,
        True,
        "validation did not pass: confidence 0.62 < 0.7 after 3 attempts",
    ),
    (when("validation_passed", "equals", "false"), "", NONE, False, NO_LOOP),
]

FALLBACK: list[Case] = [
    (
        when("fallback_used"),
        "",
        LOW,
        True,
        "fallback used: confidence 0.62 < 0.7 after 3 attempts",
    ),
    (
        when("fallback_used", "equals", True),
        "",
        HIGH,
        False,
        "fallback not used: confidence 0.8 >= 0.75 after 1 attempt",
    ),
    (
        when("fallback_used", "equals", False),
        "",
        HIGH,
        True,
        "fallback not used: confidence 0.8 >= 0.75 after 1 attempt",
    ),
    (when("fallback_used", "equals", True), "", NONE, False, NO_LOOP),
]

ATTEMPTS: list[Case] = [
    (tries("less_than", 3), "", HIGH, True, "attempts 1 < 3"),
    (tries("less_than", 3), "", LOW, False, "attempts 3 not < 3"),
    (tries("less_equal", 3), "", LOW, True, "attempts 3 <= 3"),
    (tries("less_equal", 2), "", LOW, False, "attempts 3 not <= 2"),
    (tries("greater_than", 2), "", LOW, True, "attempts 3 > 2"),
    (tries("greater_than", 1), "", HIGH, False, "attempts 1 not > 1"),
    (tries("greater_equal", 3), "", LOW, True, "attempts 3 >= 3"),
    (tries("greater_equal", 2), "", HIGH, False, "attempts 1 not >= 2"),
    (tries("equals", 1), "", HIGH, True, "attempts 1 == 1"),
    (tries("equals", 1), "", LOW, False, "attempts 3 != 1"),
    (tries("not_equals", 1), "", LOW, True, "attempts 3 != 1"),
    (tries("not_equals", 3), "", LOW, False, "attempts 3 == 3"),
    (tries("greater_than_or_equal", 3.0), "", LOW, True, "attempts 3 >= 3"),
    (tries("less_than_or_equal", "2"), "", LOW, False, "attempts 3 not <= 2"),
    (tries("greater_equal", 0), "", NONE, False, NO_LOOP),
]

TABLES: list[tuple[ConditionType, list[Case]]] = [
    (confidence.CONDITION_TYPE, CONFIDENCE),
    (validation_passed.CONDITION_TYPE, PASSED),
    (fallback_used.CONDITION_TYPE, FALLBACK),
    (attempts.CONDITION_TYPE, ATTEMPTS),
]


@pytest.mark.parametrize(CASE_FIELDS, [case for _, cases in TABLES for case in cases])
def test_it_reads_how_the_loop_ended_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


@pytest.mark.parametrize(("kind", "cases"), TABLES, ids=[k.name for k, _ in TABLES])
def test_every_operator_has_a_true_and_a_false_case(kind: ConditionType, cases: list[Case]) -> None:
    assert uncovered(kind, cases) == []


UNSURE = {
    "type": "or",
    "conditions": [
        {"type": "fallback_used"},
        {"type": "confidence", "operator": "less_than", "value": 0.7},
    ],
}


def _graph(**fields: Any) -> RecipeGraph:
    return graph(step("answer", branch("unsure", 1, UNSURE, "END_RECIPE", "@end"), **fields))


def test_lint_warns_about_a_loop_condition_on_a_step_without_a_loop() -> None:
    warnings = lint_recipe(_graph())
    message = "never holds: the step has no validation loop (set its validation)"
    assert sorted(warnings) == [
        f"steps[0].branches[0].when.conditions[0]: {message}",
        f"steps[0].branches[0].when.conditions[1]: {message}",
    ]


def test_lint_is_quiet_about_a_loop_condition_on_a_step_with_one() -> None:
    assert lint_recipe(_graph(validation={"threshold": 0.7, "fallback": "Unsure."})) == []
