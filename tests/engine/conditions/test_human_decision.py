"""`human_decision`: the reviewer's decision."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine.conditions.human_decision import CONDITION_TYPE

CASES: list[Case] = [
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve"},
        "",
        {"decision": "approve"},
        True,
        "reviewer chose approve",
    ),
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve|revise"},
        "",
        {"decision": "revise"},
        True,
        "reviewer chose revise",
    ),
    (
        {"type": "human_decision", "value": "approve"},
        "",
        {"decision": " Approve "},
        True,
        "reviewer chose approve",
    ),
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve"},
        "",
        {"decision": "reject"},
        False,
        "reviewer chose reject, not approve",
    ),
    (
        {"type": "human_decision", "operator": "user_choice", "value": "approve"},
        "",
        {},
        False,
        "no reviewer decision",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
