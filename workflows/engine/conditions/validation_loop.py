"""What the validation-loop conditions share: how they read the loop, and their lint rule.

`confidence`, `validation_passed`, `fallback_used` and `attempts` read how the step's
validation loop ended (`EvalContext.validation`); on a step that ran no loop none holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from workflows.engine.conditions.base import ConditionUse
from workflows.engine.conditions.values import format_number
from workflows.engine.graph import StepSpec
from workflows.engine.self_check import ValidationSummary

NO_LOOP = "the step ran no validation loop"


def shown(confidence: float) -> str:
    """Return a confidence as a reason shows it (4 decimals at most: 0.62, not 0.6200000001)."""
    return format_number(round(confidence, 4))


def verdict(loop: ValidationSummary) -> str:
    """Return how the loop ended, for a reason: its confidence against its threshold."""
    symbol = ">=" if loop.passed else "<"
    tries = f"{loop.attempts} attempt{'s' if loop.attempts != 1 else ''}"
    return f"confidence {shown(loop.confidence)} {symbol} {shown(loop.threshold)} after {tries}"


def lint(step: StepSpec, uses: Sequence[ConditionUse], step_path: str) -> list[str]:
    """Warn about a condition on the loop of a step that has none: it never holds."""
    if step.validation is not None:
        return []
    return [
        f"{use.path}: never holds: the step has no validation loop (set its validation)"
        for use in uses
    ]
