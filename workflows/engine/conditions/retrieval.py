"""`retrieval`: how many hits the step's search found, or the best one's score, compares true."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType
from workflows.engine.conditions.context import EvalContext
from workflows.engine.conditions.hits import lint_for
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

MEASURES: tuple[str, ...] = ("hits", "top_score")
NO_SEARCH = "step searched no sources"


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the measure, and the value: a count of hits, or a score from 0 to 1."""
    measure = fields.get("measure", "hits")
    if measure not in MEASURES:
        scope.error(f"{path}.measure", f"unknown measure {measure!r}; expected hits or top_score")
        return False, None
    valid, number = check_number(value, path, scope)
    if not valid:
        return False, None
    if measure == "top_score" and not 0 <= number <= 1:
        scope.error(f"{path}.value", f"a top score is from 0 to 1, got {value!r}")
        return False, None
    if measure == "hits" and number < 0:
        scope.error(f"{path}.value", f"a number of hits is at least 0, got {value!r}")
        return False, None
    return True, number


def prepare(condition: Condition) -> object:
    """Return the limit and whether it is compared with the top score."""
    return number_value(condition), condition.fields.get("measure") == "top_score"


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Compare the number of hits, or the best hit's score (0 when there are none)."""
    limit, top_score = prepared
    hits = ctx.found()
    if hits is None:
        return False, NO_SEARCH
    if top_score:
        best = max((hit.score for hit in hits), default=0.0)
        result, symbol = compare_numbers(condition.operator, best, limit)
        none = " (no hits)" if not hits else ""
        return result, f"top score {_score(best)}{none} {symbol} {format_number(limit)}"
    result, symbol = compare_numbers(condition.operator, len(hits), limit)
    noun = "hit" if len(hits) == 1 else "hits"
    return result, f"{len(hits)} {noun} {symbol} {format_number(limit)}"


def _score(score: float) -> str:
    return format_number(round(score, 3))


CONDITION_TYPE = ConditionType(
    name="retrieval",
    label="Sources found (retrieval)",
    help=(
        "The number of hits the step's sources found (`measure` hits), or the best hit's "
        "score from 0 to 1 (`top_score`; 0 without hits), compares true. A step that "
        "searched none reads the run's latest hits."
    ),
    operators=NUMERIC_OPERATORS,
    operator_aliases=NUMERIC_OPERATOR_ALIASES,
    fields=(
        FieldSpec(
            "measure",
            "Measure",
            "choice",
            choices=MEASURES,
            default="hits",
            display={"": "hits", "hits": "hits", "top_score": "top score"},
        ),
        FieldSpec("value", "Value", "number", required=True),
    ),
    summary={"*": "{measure} {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint_for("retrieval"),
)
