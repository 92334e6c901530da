"""Render a condition document as the short label the canvas and the lists show.

The rule is the catalog's (see `docs/recipe-format.md`): each type's summary template per
operator, `{name}` a field's value through its `display` map, `{name!raw}` the value as
written, `{symbol}` the operator's symbol; combinations as `a and b`, `a or b` (nested ones in parentheses), `not (a)`; cut to
40 characters. The editor's JavaScript implements the same rule over the same catalog.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from workflows.engine.conditions.base import ConditionType
from workflows.engine.conditions.logical import summarize
from workflows.engine.conditions.registry import combinator, condition_type

MAX_SUMMARY = 40
_PLACEHOLDER = re.compile(r"\{(\w+)(!raw)?\}")


def condition_summary(when: object) -> str:
    """Return a short readable label of a condition (`len < 200`, `judge ≥ 8`, `default`).

    Never fails: anything that is not a condition reads `?`.
    """
    text = _summary(when, nested=False)
    return text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"


def _summary(when: object, *, nested: bool) -> str:
    if not isinstance(when, Mapping):
        return "?"
    kind, op = when.get("type"), when.get("operator")
    logical = combinator(kind, op)
    if logical is not None:
        operands = when.get("conditions")
        parts = [_summary(c, nested=True) for c in operands] if isinstance(operands, list) else []
        return summarize(logical, parts, nested=nested)
    spec = condition_type(kind)
    if spec is None:
        return "?" if kind is None or kind == "" else value_text(kind)
    return _plain(spec, when, op if isinstance(op, str) else "")


def _plain(spec: ConditionType, when: Mapping[str, object], op: str) -> str:
    operator = spec.operator(op)
    name = operator.name if operator is not None else op
    template = spec.summary.get(name, spec.summary.get("*", ""))

    def fill(placeholder: re.Match[str]) -> str:
        key, raw = placeholder.group(1, 2)
        if key == "symbol":
            return operator.symbol if operator is not None else op
        field = spec.field(key)
        text = value_text(field.value_in(when) if field is not None else when.get(key))
        return field.display.get(text, text) if field is not None and not raw else text

    return _PLACEHOLDER.sub(fill, template)


def value_text(value: object) -> str:
    """Return a document value as summaries write it.

    Missing is "", JSON true/false are "true"/"false", `8.0` is `8`; a list's items are
    joined with `|` (as `approve|revise`), an object is compact JSON.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list | tuple):
        return "|".join(value_text(item) for item in value)
    if isinstance(value, Mapping):
        return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)
    return str(value)
