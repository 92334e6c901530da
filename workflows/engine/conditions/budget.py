"""`budget`: what the run has spent on model calls (tokens, cost, calls) compares true.

A recipe switches to a cheaper actor as it spends (`cost >= 0.5` goes to a step run by a
smaller model). The spend counts every call committed so far and the step's own calls, the
evaluators asked before this branch included.

When the run's budget refused one of the step's calls (`budget.py`), the step failed: every
`budget` condition then holds, whatever it compares, so that the step's budget branch (the
first in priority order) takes the run on instead of failing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from workflows.engine.budget import as_cost, format_cost
from workflows.engine.conditions.base import ConditionScope, ConditionType
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.numeric import (
    NUMERIC_OPERATOR_ALIASES,
    NUMERIC_OPERATORS,
    check_number,
    compare_numbers,
    number_value,
)
from workflows.engine.conditions.values import format_number
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition

MEASURES: tuple[str, ...] = ("tokens", "cost", "calls")
DEFAULT_MEASURE = "tokens"
EXCEEDED = "the run's budget stopped the step"
NO_ACCOUNT = "no spend is known to compare"


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the measure, and that the value is a number of at least 0."""
    measure = fields.get("measure", DEFAULT_MEASURE)
    if measure not in MEASURES:
        scope.error(
            f"{path}.measure",
            f"unknown measure {measure!r}; expected one of: {', '.join(MEASURES)}",
        )
        return False, None
    valid, number = check_number(value, path, scope)
    if not valid:
        return False, None
    if number < 0:
        scope.error(f"{path}.value", f"what was spent is at least 0, got {value!r}")
        return False, None
    return True, number


def prepare(condition: Condition) -> object:
    """Return the measure and the value to compare it with (a Decimal for a cost)."""
    measure = condition.fields.get("measure") or DEFAULT_MEASURE
    number = number_value(condition)
    if measure == "cost":
        return measure, as_cost(number) or Decimal(0)
    return measure, number


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare what the run has spent with the value; hold when the budget stopped the step."""
    if ctx.budget_exceeded:
        return True, EXCEEDED
    if ctx.spend is None:
        return False, NO_ACCOUNT
    measure, limit = prepared
    spend = ctx.spend()
    if measure == "cost":
        result, symbol = compare_numbers(condition.operator, spend.cost, limit)
        return result, f"cost {format_cost(spend.cost)} {symbol} {format_cost(limit)}"
    actual = spend.tokens if measure == "tokens" else spend.calls
    result, symbol = compare_numbers(condition.operator, actual, limit)
    return result, f"{actual} {measure} spent {symbol} {format_number(limit)}"


CONDITION_TYPE = ConditionType(
    name="budget",
    label="Spent on models (budget)",
    help=(
        "What the run has spent on model calls so far compares true: `tokens` (in and out), "
        "`cost` (in the actors' currency) or `calls`, this step's calls included. Holds "
        "whenever the run's budget stopped the step, so that this branch takes the run on "
        "instead of failing it."
    ),
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        FieldSpec(
            "measure",
            "Measure",
            "choice",
            choices=MEASURES,
            default=DEFAULT_MEASURE,
            display={"": "tokens", "tokens": "tokens", "cost": "cost", "calls": "calls"},
        ),
        FieldSpec("value", "Value", "number", required=True),
    ),
    summary={"*": "{measure} {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    asks_about_budget=True,
)
