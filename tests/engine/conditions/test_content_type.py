"""`content_type`: the response's detected content type."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, TEXT, Case, evaluated, uncovered
from workflows.engine.conditions.content_type import CONDITION_TYPE

CASES: list[Case] = [
    (
        {"type": "content_type", "operator": "is", "value": "code"},
        "```python\nprint(1)\n```",
        {},
        True,
        "content type is code",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "json"},
        '{"a": 1}',
        {},
        True,
        "content type is json",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "list"},
        "- a\n- b\n- c",
        {},
        True,
        "content type is list",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "numbers"},
        "2, 3, 5, 7, 11",
        {},
        True,
        "content type is numbers",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "prose"},
        TEXT,
        {},
        True,
        "content type is prose",
    ),
    (
        {"type": "content_type", "operator": "is", "value": "code"},
        TEXT,
        {},
        False,
        "content type is prose, not code",
    ),
    (
        {"type": "content_type", "operator": "is_not", "value": "code"},
        TEXT,
        {},
        True,
        "content type is prose, not code",
    ),
    (
        {"type": "content_type", "operator": "is_not", "value": "prose"},
        TEXT,
        {},
        False,
        "content type is prose",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
