"""`http_status`: the status an http step's request was answered with is (or is not) a value.

The value is one status (`404`), a class (`"2xx"`, `"5xx"`) or a range (`"500-504"`). A step
the server answered with an error status fails: a branch with this condition handles it.
A step that got no answer (refused, timed out, unreachable) has no status: false either way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from workflows.engine.conditions.base import ConditionScope, ConditionType, ConditionUse, Operator
from workflows.engine.conditions.context import EvalContext
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Condition, StepSpec

_CLASS = re.compile(r"([1-5])xx", re.IGNORECASE)
_RANGE = re.compile(r"([1-5][0-9]{2})\s*-\s*([1-5][0-9]{2})")
_SHAPES = 'a status (404), a class ("2xx", "4xx") or a range ("500-504")'


def status_range(value: object) -> tuple[int, int] | None:
    """Return the (lowest, highest) statuses `value` stands for, or None if it names none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value, value) if 100 <= value <= 599 else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isdigit():
        return status_range(int(text))
    found = _CLASS.fullmatch(text)
    if found:
        first = int(found.group(1)) * 100
        return first, first + 99
    found = _RANGE.fullmatch(text)
    if found:
        low, high = int(found.group(1)), int(found.group(2))
        return (low, high) if low <= high <= 599 else None
    return None


def check(
    op: str, value: Any, fields: Mapping[str, Any], path: str, scope: ConditionScope
) -> tuple[bool, Any]:
    """Check the value is a status, a class or a range."""
    if status_range(value) is None:
        scope.error(f"{path}.value", f"must be {_SHAPES}, got {value!r}")
        return False, None
    return True, value


def prepare(condition: Condition) -> object:
    """Return the range of statuses the value stands for."""
    return status_range(condition.value)


def evaluate(condition: Condition, prepared: Any, ctx: EvalContext) -> tuple[bool, str]:
    """Tell whether the response's status is in the value's range (`is`) or out of it."""
    if ctx.http_status is None:
        return False, "no HTTP status: the step got no response" + (
            f" ({ctx.error})" if ctx.error else ""
        )
    bounds = prepared if prepared is not None else status_range(condition.value)
    if bounds is None:  # a hand-built condition; parsed ones were checked
        return False, f"{condition.value!r} is not a status, a class or a range"
    low, high = bounds
    inside = low <= ctx.http_status <= high
    holds = inside if condition.operator == "is" else not inside
    return holds, f"status {ctx.http_status} {'is' if inside else 'is not'} {condition.value}"


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about a status asked of a step that sends no HTTP request: it is never true."""
    if step.kind == "http":
        return []
    return [
        f"{use.path}: http_status is never true here: step '{step.key}' is {step.kind}, "
        "not an http step"
        for use in uses
    ]


CONDITION_TYPE = ConditionType(
    name="http_status",
    label="HTTP status",
    help=(
        "The status of the http step's response is (or is not) the value: a status (404), "
        'a class ("2xx", "5xx") or a range ("500-504"). False when no response came.'
    ),
    operators=(Operator("is", "is", "="), Operator("is_not", "is not", "≠")),
    operator_aliases={"equals": "is", "not_equals": "is_not", "in": "is", "not_in": "is_not"},
    fields=(
        FieldSpec(
            "value",
            "Status",
            "text",
            required=True,
            help=f"{_SHAPES[0].upper()}{_SHAPES[1:]}.",
        ),
    ),
    summary={"*": "HTTP {symbol} {value}"},
    check=check,
    prepare=prepare,
    evaluate=evaluate,
    lint=lint,
    asks_about_failure=True,
)
