"""Suggested thresholds for a recipe's judge branches, from the runs' later verdicts.

For each judge branch (`workflows.engine.thresholds`), every real run (dry runs and tests are
scripted: left out) that evaluated it gives its latest score there and the verdict after it:
the first reviewer's approve (good) or reject (bad) on the same run after that step, else the
run's status, succeeded (good) or failed (bad). Runs with neither (ended, cancelled, still
going) give no verdict. Only runs the user may see count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from workflows.engine import thresholds
from workflows.engine.thresholds import Observation, ThresholdAdvice
from workflows.models import Recipe

from .models import BranchEvaluation, HumanTask, Run
from .selectors import runs_visible_to
from .status import RunStatus, TaskStatus

# The latest runs read per branch: enough evidence, a bounded query.
MAX_RUNS = 500
GOOD_DECISIONS = {"approve": True, "reject": False}
OUTCOMES = {RunStatus.SUCCEEDED: True, RunStatus.FAILED: False}


@dataclass(frozen=True)
class BranchAdvice:
    """A judge branch of the recipe, and what its runs suggest (None: too few runs)."""

    step_index: int
    branch_index: int
    step: str
    branch: str
    advice: ThresholdAdvice | None


def judge_branches(document: dict[str, Any]) -> list[tuple[int, int, str, dict[str, Any]]]:
    """Return (step index, branch index, step key, branch) for each judge branch of `document`."""
    found = []
    for s, step in enumerate(document.get("steps") or []):
        if not isinstance(step, dict):
            continue
        for b, branch in enumerate(step.get("branches") or []):
            if isinstance(branch, dict) and thresholds.is_judge_condition(branch.get("when")):
                found.append((s, b, str(step.get("key", "")), branch))
    return found


def observations(
    *, user: AbstractBaseUser | AnonymousUser, recipe: Recipe, step: str, branch: str
) -> list[Observation]:
    """Return one observation per visible real run with a score at the branch and a verdict."""
    runs = runs_visible_to(user).filter(recipe=recipe, script__isnull=True)
    rows = (
        BranchEvaluation.objects.filter(
            step_run__run__in=runs.values("pk"), step_run__step_key=step, branch=branch
        )
        .order_by("-step_run__run_id", "-step_run__seq")
        .values_list("step_run__run_id", "step_run__seq", "reason")
    )
    latest: dict[int, tuple[int, float]] = {}
    for run_id, seq, reason in rows.iterator():
        if run_id in latest:
            continue
        score = thresholds.score_from_reason(reason)
        if score is not None:
            latest[run_id] = (seq, score)
            if len(latest) >= MAX_RUNS:
                break
    if not latest:
        return []
    decisions: dict[int, list[tuple[int, str]]] = {}
    tasks = HumanTask.objects.filter(
        run_id__in=latest, status=TaskStatus.DECIDED, decision__in=GOOD_DECISIONS
    ).values_list("run_id", "step_run__seq", "decision")
    for run_id, seq, decision in tasks:
        decisions.setdefault(run_id, []).append((seq, decision))
    statuses = dict(Run.objects.filter(pk__in=latest).values_list("pk", "status"))
    found = []
    for run_id, (seq, score) in sorted(latest.items()):
        later = sorted(d for d in decisions.get(run_id, []) if d[0] > seq)
        if later:
            good: bool | None = GOOD_DECISIONS[later[0][1]]
        else:
            good = OUTCOMES.get(statuses.get(run_id, ""))
        if good is not None:
            found.append(Observation(score=score, good=good))
    return found


def branch_advice(
    *, user: AbstractBaseUser | AnonymousUser, recipe: Recipe, document: dict[str, Any]
) -> list[BranchAdvice]:
    """Return the advice for every judge branch of `document` (a draft of `recipe`)."""
    return [
        BranchAdvice(s, b, key, str(branch.get("name", "")), advice_for(user, recipe, key, branch))
        for s, b, key, branch in judge_branches(document)
    ]


def advice_for(
    user: AbstractBaseUser | AnonymousUser, recipe: Recipe, step: str, branch: dict[str, Any]
) -> ThresholdAdvice | None:
    """Return the advice for one judge branch of step `step`, None with too few runs."""
    condition = branch["when"]
    seen = observations(user=user, recipe=recipe, step=step, branch=str(branch.get("name", "")))
    return thresholds.suggest_threshold(seen, condition["operator"], float(condition["value"]))
