"""The numeric operators that length, score and field comparisons share, and their checks."""

from __future__ import annotations

import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from workflows.engine.conditions.base import ConditionScope, Operator
from workflows.engine.conditions.values import as_number
from workflows.engine.errors import EngineError
from workflows.engine.graph import Condition

NUMERIC_OPERATORS: tuple[Operator, ...] = (
    Operator("less_than", "less than", "<"),
    Operator("less_equal", "at most", "≤"),
    Operator("greater_than", "greater than", ">"),
    Operator("greater_equal", "at least", "≥"),
    Operator("equals", "equals", "="),
    Operator("not_equals", "does not equal", "≠"),
)
NUMERIC_OPERATOR_ALIASES: dict[str, str] = {
    "greater_than_or_equal": "greater_equal",
    "less_than_or_equal": "less_equal",
}
NUMERIC_OPERATOR_NAMES: tuple[str, ...] = (
    *(op.name for op in NUMERIC_OPERATORS),
    *NUMERIC_OPERATOR_ALIASES,
)

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "less_than": operator.lt,
    "less_equal": operator.le,
    "greater_than": operator.gt,
    "greater_equal": operator.ge,
    "equals": operator.eq,
    "not_equals": operator.ne,
}
# How an operator reads in a reason (ASCII, as stored in the log), when it holds and not.
_REASON_SYMBOLS: dict[str, tuple[str, str]] = {
    "less_than": ("<", "not <"),
    "less_equal": ("<=", "not <="),
    "greater_than": (">", "not >"),
    "greater_equal": (">=", "not >="),
    "equals": ("==", "!="),
    "not_equals": ("!=", "=="),
}
for _alias, _name in NUMERIC_OPERATOR_ALIASES.items():
    _COMPARE[_alias] = _COMPARE[_name]
    _REASON_SYMBOLS[_alias] = _REASON_SYMBOLS[_name]


def holds(op: str, actual: float | int, expected: float | int) -> bool:
    """Tell whether `actual op expected` holds."""
    return _COMPARE[op](actual, expected)


def reason_symbol(op: str) -> str:
    """Return how operator `op` reads in a reason when it holds (`>=`)."""
    return _REASON_SYMBOLS[op][0]


def compare_numbers(
    op: str, actual: float | int | Decimal, expected: float | int | Decimal
) -> tuple[bool, str]:
    """Compare two numbers with a numeric operator; return the result and its symbol.

    The symbol reads true either way: `<` when 143 < 200 holds, `not <` when it does not.
    """
    result = _COMPARE[op](actual, expected)
    yes, no = _REASON_SYMBOLS[op]
    return result, yes if result else no


def check_number(value: Any, path: str, scope: ConditionScope) -> tuple[bool, Any]:
    """Check that a condition's value is a number (or numeric text); return it as one."""
    number = as_number(value) if isinstance(value, str | int | float) else None
    if number is None:
        scope.error(f"{path}.value", f"must be a number, got {value!r}")
        return False, None
    return True, number


def number_value(condition: Condition) -> float | int:
    """Return a condition's value as a number; raise EngineError if it is none."""
    number = as_number(condition.value)
    if number is None:
        raise EngineError(f"{condition.type} needs a number, got {condition.value!r}")
    return number
