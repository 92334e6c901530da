"""`cites_source`: the response's citation markers [n], against the hits the step worked with."""

from __future__ import annotations

from typing import Any

import pytest

from tests.engine.conditions.cases import CASE_FIELDS, Case, evaluated, uncovered
from workflows.engine import Citation
from workflows.engine.conditions.cites_source import CONDITION_TYPE


def hits(n: int) -> dict[str, Any]:
    """Return the context of a step whose sources found `n` hits."""
    found = tuple(
        Citation(number=i, document=f"Doc {i}", text="text", score=0.5) for i in range(1, n + 1)
    )
    return {"hits": found}


CITES = {"type": "cites_source", "operator": "cites"}
CITES_NONE = {"type": "cites_source", "operator": "cites_none"}

CASES: list[Case] = [
    (CITES, "Blue light scatters more [1]. See also [3].", hits(3), True, "cites [1], [3]"),
    (CITES, "Both say so [1, 2], twice [2].", hits(2), True, "cites [1], [2]"),
    (CITES, "It is blue [7].", hits(2), False, "[7] names no hit (2 hits)"),
    (CITES, "As [0] and [4] say.", hits(3), False, "[0], [4] name no hit (3 hits)"),
    (CITES, "It is blue.", hits(2), False, "cites no source (2 hits)"),
    (CITES, "It is blue [1].", hits(0), False, "[1] names no hit (0 hits)"),
    (CITES, "It is blue [1] [9].", hits(1), True, "cites [1]; [9] names no hit (1 hit)"),
    (CITES, "It is blue [1].", {}, False, "step searched no sources"),
    (CITES_NONE, "I don't know.", hits(2), True, "cites no source (2 hits)"),
    (CITES_NONE, "It is blue [5].", hits(2), True, "[5] names no hit (2 hits)"),
    (CITES_NONE, "It is blue [2].", hits(2), False, "cites [2]"),
    (CITES_NONE, "It is blue.", {}, False, "step searched no sources"),
]


@pytest.mark.parametrize(CASE_FIELDS, CASES)
def test_it_evaluates_each_operator_with_its_reason(
    when: dict, text: str, context: dict, matched: bool, reason: str
) -> None:
    assert evaluated(when, text, context) == (matched, reason)


def test_every_operator_has_a_true_and_a_false_case() -> None:
    assert uncovered(CONDITION_TYPE, CASES) == []


def test_it_names_at_most_ten_markers_in_a_reason() -> None:
    text = " ".join(f"[{n}]" for n in range(1, 16))
    assert evaluated(CITES, text, hits(20)) == (
        True,
        "cites [1], [2], [3], [4], [5], [6], [7], [8], [9], [10] and 5 more",
    )
