"""Find branches that earlier branches of the same step make unreachable (interval reasoning).

A step's active branches are tried in priority order and the first that matches is taken. When
branches compare the same value, the values each one matches form a union of intervals:
- one judge's score: `ai_evaluation` with the same evaluator and prompt (asked once per step
  result, so every such branch reads the same score);
- the response's length: `length_check` in the same unit.
A branch whose values all lie in what earlier branches match is never taken; once earlier
branches match every value, no later branch is taken (a judge that answers with no number is
the one way past them: the warning says so).

Only conditions made of comparisons of one value (combined with and / or / not) are read. An
earlier branch that can match and still be passed over (a repeat bounded by max_retries) covers
nothing: evaluation goes on past it once its retries are used up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from workflows.engine.actions import is_bounded
from workflows.engine.conditions.ai_evaluation import DEFAULT_EVALUATION_PROMPT, EVALUATOR, PROMPT
from workflows.engine.conditions.values import as_number
from workflows.engine.graph import BranchSpec, Condition, StepSpec

INF = math.inf


@dataclass(frozen=True, slots=True)
class Interval:
    """A run of numbers; an infinite end is always open."""

    lo: float
    lo_closed: bool
    hi: float
    hi_closed: bool


@dataclass(frozen=True, slots=True)
class Values:
    """The values a condition matches: intervals, and whether it matches when there is none
    (a judge that gave no number: every comparison is false, so `not` of one is true)."""

    intervals: tuple[Interval, ...]
    missing: bool = False


@dataclass(frozen=True, slots=True)
class Measure:
    """A value branches compare: its identity, how warnings name it, what it can be."""

    key: tuple[str, ...]
    label: str
    integers: bool  # lengths are whole numbers: `< 200` and `> 199` leave no gap
    minimum: float  # the least value (lengths are never negative)
    can_be_missing: bool


def _length(condition: Condition) -> Measure:
    words = condition.fields.get("unit") == "words"
    label = "response length in words" if words else "response length"
    return Measure(("length", "words" if words else "chars"), label, True, 0, False)


def _judge(condition: Condition) -> Measure:
    evaluator = str(EVALUATOR.value_in(condition.fields) or "")
    prompt = str(PROMPT.value_in(condition.fields) or DEFAULT_EVALUATION_PROMPT)
    name = f"judge '{evaluator}'" if evaluator else "the step's judge"
    return Measure(("judge", evaluator, prompt), f"score of {name}", False, -INF, True)


# The condition types whose value is compared with a number, and what that value is.
MEASURES: dict[str, Callable[[Condition], Measure]] = {
    "length_check": _length,
    "ai_evaluation": _judge,
}


def _compared(operator: str, n: float) -> tuple[Interval, ...] | None:
    """Return the values `value OPERATOR n` matches; None for an operator not known here (a
    branch read as matching nothing would be warned about wrongly)."""
    below, above = Interval(-INF, False, n, False), Interval(n, False, INF, False)
    return {
        "less_than": (below,),
        "less_equal": (Interval(-INF, False, n, True),),
        "greater_than": (above,),
        "greater_equal": (Interval(n, True, INF, False),),
        "equals": (Interval(n, True, n, True),),
        "not_equals": (below, above),
    }.get(operator)


def _is_empty(i: Interval) -> bool:
    return i.lo > i.hi or (i.lo == i.hi and not (i.lo_closed and i.hi_closed))


def _union(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> tuple[Interval, ...]:
    runs = sorted((i for i in a + b if not _is_empty(i)), key=lambda i: (i.lo, not i.lo_closed))
    merged: list[Interval] = []
    for i in runs:
        last = merged[-1] if merged else None
        if last is not None and (
            i.lo < last.hi or (i.lo == last.hi and (last.hi_closed or i.lo_closed))
        ):
            if (i.hi, i.hi_closed) > (last.hi, last.hi_closed):
                merged[-1] = Interval(last.lo, last.lo_closed, i.hi, i.hi_closed)
        else:
            merged.append(i)
    return tuple(merged)


def _complement(a: tuple[Interval, ...]) -> tuple[Interval, ...]:
    gaps: list[Interval] = []
    lo, lo_closed = -INF, False
    for i in _union(a, ()):
        gaps.append(Interval(lo, lo_closed, i.lo, not i.lo_closed))
        lo, lo_closed = i.hi, not i.hi_closed
    gaps.append(Interval(lo, lo_closed, INF, False))
    return tuple(g for g in gaps if not _is_empty(g))


def _intersection(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> tuple[Interval, ...]:
    return _complement(_union(_complement(a), _complement(b)))


def _values(condition: Condition) -> tuple[Measure, Values] | None:
    """Return the value `condition` compares and the values it matches, or None when it is
    not made of comparisons of one value."""
    if condition.type in ("and", "or"):
        parts = [_values(c) for c in condition.conditions]
        if not parts or any(p is None for p in parts):
            return None
        measures = {p[0] for p in parts if p is not None}
        if len(measures) != 1:
            return None
        result = parts[0][1] if parts[0] is not None else None
        for part in parts[1:]:
            assert part is not None and result is not None
            if condition.type == "or":
                result = Values(
                    _union(result.intervals, part[1].intervals), result.missing or part[1].missing
                )
            else:
                result = Values(
                    _intersection(result.intervals, part[1].intervals),
                    result.missing and part[1].missing,
                )
        assert result is not None
        return measures.pop(), result
    if condition.type == "not":
        inner = _values(condition.conditions[0]) if len(condition.conditions) == 1 else None
        if inner is None:
            return None
        measure, values = inner
        return measure, Values(_complement(values.intervals), not values.missing)
    measure_of = MEASURES.get(condition.type)
    number = as_number(condition.value)
    if measure_of is None or number is None or isinstance(condition.value, list | tuple | dict):
        return None
    matched = _compared(condition.operator, number)
    return None if matched is None else (measure_of(condition), Values(matched))


def _has_value(measure: Measure, intervals: tuple[Interval, ...]) -> bool:
    """Tell whether `intervals` hold a value the measure can take."""
    for i in intervals:
        lo, hi = max(i.lo, measure.minimum), i.hi
        lo_closed = i.lo_closed if i.lo >= measure.minimum else True
        if measure.integers:
            first = math.ceil(lo) if lo_closed or lo != math.floor(lo) else lo + 1
            if hi == INF or first < hi or (first == hi and i.hi_closed):
                return True
        elif not _is_empty(Interval(lo, lo_closed, hi, i.hi_closed)):
            return True
    return False


@dataclass
class _Covered:
    """What the earlier branches on one measure match, and which branches they are."""

    values: Values
    branches: list[BranchSpec]


def _names(branches: list[BranchSpec]) -> str:
    named = [f"'{b.name}' (priority {b.priority})" for b in branches]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def shadowed_branches(step: StepSpec, branch_path: Callable[[BranchSpec], str]) -> list[str]:
    """Return a warning, as `path: message`, for each active branch of `step` that the
    branches before it leave no value to match."""
    warnings: list[str] = []
    covered: dict[Measure, _Covered] = {}
    for branch in step.active_branches:
        read = _values(branch.when)
        warning = _shadow_warning(read, covered)
        if warning is not None:
            warnings.append(f"{branch_path(branch)}: {warning}")
        if branch.when.type == "default" and not is_bounded(branch):
            break  # what follows is warned about as shadowed by the default
        if read is None or is_bounded(branch):
            continue  # it may be passed over though it matches: it covers nothing
        measure, values = read
        before = covered.get(measure)
        if before is None:
            covered[measure] = _Covered(values, [branch])
        else:
            before.values = Values(
                _union(before.values.intervals, values.intervals),
                before.values.missing or values.missing,
            )
            before.branches.append(branch)
    return warnings


def _shadow_warning(
    read: tuple[Measure, Values] | None, covered: dict[Measure, _Covered]
) -> str | None:
    for measure, earlier in covered.items():
        if _has_value(measure, _complement(earlier.values.intervals)):
            continue
        if not measure.can_be_missing or earlier.values.missing:
            return f"never taken: {_names(earlier.branches)} before it match every {measure.label}"
        if read is None or read[0] != measure or read[1].missing:
            return (
                f"taken only when the {measure.label} is missing (no number in its answer): "
                f"{_names(earlier.branches)} before it match every score"
            )
    if read is None or read[0] not in covered:
        return None
    measure, values = read
    earlier = covered[measure]
    left = _intersection(values.intervals, _complement(earlier.values.intervals))
    if _has_value(measure, left) or (
        measure.can_be_missing and values.missing and not earlier.values.missing
    ):
        return None
    overlapping = [
        b
        for b in earlier.branches
        if (own := _values(b.when)) is not None
        and _has_value(measure, _intersection(values.intervals, own[1].intervals))
    ]
    return (
        f"never taken: every {measure.label} it matches is matched first by "
        f"{_names(overlapping or earlier.branches)}"
    )
