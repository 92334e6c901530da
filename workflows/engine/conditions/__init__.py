"""Branch conditions: one module per condition type, listed in `registry.py`.

This module evaluates a parsed condition against one step result, with the reason it holds
or not; `reader.py` parses condition documents, `summary.py` labels them for people.
"""

from __future__ import annotations

from workflows.engine.conditions.base import NOTHING, Evaluate
from workflows.engine.conditions.context import EvalContext, Judge
from workflows.engine.conditions.logical import LOGICAL_TYPES, combine
from workflows.engine.conditions.registry import TYPES, condition_type
from workflows.engine.errors import EngineError
from workflows.engine.graph import Condition

__all__ = [
    "EvalContext",
    "Judge",
    "asks_about_budget",
    "asks_about_classification",
    "asks_about_failure",
    "evaluate_condition",
    "prepare",
]


def prepare(condition: Condition) -> object:
    """Precompute what evaluating `condition` needs (a compiled regex, a number, a path)."""
    kind = condition_type(condition.type)
    return NOTHING if kind is None else kind.prepare(condition)


def evaluate_condition(condition: Condition, ctx: EvalContext) -> tuple[bool, str]:
    """Return whether `condition` holds for the step result in `ctx`, and why."""
    evaluate = _EVALUATE.get(condition.type)
    if evaluate is None:
        if condition.type in LOGICAL_TYPES:
            return combine(condition.type, condition.conditions, evaluate_condition, ctx)
        raise EngineError(f"unknown condition type '{condition.type}'")
    prepared = condition.prepared if condition.prepared is not None else prepare(condition)
    return evaluate(condition, prepared, ctx)


def asks_about_failure(condition: Condition) -> bool:
    """Tell whether `condition` (or an operand, at any depth) asks whether the step failed."""
    return _asks(condition, "asks_about_failure")


def asks_about_budget(condition: Condition) -> bool:
    """Tell whether `condition` (or an operand, at any depth) reads the run's budget."""
    return _asks(condition, "asks_about_budget")


def asks_about_classification(condition: Condition) -> bool:
    """Tell whether `condition` (or an operand, at any depth) reads whether the classifier
    failed."""
    return _asks(condition, "asks_about_classification")


def _asks(condition: Condition, flag: str) -> bool:
    kind = condition_type(condition.type)
    if kind is not None and getattr(kind, flag):
        return True
    return any(_asks(sub, flag) for sub in condition.conditions)


# Every branch is evaluated after every step: one lookup by type name (aliases included)
# finds what evaluates it.
_EVALUATE: dict[str, Evaluate] = {
    name: kind.evaluate for kind in TYPES for name in (kind.name, *kind.aliases)
}
