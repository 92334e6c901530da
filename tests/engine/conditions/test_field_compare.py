"""`field_compare`: a field of the run's facts, and the alias check_count, with every operator."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, FACTS, Case, evaluated, uncovered
from workflows.engine.conditions.field_compare import CONDITION_TYPE


def _field(
    op: str, value: object, name: str = "image_count", kind: str = "field_compare"
) -> dict[str, Any]:
    return {"type": kind, "operator": op, "value": value, "field": name}


CASES: list[Case] = [
    (_field("greater_than", 0), "", {"facts": FACTS}, True, "field image_count 3 > 0"),
    (_field("greater_than", 3), "", {"facts": FACTS}, False, "field image_count 3 not > 3"),
    (_field("greater_equal", 3), "", {"facts": FACTS}, True, "field image_count 3 >= 3"),
    (_field("less_than", 2), "", {"facts": FACTS}, False, "field image_count 3 not < 2"),
    (_field("less_than", 4), "", {"facts": FACTS}, True, "field image_count 3 < 4"),
    (_field("less_equal", 3), "", {"facts": FACTS}, True, "field image_count 3 <= 3"),
    (_field("less_equal", 2), "", {"facts": FACTS}, False, "field image_count 3 not <= 2"),
    (_field("equals", 3), "", {"facts": FACTS}, True, "field image_count 3 == 3"),
    (_field("equals", 4), "", {"facts": FACTS}, False, "field image_count 3 != 4"),
    (_field("not_equals", 3), "", {"facts": FACTS}, False, "field image_count 3 == 3"),
    (
        _field("greater_than_or_equal", 4),
        "",
        {"facts": FACTS},
        False,
        "field image_count 3 not >= 4",
    ),
    (_field("less_than_or_equal", 3), "", {"facts": FACTS}, True, "field image_count 3 <= 3"),
    (
        _field("greater_than", 0, kind="check_count"),
        "",
        {"facts": FACTS},
        True,
        "field image_count 3 > 0",
    ),
    (_field("less_equal", 12, "doc.pages"), "", {"facts": FACTS}, True, "field doc.pages 12 <= 12"),
    (_field("equals", 2, "tags"), "", {"facts": FACTS}, True, "field tags 2 == 2"),
    (_field("greater_than", 0), "", {"facts": {}}, False, "field image_count missing"),
    (
        _field("greater_than", 0, "doc.words"),
        "",
        {"facts": FACTS},
        False,
        "field doc.words missing",
    ),
    (
        _field("equals", "done", "status"),
        "",
        {"facts": FACTS},
        True,
        'field status "done" == "done"',
    ),
    (
        _field("not_equals", "done", "status"),
        "",
        {"facts": FACTS},
        False,
        'field status "done" == "done"',
    ),
    (
        _field("not_equals", "open", "status"),
        "",
        {"facts": FACTS},
        True,
        'field status "done" != "open"',
    ),
    (
        _field("greater_than", 1, "status"),
        "",
        {"facts": FACTS},
        False,
        "field status is not a number: 'done'",
    ),
    (
        _field("greater_than", 1),
        "",
        {"facts": {"image_count": "4"}},
        True,
        "field image_count 4 > 1",
    ),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []
