"""`length_check`: the response's length, in characters or words, with every operator and alias."""

from __future__ import annotations

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, length, uncovered
from workflows.engine.conditions.length_check import CONDITION_TYPE

CASES: list[Case] = [
    (length("less_than", 200), "x" * 143, {}, True, "length 143 < 200"),
    (length("less_than", 200), "x" * 250, {}, False, "length 250 not < 200"),
    (length("less_than", "200"), "x" * 143, {}, True, "length 143 < 200"),
    (length("less_equal", 5), "hello", {}, True, "length 5 <= 5"),
    (length("less_equal", 4), "hello", {}, False, "length 5 not <= 4"),
    (length("greater_than", 3), "hello", {}, True, "length 5 > 3"),
    (length("greater_than", 5), "hello", {}, False, "length 5 not > 5"),
    (length("greater_equal", 5), "hello", {}, True, "length 5 >= 5"),
    (length("greater_equal", 6), "hello", {}, False, "length 5 not >= 6"),
    (length("equals", 5), "hello", {}, True, "length 5 == 5"),
    (length("equals", 4), "hello", {}, False, "length 5 != 4"),
    (length("not_equals", 4), "hello", {}, True, "length 5 != 4"),
    (length("not_equals", 5), "hello", {}, False, "length 5 == 5"),
    (length("greater_than_or_equal", 5), "hello", {}, True, "length 5 >= 5"),
    (length("greater_than_or_equal", 6), "hello", {}, False, "length 5 not >= 6"),
    (length("less_than_or_equal", 5), "hello", {}, True, "length 5 <= 5"),
    (length("less_than_or_equal", 4), "hello", {}, False, "length 5 not <= 4"),
    (length("less_than", 5, unit="words"), "one two three", {}, True, "length 3 words < 5"),
    (
        length("greater_than", 5, unit="words"),
        "one two three",
        {},
        False,
        "length 3 words not > 5",
    ),
    (length("greater_than", 2.5, unit="chars"), "abc", {}, True, "length 3 > 2.5"),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
