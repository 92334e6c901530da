"""`execution_error`: whether the step failed, and what its error says."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine.conditions.execution_error import CONDITION_TYPE

CASES: list[Case] = [
    (
        {"type": "execution_error", "operator": "equals", "value": True},
        "",
        {"error": "HTTP 500"},
        True,
        "step failed: HTTP 500",
    ),
    (
        {"type": "execution_error", "operator": "equals", "value": True},
        "",
        {},
        False,
        "step did not fail",
    ),
    (
        {"type": "execution_error", "operator": "equals", "value": "false"},
        "",
        {},
        True,
        "step did not fail",
    ),
    (
        {"type": "execution_error", "operator": "equals", "value": False},
        "",
        {"error": "boom"},
        False,
        "step failed: boom",
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "429"},
        "",
        {"error": "HTTP 429 Too Many"},
        True,
        'error contains "429"',
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "Timeout"},
        "",
        {"error": "read timeout"},
        True,
        'error contains "timeout"',
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "quota"},
        "",
        {"error": "HTTP 500"},
        False,
        'error does not contain "quota"',
    ),
    (
        {"type": "execution_error", "operator": "contains", "value": "quota"},
        "",
        {},
        False,
        "step did not fail",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
