"""`route_selected`: the routes a classify step selected."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine.conditions.route_selected import CONDITION_TYPE

CASES: list[Case] = [
    (
        {"type": "route_selected", "operator": "includes", "value": "billing"},
        "",
        {"route_selection": ("billing", "respond")},
        True,
        "route billing selected",
    ),
    (
        {"type": "route_selected", "value": "billing"},
        "",
        {"route_selection": ("respond",)},
        False,
        "route billing not selected (selected: respond)",
    ),
    ({"type": "route_selected", "value": "billing"}, "", {}, False, "no route selection yet"),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
