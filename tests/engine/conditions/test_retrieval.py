"""`retrieval`: the number of hits, or the best hit's score, with every operator and alias."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.builders import condition
from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import Citation, EvalContext, evaluate_condition
from workflows.engine.conditions.retrieval import CONDITION_TYPE


def hits(*scores: float) -> dict[str, Any]:
    """Return the context of a step whose sources found hits with these scores."""
    found = tuple(
        Citation(number=i, document=f"Doc {i}", text="text", score=s)
        for i, s in enumerate(scores, start=1)
    )
    return {"hits": found}


def count(op: str, value: object) -> dict[str, Any]:
    return {"type": "retrieval", "operator": op, "value": value}


def top(op: str, value: object) -> dict[str, Any]:
    return {"type": "retrieval", "operator": op, "value": value, "measure": "top_score"}


CASES: list[Case] = [
    (count("greater_equal", 1), "", hits(0.9, 0.5, 0.2), True, "3 hits >= 1"),
    (count("greater_equal", 1), "", hits(), False, "0 hits not >= 1"),
    (count("less_than", 1), "", hits(), True, "0 hits < 1"),
    (count("less_than", 1), "", hits(0.4), False, "1 hit not < 1"),
    (count("less_equal", 2), "", hits(0.4, 0.3), True, "2 hits <= 2"),
    (count("less_equal", 1), "", hits(0.4, 0.3), False, "2 hits not <= 1"),
    (count("greater_than", 1), "", hits(0.4, 0.3), True, "2 hits > 1"),
    (count("greater_than", 2), "", hits(0.4, 0.3), False, "2 hits not > 2"),
    (count("equals", 0), "", hits(), True, "0 hits == 0"),
    (count("equals", 0), "", hits(0.1), False, "1 hit != 0"),
    (count("not_equals", 0), "", hits(0.1), True, "1 hit != 0"),
    (count("not_equals", 1), "", hits(0.1), False, "1 hit == 1"),
    (count("greater_than_or_equal", 1), "", hits(0.1), True, "1 hit >= 1"),
    (count("greater_than_or_equal", 2), "", hits(0.1), False, "1 hit not >= 2"),
    (count("less_than_or_equal", 1), "", hits(0.1), True, "1 hit <= 1"),
    (count("less_than_or_equal", 0), "", hits(0.1), False, "1 hit not <= 0"),
    (count("greater_equal", "1"), "", hits(0.1), True, "1 hit >= 1"),
    (top("greater_equal", 0.5), "", hits(0.2, 0.72), True, "top score 0.72 >= 0.5"),
    (top("greater_equal", 0.5), "", hits(0.42), False, "top score 0.42 not >= 0.5"),
    (top("less_than", 0.3), "", hits(), True, "top score 0 (no hits) < 0.3"),
    (top("greater_than", 0.3), "", hits(0.123456), False, "top score 0.123 not > 0.3"),
    (count("greater_equal", 1), "", {}, False, "step searched no sources"),
    (top("less_than", 0.5), "", {}, False, "step searched no sources"),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


def test_a_step_that_searched_none_reads_the_runs_latest_hits_once_and_only_when_asked() -> None:
    asked: list[int] = []

    def hits_of(seq: int) -> tuple[Citation, ...]:
        asked.append(seq)
        return (Citation(number=1, document="Guide", text="…", score=0.8),)

    ctx = EvalContext(text="", hits_seq=4, hits_of=hits_of)
    assert asked == []
    when = condition(count("greater_equal", 1))
    assert evaluate_condition(when, ctx) == (True, "1 hit >= 1")
    assert evaluate_condition(condition(top("greater_equal", 0.9)), ctx) == (
        False,
        "top score 0.8 not >= 0.9",
    )
    assert asked == [4]
