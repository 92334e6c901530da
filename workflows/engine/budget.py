"""A run's budget: limits on what its model calls spend, and the check made before each call.

A recipe may set `budget: {"max_tokens", "max_cost", "max_calls", "max_seconds"}` (each
optional, each a positive number): per run, the tokens of its model calls (input and output
together), their cost (the sum of what each call cost, in the actors' currency; a call of an
actor without prices costs nothing), how many calls were made, and the seconds since the run
started (wall time: a wait for reviewers counts). A call that would pass a limit is not made
(`check`): the step fails with the reason, and a branch of the step with a `budget` condition
takes the run on (`conditions/budget.py`).

Before a call, only its prompt is known: the check counts the prompt's tokens and their cost
as spent, and since the answer adds at least one token, a limit already reached is passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from workflows.engine.checks import is_int, is_number

# Costs are kept to 8 decimal places, as ModelCall and the run's totals store them.
COST_PLACES = Decimal("0.00000001")
# The bounds of the limits a budget accepts: beyond them a limit means nothing (a cost of
# a million in one run does not fit the stored totals; less than a second of wall time is
# used up before the first call).
MIN_COST_LIMIT = Decimal("0.00000001")
MAX_TOKENS_LIMIT = 10**15
MAX_CALLS_LIMIT = 10**9
MAX_COST_LIMIT = Decimal("999999")
MAX_SECONDS_LIMIT = 10**9
FIELDS: tuple[tuple[str, str], ...] = (
    ("max_tokens", "tokens of the run's model calls, input and output together"),
    ("max_cost", "the sum of the calls' costs, in the actors' currency"),
    ("max_calls", "model calls (answers, validation attempts, judges, evaluators, ...)"),
    ("max_seconds", "seconds since the run started (wall time, waits for reviewers included)"),
)
FIELD_NAMES: tuple[str, ...] = tuple(name for name, _ in FIELDS)


@dataclass(frozen=True, slots=True)
class Budget:
    """The limits of one run; None means no limit on that measure."""

    max_tokens: int | None = None
    max_cost: Decimal | None = None
    max_calls: int | None = None
    max_seconds: float | None = None

    @property
    def is_empty(self) -> bool:
        """Tell whether the budget limits nothing."""
        return all(getattr(self, name) is None for name in FIELD_NAMES)

    def as_json(self) -> dict[str, Any]:
        """Return the limits that are set, as a recipe document writes them."""
        doc: dict[str, Any] = {}
        for name in FIELD_NAMES:
            value = getattr(self, name)
            if value is not None:
                doc[name] = _json_number(value)
        return doc


@dataclass(frozen=True, slots=True)
class Spend:
    """What a run has spent: tokens (in and out), cost, model calls, seconds since it started."""

    tokens: int = 0
    cost: Decimal = Decimal(0)
    calls: int = 0
    seconds: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.tokens + other.tokens,
            self.cost + other.cost,
            self.calls + other.calls,
            self.seconds + other.seconds,
        )


ONE_CALL = Spend(calls=1)


def check(budget: Budget | None, spend: Spend, upcoming: Spend = ONE_CALL) -> str | None:
    """Return why a next call would pass a limit of `budget`, or None when it may be made.

    `spend` is what the run has spent so far; `upcoming` what the call adds before its
    answer is known (one call, its prompt's tokens and their cost). Tokens and cost pass
    their limit when they reach it with the call's answer still to come.
    """
    if budget is None:
        return None
    if budget.max_calls is not None and spend.calls + upcoming.calls > budget.max_calls:
        return (
            f"budget: max_calls {budget.max_calls} would be passed "
            f"({spend.calls} model call{'s' if spend.calls != 1 else ''} made)"
        )
    if budget.max_tokens is not None and spend.tokens + upcoming.tokens >= budget.max_tokens:
        return (
            f"budget: max_tokens {budget.max_tokens} would be passed ({spend.tokens} "
            f"spent, the next prompt about {upcoming.tokens})"
        )
    if budget.max_cost is not None and spend.cost + upcoming.cost >= budget.max_cost:
        return (
            f"budget: max_cost {format_cost(budget.max_cost)} would be passed "
            f"({format_cost(spend.cost)} spent, the next prompt about "
            f"{format_cost(upcoming.cost)})"
        )
    if budget.max_seconds is not None and spend.seconds >= budget.max_seconds:
        return (
            f"budget: max_seconds {_json_number(budget.max_seconds)} passed (the run "
            f"started {spend.seconds:.0f} s ago)"
        )
    return None


def format_cost(cost: Decimal) -> str:
    """Return a cost as a reason shows it: `0.0042`, `1.5`, `0`."""
    text = format(cost.quantize(COST_PLACES), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def as_cost(value: object) -> Decimal | None:
    """Return a number (not a boolean, not NaN or infinite) as a Decimal, or None.

    A float goes through its shortest text (`0.1` is 0.1, not 0.1000000000000000055...).
    """
    if not is_number(value) and not isinstance(value, Decimal):
        return None
    try:
        cost = Decimal(str(value))
    except InvalidOperation:
        return None
    return cost if cost.is_finite() else None


def parse_budget(value: object, error: Callable[[str, str], None]) -> Budget | None:
    """Read a recipe's `budget`; report each problem through `error(path, message)`.

    Return None when the recipe sets no limit (no budget, null, or an empty object).
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        error("budget", f"must be an object of limits, got {type(value).__name__}")
        return None
    limits: dict[str, Any] = {}
    for key, limit in value.items():
        path = f"budget.{key}"
        if key not in FIELD_NAMES:
            error(path, f"unknown limit; expected one of: {', '.join(FIELD_NAMES)}")
            continue
        if limit is None:
            continue
        parsed = _limit(str(key), limit)
        if isinstance(parsed, str):
            error(path, parsed)
        else:
            limits[str(key)] = parsed
    budget = Budget(**limits)
    return None if budget.is_empty else budget


def _limit(name: str, value: object) -> int | float | Decimal | str:
    """Return the limit `value` of field `name`, or the reason it is refused."""
    if name in ("max_tokens", "max_calls"):
        top = MAX_TOKENS_LIMIT if name == "max_tokens" else MAX_CALLS_LIMIT
        if not is_int(value) or not isinstance(value, int) or not 1 <= value <= top:
            return f"must be a whole number from 1 to {top}, got {value!r}"
        return value
    if name == "max_cost":
        cost = as_cost(value)
        if cost is None or not 0 < cost <= MAX_COST_LIMIT:
            return f"must be a number above 0 and at most {MAX_COST_LIMIT}, got {value!r}"
        if cost != cost.quantize(COST_PLACES):
            return f"has more than 8 decimal places, got {value!r}"
        return cost
    seconds = float(value) if is_number(value) and isinstance(value, int | float) else None
    if seconds is None or not 1 <= seconds <= MAX_SECONDS_LIMIT:
        return f"must be a number of seconds from 1 to {MAX_SECONDS_LIMIT}, got {value!r}"
    return seconds


def _json_number(value: int | float | Decimal) -> int | float:
    """Return a limit as JSON writes it: whole numbers without `.0`."""
    if isinstance(value, int):
        return value
    number = float(value)
    return int(number) if number.is_integer() else number
