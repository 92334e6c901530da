"""What every condition type's tests share: one evaluation case, and the operators it covers."""

from __future__ import annotations

from typing import Any

from tests.engine.builders import condition
from workflows.engine import EvalContext, evaluate_condition
from workflows.engine.conditions.base import ConditionType

TEXT = "The quick brown fox jumps over the lazy dog"
FACTS = {"image_count": 3, "doc": {"pages": 12}, "status": "done", "tags": ["a", "b"]}

# (when, text, context fields, matched, reason)
Case = tuple[dict[str, Any], str, dict[str, Any], bool, str]
CASE_FIELDS = ("when", "text", "context", "matched", "reason")


def evaluated(when: dict[str, Any], text: str, context: dict[str, Any]) -> tuple[bool, str]:
    """Parse `when` as a recipe's branch condition and evaluate it against one step result."""
    return evaluate_condition(condition(when), EvalContext(text=text, **context))


def pattern(op: str, value: str, **fields: Any) -> dict[str, Any]:
    return {"type": "pattern_match", "operator": op, "value": value, **fields}


def length(op: str, value: object, **fields: Any) -> dict[str, Any]:
    return {"type": "length_check", "operator": op, "value": value, **fields}


def uncovered(kind: ConditionType, cases: list[Case]) -> list[str]:
    """Return what no case of `kind` covers: `op: true` / `op: false` for each operator that
    no case shows holding / not holding, `op` for an operator alias that no case uses.

    A case without an operator uses the type's only one.
    """
    only = kind.operators[0].name if len(kind.operators) == 1 else None
    used = {(when.get("operator") or only, matched) for when, _, _, matched, _ in cases}
    # A case written with an alias covers the operator it stands for, too.
    seen = {(kind.canonical_operator(op), matched) for op, matched in used if op is not None}
    missing = [
        f"{op}: {'true' if outcome else 'false'}"
        for op in kind.operator_names
        for outcome in (True, False)
        if (op, outcome) not in seen
    ]
    spelled = {op for op, _ in used}
    return missing + [alias for alias in kind.operator_aliases if alias not in spelled]
