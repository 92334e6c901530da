"""Lint: branches that earlier branches of the same step leave no value to match."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.builders import branch, graph, step
from workflows.engine import lint_recipe
from workflows.engine.conditions.numeric import NUMERIC_OPERATORS, holds


def judge(operator: str, value: Any, **fields: Any) -> dict[str, Any]:
    return {
        "type": "ai_evaluation",
        "operator": operator,
        "value": value,
        "evaluator": "judge",
        "prompt": "Rate it 1-10",
        **fields,
    }


def length(operator: str, value: Any, **fields: Any) -> dict[str, Any]:
    return {"type": "length_check", "operator": operator, "value": value, **fields}


def either(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"type": "or", "conditions": list(conditions)}


def both(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"type": "and", "conditions": list(conditions)}


def negate(condition: dict[str, Any]) -> dict[str, Any]:
    return {"type": "not", "conditions": [condition]}


REGEX = {"type": "pattern_match", "operator": "contains", "value": "dragon"}
PATH = "steps[0].branches"
LOW_HIGH = "'low' (priority 1) and 'high' (priority 2)"
EVERY_SCORE = f"never taken: {LOW_HIGH} before it match every score of judge 'judge'"
MISSING_ONLY = (
    "taken only when the score of judge 'judge' is missing (no number in its answer): "
    f"{LOW_HIGH} before it match every score"
)


def shadow_warnings(*conditions: dict[str, Any] | None, target: str = "@complete") -> list[str]:
    """Lint one step with a branch per condition (None: the default) in priority order."""
    names = ["low", "high", "third", "fourth"]
    branches = [branch(names[i], i + 1, when, target=target) for i, when in enumerate(conditions)]
    return [
        w
        for w in lint_recipe(graph(step("s", *branches)))
        if "never taken" in w or "taken only" in w
    ]


@pytest.mark.parametrize(
    ("conditions", "warnings"),
    [
        # The example: two scores cover every score; the default after is reached
        # only when the judge gives no number, a third score branch never.
        (
            [judge("less_than", 6), judge("greater_equal", 6), None],
            [f"{PATH}[2]: {MISSING_ONLY}"],
        ),
        (
            [judge("less_than", 6), judge("greater_equal", 6), judge("equals", 9)],
            [
                f"{PATH}[2]: never taken: every score of judge 'judge' it matches is matched "
                "first by 'high' (priority 2)"
            ],
        ),
        (
            [judge("less_than", 6), judge("greater_equal", 6), REGEX],
            [f"{PATH}[2]: {MISSING_ONLY}"],
        ),
        # A branch inside what one earlier branch matches.
        (
            [judge("greater_equal", 8), judge("greater_than", 9)],
            [
                f"{PATH}[1]: never taken: every score of judge 'judge' it matches is matched "
                "first by 'low' (priority 1)"
            ],
        ),
        # Inside the union of two, though inside neither.
        (
            [judge("less_equal", 3), judge("greater_equal", 7), judge("not_equals", 5)],
            [],
        ),
        (
            [judge("less_equal", 5), judge("greater_equal", 5), judge("less_than", 2)],
            [
                f"{PATH}[2]: never taken: every score of judge 'judge' it matches is matched "
                "first by 'low' (priority 1)"
            ],
        ),
        # Gaps leave later branches reachable: a score of exactly 6, or between 5 and 6.
        ([judge("less_than", 6), judge("greater_than", 6), judge("equals", 6)], []),
        ([judge("less_than", 5), judge("greater_equal", 6), None], []),
        # Another judge, another prompt, or a longer answer are other values.
        ([judge("less_than", 6), judge("greater_equal", 6, evaluator="critic"), None], []),
        ([judge("less_than", 6), judge("greater_equal", 6, prompt="Rate style"), None], []),
        # Lengths are whole numbers and never negative, and are never missing.
        (
            [length("less_than", 200), length("greater_than", 199), None],
            [f"{PATH}[2]: never taken: {LOW_HIGH} before it match every response length"],
        ),
        (
            [length("equals", 0), length("greater_equal", 1), REGEX],
            [f"{PATH}[2]: never taken: {LOW_HIGH} before it match every response length"],
        ),
        ([length("less_than", 200), length("greater_than", 200), None], []),
        (
            [length("less_than", 20, unit="words"), length("greater_equal", 20), None],
            [],
        ),
        (
            [length("less_than", 20), length("greater_equal", 20, unit="words"), None],
            [],
        ),
        (
            [length("greater_than", 100), length("greater_equal", 500, unit="chars")],
            [
                f"{PATH}[1]: never taken: every response length it matches is matched first "
                "by 'low' (priority 1)"
            ],
        ),
        # and / or / not of comparisons of one value are read; mixed ones are not.
        (
            [either(length("less_than", 10), length("greater_than", 100)), length("less_than", 5)],
            [
                f"{PATH}[1]: never taken: every response length it matches is matched first "
                "by 'low' (priority 1)"
            ],
        ),
        (
            [both(length("greater_than", 10), length("less_than", 100)), length("equals", 50)],
            [
                f"{PATH}[1]: never taken: every response length it matches is matched first "
                "by 'low' (priority 1)"
            ],
        ),
        (
            [negate(judge("less_than", 6)), judge("less_than", 6), None],
            [f"{PATH}[2]: never taken: {LOW_HIGH} before it match every score of judge 'judge'"],
        ),
        ([both(length("greater_than", 10), REGEX), length("equals", 50)], []),
    ],
)
def test_it_finds_branches_left_no_value(
    conditions: list[dict[str, Any] | None], warnings: list[str]
) -> None:
    assert shadow_warnings(*conditions) == warnings


def test_a_repeat_covers_nothing_as_its_retries_run_out() -> None:
    g = graph(
        step(
            "s",
            branch(
                "short", 1, length("less_than", 200), target="@repeat", params={"max_retries": 2}
            ),
            branch("long", 2, length("greater_equal", 200), target="@complete"),
            branch("after", 3, target="@end"),
        )
    )

    assert not [w for w in lint_recipe(g) if "never taken" in w]


def test_an_inactive_branch_covers_nothing() -> None:
    g = graph(
        step(
            "s",
            branch("low", 1, judge("less_than", 6), active=False),
            branch("high", 2, judge("greater_equal", 6)),
            branch("rest", 3, target="@end"),
        )
    )

    assert not [w for w in lint_recipe(g) if "taken" in w]


def test_it_points_at_the_branch_where_the_document_has_it() -> None:
    # Branches are tried by priority, but the path names the branch's place in the document.
    g = graph(
        step(
            "s",
            branch("last", 3, judge("equals", 7)),
            branch("low", 1, judge("less_than", 6)),
            branch("high", 2, judge("greater_equal", 6)),
        )
    )

    assert [w for w in lint_recipe(g) if "never taken" in w] == [
        "steps[0].branches[0]: never taken: every score of judge 'judge' it matches is matched "
        "first by 'high' (priority 2)"
    ]


OPERATORS = [op.name for op in NUMERIC_OPERATORS]


def warned_branches(conditions: list[dict[str, Any]]) -> set[int]:
    """Return the indexes of the branches (one per condition, in order) lint says are never taken."""
    names = ["low", "high", "third", "fourth", "fifth"]
    step_doc = step("s", *[branch(names[i], i + 1, c) for i, c in enumerate(conditions)])
    return {
        int(w.split("branches[")[1].split("]")[0])
        for w in lint_recipe(graph(step_doc))
        if "never taken" in w
    }


@given(
    st.lists(
        st.tuples(st.sampled_from(OPERATORS), st.integers(0, 12), st.booleans()),
        min_size=1,
        max_size=5,
    )
)
@settings(max_examples=300, deadline=None)
def test_a_branch_warned_about_is_never_the_first_to_match(
    comparisons: list[tuple[str, int, bool]],
) -> None:
    # Checked against every length that can tell the thresholds apart; `negated` wraps in not.
    conditions = [
        negate(length(op, value)) if negated else length(op, value)
        for op, value, negated in comparisons
    ]
    warned = warned_branches(conditions)
    for size in range(0, 15):
        for i, (op, value, negated) in enumerate(comparisons):
            if holds(op, size, value) != negated:
                assert i not in warned, (size, comparisons)
                break


@given(
    st.lists(
        st.tuples(st.sampled_from(OPERATORS), st.integers(1, 10), st.booleans()),
        min_size=1,
        max_size=5,
    )
)
@settings(max_examples=300, deadline=None)
def test_a_judge_branch_warned_about_is_never_the_first_to_match(
    comparisons: list[tuple[str, int, bool]],
) -> None:
    # Scores are any number, or none (every comparison false): thresholds and between them.
    conditions = [
        negate(judge(op, value)) if negated else judge(op, value)
        for op, value, negated in comparisons
    ]
    warned = warned_branches(conditions)
    for score in [None, *(n / 2 for n in range(-2, 24))]:
        for i, (op, value, negated) in enumerate(comparisons):
            compares = score is not None and holds(op, score, value)
            if compares != negated:
                assert i not in warned, (score, comparisons)
                break
