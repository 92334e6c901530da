"""`execution_timeout`: whether the step timed out."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine.conditions.execution_timeout import CONDITION_TYPE

CASES: list[Case] = [
    (
        {"type": "execution_timeout", "operator": "equals", "value": True},
        "",
        {"timed_out": True},
        True,
        "step timed out",
    ),
    (
        {"type": "execution_timeout", "operator": "equals", "value": "true"},
        "",
        {},
        False,
        "step did not time out",
    ),
    (
        {"type": "execution_timeout", "operator": "equals", "value": False},
        "",
        {},
        True,
        "step did not time out",
    ),
    (
        {"type": "execution_timeout", "value": False},
        "",
        {"timed_out": True},
        False,
        "step timed out",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
