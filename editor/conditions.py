"""Read branch conditions for people: short summaries and edge labels.

`static/editor/recipe-graph.js` draws the same summaries on the canvas; the two are kept in step
by `tests/editor/test_conditions.py` and the browser tests.
"""

from __future__ import annotations

from typing import Any

from workflows.engine.vocabulary import (
    ACTION_ALIASES,
    CONDITION_OPERATORS,
    CONDITION_TYPE_ALIASES,
    LOGICAL_TYPES,
    NUMERIC_OPERATOR_ALIASES,
)

SYMBOLS = {
    "less_than": "<",
    "less_equal": "≤",
    "greater_than": ">",
    "greater_equal": "≥",
    "equals": "=",
    "not_equals": "≠",
}
MAX_SUMMARY = 40
_PLAIN_TYPES = {*CONDITION_OPERATORS, *CONDITION_TYPE_ALIASES}


def logical_type(when: dict[str, Any]) -> str | None:
    """Return `and` / `or` / `not` when the condition combines others, else None.

    Both spellings of DESIGN.md §3 count: `{"type": "and"}` and a named type with
    `"operator": "and"`.
    """
    kind, op = when.get("type"), when.get("operator")
    if kind in LOGICAL_TYPES:
        return str(kind)
    if op in LOGICAL_TYPES and kind not in _PLAIN_TYPES:
        return str(op)
    return None


def _shorten(text: str, limit: int = MAX_SUMMARY) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _summary(when: Any, depth: int = 0) -> str:
    if not isinstance(when, dict):
        return "?"
    logical = logical_type(when)
    if logical is not None:
        parts = [_summary(c, depth + 1) for c in when.get("conditions") or []]
        if logical == "not":
            return f"not ({parts[0]})" if parts else "not ()"
        inner = f" {logical} ".join(parts)
        return f"({inner})" if depth else inner
    kind = CONDITION_TYPE_ALIASES.get(when.get("type", ""), when.get("type", ""))
    op = when.get("operator") or ""
    op = NUMERIC_OPERATOR_ALIASES.get(op, op)
    value = when.get("value")
    symbol = SYMBOLS.get(op, op)
    if kind == "pattern_match":
        flags = when.get("flags") or ""
        text = "" if value is None else str(value)
        return {
            "regex_match": f"/{text}/{flags}",
            "regex_not_match": f"not /{text}/{flags}",
            "contains": f'has "{text}"',
            "not_contains": f'lacks "{text}"',
            "equals": f'= "{text}"',
        }.get(op, f"/{text}/")
    if kind == "length_check":
        unit = " words" if when.get("unit") == "words" else ""
        return f"len {symbol} {_number(value)}{unit}"
    if kind == "ai_evaluation":
        return f"{when.get('evaluator') or 'judge'} {symbol} {_number(value)}"
    if kind == "field_compare":
        return f"{when.get('field') or '?'} {symbol} {_number(value)}"
    if kind == "human_decision":
        return f"human: {value}"
    if kind == "execution_timeout":
        return "timeout" if value in (None, True, "true") else "no timeout"
    if kind == "execution_error":
        if op == "contains":
            return f'error has "{value}"'
        return "error" if value in (None, True, "true") else "no error"
    if kind == "content_type":
        return f"is {value}" if op != "is_not" else f"is not {value}"
    if kind == "route_selected":
        return f"route: {value}"
    if kind == "default":
        return "default"
    return str(kind or "?")


def condition_summary(when: Any) -> str:
    """Return a short readable summary of a condition (`len < 200`, `judge ≥ 8`, `default`)."""
    return _shorten(_summary(when))


def canonical_action(action: str) -> str:
    """Return the canonical name of an action (aliases resolved)."""
    name = (action or "").strip().upper()
    return ACTION_ALIASES.get(name, name)
