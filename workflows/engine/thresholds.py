"""The threshold a judge branch would have agreed best with what happened after it.

A judge branch (`ai_evaluation` compared with `>`, `>=`, `<` or `<=` against a threshold) says
whether a response is good: with `>`/`>=` holding means good (the response passes), with
`<`/`<=` holding means bad (it goes to review, or is asked again). Each observation is one
run's latest judge score for that branch and the verdict that came later: the reviewer's
approve or reject on the same run after the step, else the run's success or failure. The
suggestion is the threshold under which the branch would have agreed with the most verdicts
(the nearest to the current one among equals); it is only advice: the author applies it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .conditions.numeric import holds
from .conditions.values import format_number

# Fewer runs with a verdict than this is too little evidence to suggest anything.
MIN_RUNS = 10
# Operator -> whether holding means the response is good (the aliases read as their names).
_GOOD_WHEN_HOLDS = {
    "greater_than": True,
    "greater_equal": True,
    "greater_than_or_equal": True,
    "less_than": False,
    "less_equal": False,
    "less_than_or_equal": False,
}
_CANONICAL = {"greater_than_or_equal": "greater_equal", "less_than_or_equal": "less_equal"}
# How the ai_evaluation condition starts its reason (`judge scored 7 >= 6`).
_SCORED = re.compile(r"^judge scored (-?\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Observation:
    """One run: the judge's score at the branch, and whether the response proved good."""

    score: float
    good: bool


@dataclass(frozen=True)
class ThresholdAdvice:
    """The evidence for one judge branch, and the threshold it suggests (None: keep it)."""

    operator: str
    current: float
    runs: int
    agree_current: int
    suggested: float | None = None
    agree_suggested: int = 0

    @property
    def current_text(self) -> str:
        return format_number(self.current)

    @property
    def suggested_text(self) -> str:
        return "" if self.suggested is None else format_number(self.suggested)

    @property
    def share_current(self) -> int:
        return round(100 * self.agree_current / self.runs) if self.runs else 0

    @property
    def share_suggested(self) -> int:
        return round(100 * self.agree_suggested / self.runs) if self.runs else 0


def is_judge_condition(condition: object) -> bool:
    """Whether a branch's condition is a judge score compared with a number."""
    return (
        isinstance(condition, dict)
        and condition.get("type") == "ai_evaluation"
        and condition.get("operator") in _GOOD_WHEN_HOLDS
        and isinstance(condition.get("value"), int | float)
        and not isinstance(condition.get("value"), bool)
    )


def score_from_reason(reason: str) -> float | None:
    """Return the score an ai_evaluation reason records, or None (no score was read)."""
    found = _SCORED.match(reason)
    return float(found.group(1)) if found else None


def agreement(observations: Sequence[Observation], operator: str, threshold: float) -> int:
    """Return how many observations the branch agrees with under `threshold`."""
    good_when_holds = _GOOD_WHEN_HOLDS[operator]
    op = _CANONICAL.get(operator, operator)
    return sum(
        1 for o in observations if (holds(op, o.score, threshold) == good_when_holds) == o.good
    )


def suggest_threshold(
    observations: Sequence[Observation],
    operator: str,
    current: float,
    *,
    min_runs: int = MIN_RUNS,
) -> ThresholdAdvice | None:
    """Return the advice for a judge branch, or None with fewer than `min_runs` observations.

    Agreement changes only at an observed score, so the candidates are the scores seen (and
    the current threshold). `suggested` is None when no candidate agrees with more runs than
    the current threshold does.
    """
    if operator not in _GOOD_WHEN_HOLDS:
        raise ValueError(f"not a comparison operator: {operator}")
    if len(observations) < min_runs:
        return None
    at_current = agreement(observations, operator, current)
    candidates = sorted({o.score for o in observations} | {current})
    best = max(
        candidates,
        key=lambda t: (agreement(observations, operator, t), -abs(t - current)),
    )
    at_best = agreement(observations, operator, best)
    advice = ThresholdAdvice(
        operator=operator, current=current, runs=len(observations), agree_current=at_current
    )
    if at_best <= at_current:
        return advice
    return ThresholdAdvice(
        operator=operator,
        current=current,
        runs=len(observations),
        agree_current=at_current,
        suggested=best,
        agree_suggested=at_best,
    )
