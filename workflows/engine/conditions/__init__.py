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

# The reason of a condition that reads the answer of a failed step, before the failure's.
NOT_APPLICABLE = "not applicable: the step failed"

__all__ = [
    "NOT_APPLICABLE",
    "EvalContext",
    "Judge",
    "asks_about_budget",
    "asks_about_classification",
    "asks_about_failure",
    "evaluate_condition",
    "prepare",
    "reads_answer",
]


def prepare(condition: Condition) -> object:
    """Precompute what evaluating `condition` needs (a compiled regex, a number, a path)."""
    kind = condition_type(condition.type)
    return NOTHING if kind is None else kind.prepare(condition)


def evaluate_condition(condition: Condition, ctx: EvalContext) -> tuple[bool, str]:
    """Return whether `condition` holds for the step result in `ctx`, and why.

    On a failed step a condition that reads the answer (`ConditionType.reads_answer`) is
    not applicable: it does not hold, and says so, so that evaluation goes on to the
    branches that handle the failure. Combinations treat it as unknown (`logical.combine`).
    """
    holds, reason = _evaluate(condition, ctx)
    return holds is True, reason


def _evaluate(condition: Condition, ctx: EvalContext) -> tuple[bool | None, str]:
    """Return whether `condition` holds, or None when it is not applicable, and why."""
    evaluate = _EVALUATE.get(condition.type)
    if evaluate is None:
        if condition.type in LOGICAL_TYPES:
            return combine(condition.type, condition.conditions, _evaluate, ctx)
        raise EngineError(f"unknown condition type '{condition.type}'")
    failure = ctx.failure()
    if failure is not None and condition.type in _READS_ANSWER:
        return None, f"{NOT_APPLICABLE}: {failure}"
    prepared = condition.prepared if condition.prepared is not None else prepare(condition)
    return evaluate(condition, prepared, ctx)


def asks_about_failure(condition: Condition) -> bool:
    """Tell whether `condition` (or an operand, at any depth) asks whether the step failed."""
    return _asks(condition, "asks_about_failure")


def reads_answer(condition: Condition) -> bool:
    """Tell whether `condition` (or an operand, at any depth) reads the step's answer."""
    return _asks(condition, "reads_answer")


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
# The type names (aliases included) of the conditions not applicable on a failed step.
_READS_ANSWER: frozenset[str] = frozenset(
    name for kind in TYPES if kind.reads_answer for name in (kind.name, *kind.aliases)
)
