"""`default`: always true."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine.conditions.default import CONDITION_TYPE

CASES: list[Case] = [
    ({"type": "default"}, "", {}, True, "default"),
    ({"type": "default", "operator": "always", "value": "true"}, "", {}, True, "default"),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_case() -> None:
    # `default` holds whatever the step did: it has no false case to write.
    assert uncovered(CONDITION_TYPE, CASES) == ["always: false"]
