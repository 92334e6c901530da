"""A recipe's budget: read from the document with clear errors, and the check before a call."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.engine.builders import graph, recipe, step
from workflows.engine import Budget, RecipeInvalid, Spend, check_budget, format_cost, parse_recipe


def test_it_reads_every_limit() -> None:
    parsed = graph(
        step("s"),
        budget={"max_tokens": 5000, "max_cost": 0.25, "max_calls": 8, "max_seconds": 90},
    )
    assert parsed.budget == Budget(
        max_tokens=5000, max_cost=Decimal("0.25"), max_calls=8, max_seconds=90.0
    )


@pytest.mark.parametrize("empty", [None, {}, {"max_tokens": None}])
def test_a_recipe_without_limits_has_no_budget(empty: object) -> None:
    assert graph(step("s"), budget=empty).budget is None
    assert graph(step("s")).budget is None


def test_a_cost_limit_is_read_exactly() -> None:
    assert graph(step("s"), budget={"max_cost": 0.1}).budget == Budget(max_cost=Decimal("0.1"))


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ([], ["budget: must be an object of limits, got list"]),
        ("10 dollars", ["budget: must be an object of limits, got str"]),
        (
            {"max_token": 5},
            [
                "budget.max_token: unknown limit; expected one of: max_tokens, max_cost, "
                "max_calls, max_seconds"
            ],
        ),
        (
            {"max_tokens": 0},
            ["budget.max_tokens: must be a whole number from 1 to 1000000000000000, got 0"],
        ),
        (
            {"max_tokens": 2.5},
            ["budget.max_tokens: must be a whole number from 1 to 1000000000000000, got 2.5"],
        ),
        (
            {"max_tokens": True},
            ["budget.max_tokens: must be a whole number from 1 to 1000000000000000, got True"],
        ),
        (
            {"max_calls": "3"},
            ["budget.max_calls: must be a whole number from 1 to 1000000000, got '3'"],
        ),
        (
            {"max_calls": 10**10},
            ["budget.max_calls: must be a whole number from 1 to 1000000000, got 10000000000"],
        ),
        (
            {"max_cost": 0},
            ["budget.max_cost: must be a number above 0 and at most 999999, got 0"],
        ),
        (
            {"max_cost": -1.5},
            ["budget.max_cost: must be a number above 0 and at most 999999, got -1.5"],
        ),
        (
            {"max_cost": 10**7},
            ["budget.max_cost: must be a number above 0 and at most 999999, got 10000000"],
        ),
        (
            {"max_cost": float("nan")},
            ["budget.max_cost: must be a number above 0 and at most 999999, got nan"],
        ),
        (
            {"max_cost": 0.000000001},
            ["budget.max_cost: has more than 8 decimal places, got 1e-09"],
        ),
        (
            {"max_seconds": 0},
            ["budget.max_seconds: must be a number of seconds from 1 to 1000000000, got 0"],
        ),
        (
            {"max_seconds": "1h"},
            ["budget.max_seconds: must be a number of seconds from 1 to 1000000000, got '1h'"],
        ),
        (
            {"max_tokens": -1, "max_calls": 0},
            [
                "budget.max_tokens: must be a whole number from 1 to 1000000000000000, got -1",
                "budget.max_calls: must be a whole number from 1 to 1000000000, got 0",
            ],
        ),
    ],
)
def test_it_refuses_a_bad_budget_with_each_error_at_its_path(value: Any, errors: list[str]) -> None:
    with pytest.raises(RecipeInvalid) as raised:
        parse_recipe(recipe(step("s"), budget=value))
    assert raised.value.errors == errors


# -- the check before a call -----------------------------------------------------------------


def test_no_budget_allows_every_call() -> None:
    assert check_budget(None, Spend(tokens=10**9, calls=10**6)) is None
    assert check_budget(Budget(), Spend(tokens=10**9)) is None


def test_a_call_limit_allows_exactly_that_many_calls() -> None:
    limit = Budget(max_calls=3)
    assert check_budget(limit, Spend(calls=2)) is None
    assert check_budget(limit, Spend(calls=3)) == (
        "budget: max_calls 3 would be passed (3 model calls made)"
    )
    assert check_budget(Budget(max_calls=1), Spend(calls=1)) == (
        "budget: max_calls 1 would be passed (1 model call made)"
    )


def test_a_token_limit_counts_the_next_prompt_and_is_passed_once_reached() -> None:
    limit = Budget(max_tokens=1000)
    assert check_budget(limit, Spend(tokens=900), Spend(tokens=99, calls=1)) is None
    # Reaching the limit with the answer still to come passes it: the answer adds tokens.
    assert check_budget(limit, Spend(tokens=900), Spend(tokens=100, calls=1)) == (
        "budget: max_tokens 1000 would be passed (900 spent, the next prompt about 100)"
    )
    assert check_budget(limit, Spend(tokens=1000)) is not None


def test_a_cost_limit_counts_the_next_prompts_cost() -> None:
    limit = Budget(max_cost=Decimal("0.5"))
    spend = Spend(cost=Decimal("0.45"))
    assert check_budget(limit, spend, Spend(cost=Decimal("0.04"), calls=1)) is None
    assert check_budget(limit, spend, Spend(cost=Decimal("0.05"), calls=1)) == (
        "budget: max_cost 0.5 would be passed (0.45 spent, the next prompt about 0.05)"
    )
    # Unpriced calls cost nothing: they never reach a cost limit.
    assert check_budget(limit, Spend(tokens=10**6, calls=40)) is None


def test_a_time_limit_counts_the_seconds_since_the_run_started() -> None:
    limit = Budget(max_seconds=60)
    assert check_budget(limit, Spend(seconds=59.9)) is None
    assert check_budget(limit, Spend(seconds=61.2)) == (
        "budget: max_seconds 60 passed (the run started 61 s ago)"
    )


def test_spends_add_up() -> None:
    total = Spend(10, Decimal("0.1"), 1, 2.0) + Spend(5, Decimal("0.2"), 2, 1.0)
    assert total == Spend(15, Decimal("0.3"), 3, 3.0)


@pytest.mark.parametrize(
    ("cost", "shown"),
    [
        (Decimal("0"), "0"),
        (Decimal("1.50000000"), "1.5"),
        (Decimal("0.00004200"), "0.000042"),
        (Decimal("12"), "12"),
        (Decimal("0.123456789"), "0.12345679"),
    ],
)
def test_it_shows_a_cost_without_trailing_zeros(cost: Decimal, shown: str) -> None:
    assert format_cost(cost) == shown
