"""Read a branch's condition document (`when`) into a Condition, reporting errors at paths.

The generic part lives here (type, operator, nesting, limits); each condition type checks
its own value and fields (`ConditionType.check`) and prepares what evaluation needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.conditions.base import NOTHING, ConditionScope
from workflows.engine.conditions.logical import LOGICAL_TYPES, operands_problem
from workflows.engine.conditions.registry import ALL_TYPE_NAMES, combinator, condition_type
from workflows.engine.errors import EngineError
from workflows.engine.graph import Condition

# The keys of a condition document that are no type's field (the editor keeps the others).
CONDITION_KEYS = frozenset({"type", "operator", "conditions"})
MAX_NESTING = 32
# YAML aliases let a small file name one condition many times over: checking such a
# document condition by condition must not take exponential time.
MAX_CONDITIONS = 5000


class ConditionReader:
    """Read the conditions of one recipe, counting them against MAX_CONDITIONS."""

    def __init__(self) -> None:
        self.seen = 0

    def read(
        self, value: object, path: str, scope: ConditionScope, depth: int = 0
    ) -> Condition | None:
        """Return the condition `value` describes, or None after reporting why not."""
        self.seen += 1
        if self.seen > MAX_CONDITIONS:
            if self.seen == MAX_CONDITIONS + 1:
                scope.error(path, f"a recipe has at most {MAX_CONDITIONS} conditions")
            return None
        if depth > MAX_NESTING:
            scope.error(path, f"conditions are nested deeper than {MAX_NESTING} levels")
            return None
        if not isinstance(value, Mapping):
            got = "null" if value is None else type(value).__name__
            scope.error(path, f"must be an object, got {got}")
            return None
        name, op = value.get("type"), value.get("operator")
        if name is None:
            scope.error(
                f"{path}.type", f"is required; expected one of: {', '.join(ALL_TYPE_NAMES)}"
            )
            return None
        if not isinstance(name, str):
            scope.error(f"{path}.type", f"must be a string, got {type(name).__name__}")
            return None
        logical = combinator(name, op)
        if logical is not None:
            return self._combination(logical, value, path, scope, depth)
        return self._plain(name, value, path, scope)

    def _plain(
        self, name: str, doc: Mapping[str, Any], path: str, scope: ConditionScope
    ) -> Condition | None:
        kind = condition_type(name)
        if kind is None:
            scope.error(
                f"{path}.type",
                f"unknown condition type '{name}'; expected one of: {', '.join(ALL_TYPE_NAMES)}",
            )
            return None
        op = doc.get("operator")
        if op is None:
            if len(kind.operators) != 1:
                scope.error(
                    f"{path}.operator", f"is required; {name} takes: {kind.operators_listed()}"
                )
                return None
            op = kind.operators[0].name
        if not isinstance(op, str):
            scope.error(f"{path}.operator", f"must be a string, got {type(op).__name__}")
            return None
        canonical_op = kind.canonical_operator(op)
        if canonical_op not in kind.operator_names:
            scope.error(
                f"{path}.operator",
                f"unknown operator '{op}'; {name} takes: {kind.operators_listed()}",
            )
            return None
        # `check` takes the value on its own, and the type's other fields together.
        fields = {k: v for k, v in doc.items() if k not in CONDITION_KEYS and k != "value"}
        ok, value = kind.check(canonical_op, doc.get("value"), fields, path, scope)
        if not ok:
            return None
        condition = Condition(kind.name, canonical_op, value, fields)
        try:
            prepared = kind.prepare(condition)
        except EngineError as exc:  # checked above already; kept so bad input cannot crash
            scope.error(path, str(exc))
            return None
        return Condition(kind.name, canonical_op, value, fields, (), prepared)

    def _combination(
        self,
        logical: str,
        doc: Mapping[str, Any],
        path: str,
        scope: ConditionScope,
        depth: int,
    ) -> Condition | None:
        name, op = doc.get("type"), doc.get("operator")
        if name in LOGICAL_TYPES and op is not None and op != name:
            scope.error(f"{path}.operator", f"unknown operator {op!r} for {name}; leave it out")
            return None
        operands = doc.get("conditions")
        problem = operands_problem(logical, operands)
        if problem is not None or not isinstance(operands, list):
            scope.error(f"{path}.conditions", problem or "")
            return None
        parsed = [
            self.read(operand, f"{path}.conditions[{k}]", scope, depth + 1)
            for k, operand in enumerate(operands)
        ]
        subs = [c for c in parsed if c is not None]
        if len(subs) != len(parsed):
            return None
        return Condition(logical, logical, None, {}, tuple(subs), NOTHING)
