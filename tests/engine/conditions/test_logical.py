"""`and`, `or`, `not`, as a type or as the operator of any other type name."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, length, pattern
from workflows.engine import combinator

CASES: list[Case] = [
    (
        {
            "type": "and",
            "conditions": [length("less_than", 200), pattern("regex_match", "error")],
        },
        "an error",
        {},
        True,
        'and: [length 8 < 200; regex matched "error" at 3]',
    ),
    (
        {
            "type": "and",
            "conditions": [length("greater_than", 100), pattern("regex_match", "error")],
        },
        "an error",
        {},
        False,
        "and: [length 8 not > 100]",
    ),
    (
        {
            "type": "or",
            "conditions": [length("greater_than", 100), pattern("regex_match", "error")],
        },
        "an error",
        {},
        True,
        'or: [length 8 not > 100; regex matched "error" at 3]',
    ),
    (
        {"type": "or", "conditions": [length("greater_than", 100), pattern("contains", "x")]},
        "an error",
        {},
        False,
        'or: [length 8 not > 100; response does not contain "x"]',
    ),
    (
        {"type": "not", "conditions": [length("greater_than", 100)]},
        "an error",
        {},
        True,
        "not: [length 8 not > 100]",
    ),
    (
        {"type": "not", "conditions": [length("less_than", 100)]},
        "an error",
        {},
        False,
        "not: [length 8 < 100]",
    ),
    (
        {
            "type": "check_size_and_error",
            "operator": "and",
            "conditions": [length("less_than", 200), pattern("contains", "error")],
        },
        "an error",
        {},
        True,
        'and: [length 8 < 200; response contains "error"]',
    ),
    (
        {"type": "anything", "operator": "not", "conditions": [pattern("contains", "error")]},
        "an error",
        {},
        False,
        'not: [response contains "error"]',
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_combines_conditions_with_the_reasons_of_the_operands_it_asked(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_it_recognises_both_spellings_of_a_combination() -> None:
    assert combinator("and", None) == "and"
    assert combinator("check_both", "and") == "and"
    assert combinator("length_check", "and") is None
    assert combinator("check_count", "or") is None
