"""Error severities: how a failed step failed, and what a branch on it sends back.

The reference design (seed 004) sorts a failure into four severities; here a failed step has
exactly one, found in one place (`severity_of`):

- RETRIABLE: a transient failure (a timeout, a connection error, a provider's 429 or 5xx
  after its own retries): trying again may help.
- RECLASSIFICATION: the classifier chose wrongly, or gave no readable answer: a branch on it
  runs a classify step again, with the failure in the classifier's question.
- REPLANNING: the approach was wrong: a branch on it goes back to an earlier (planning)
  step, with the failure as that step's `{feedback}`.
- CRITICAL: anything else; nothing but an error branch (or failing the run) helps.

A step says which of them its own failures are (`failure_severity`, default CRITICAL); a
transient failure is RETRIABLE and a classifier's unreadable answer RECLASSIFICATION
whatever the step says. The runs a branch sends back are bounded per run: a classify step
is asked again at most its `max_reclassify` times, a replanning branch taken at most its
`max_retries` times; once used up the branch is logged as matched but not taken.
"""

from __future__ import annotations

from dataclasses import replace

from workflows.engine.actions import RUNS_A_STEP, Move, retry_limit
from workflows.engine.answers import shorten
from workflows.engine.decisions import StepResult
from workflows.engine.graph import BranchSpec, Condition, RecipeGraph, StepSpec
from workflows.engine.state import RunState

RETRIABLE = "RETRIABLE"
CRITICAL = "CRITICAL"
RECLASSIFICATION = "RECLASSIFICATION"
REPLANNING = "REPLANNING"
SEVERITIES: tuple[str, ...] = (RETRIABLE, CRITICAL, RECLASSIFICATION, REPLANNING)
# The condition type that reads a failed step's severity (by name: conditions import this).
CONDITION = "error_severity"
CLASSIFY = "classify"  # the step kind a reclassification runs again, by name
_FEEDBACK_LIMIT = 500  # the error text sent back: enough to act on, not a whole answer


def severity_problem(value: object) -> str | None:
    """Return why `value` is not a severity, or None when it is one."""
    if value in SEVERITIES:
        return None
    return f"must be one of {', '.join(SEVERITIES)}, got {value!r}"


def severity_of(step: StepSpec, result: StepResult) -> str | None:
    """Return the severity of the step's failure, or None when it did not fail."""
    if result.error is None and not result.timed_out:
        return None
    if result.transient:
        return RETRIABLE
    if result.classification_failure:
        return RECLASSIFICATION
    return step.failure_severity or CRITICAL


def failure_feedback(step_key: str, error: str | None) -> str:
    """Return what a branch sends back of a failure: the step and its error."""
    return f"step '{step_key}' failed: {shorten(error or 'timed out', _FEEDBACK_LIMIT)}"


def names_severity(condition: Condition) -> bool:
    """Tell whether `condition` (or an operand, at any depth) reads the error severity."""
    return condition.type == CONDITION or any(names_severity(c) for c in condition.conditions)


def sends_back(graph: RecipeGraph, branch: BranchSpec, severity: str | None) -> str | None:
    """Return RECLASSIFICATION or REPLANNING when taking `branch` on a failure of `severity`
    sends the failure back to the step it targets; None when it does not."""
    if severity not in (RECLASSIFICATION, REPLANNING) or not graph.has_step(branch.target):
        return None
    return severity if names_severity(branch.when) else None


def rerun_refusal(
    graph: RecipeGraph, state: RunState, step: StepSpec, branch: BranchSpec, severity: str | None
) -> str | None:
    """Return why `branch` may not send the failure back again (its bound is used up in
    this run), or None when it may (or sends nothing back)."""
    kind = sends_back(graph, branch, severity)
    if kind == RECLASSIFICATION:
        target = graph.step(branch.target)
        used = state.reclassified.get(target.key, 0)
        if used >= target.max_reclassify:
            limit = target.max_reclassify
            return f"reclassified {_times(used)} already (max_reclassify {limit})"
    elif kind == REPLANNING:
        limit, used = retry_limit(branch), state.replans_used(step.key, branch.name)
        if used >= limit:
            return f"replanned {_times(used)} already (max_retries {limit})"
    return None


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def with_feedback(
    move: Move,
    graph: RecipeGraph,
    step: StepSpec,
    branch: BranchSpec,
    severity: str | None,
    error: str | None,
) -> Move:
    """Return `move` carrying the failure as feedback when `branch` sends it back."""
    if move.kind not in RUNS_A_STEP or sends_back(graph, branch, severity) is None:
        return move
    return replace(move, feedback=failure_feedback(step.key, error))


def count_rerun(
    graph: RecipeGraph, state: RunState, step: StepSpec, branch: BranchSpec, severity: str | None
) -> None:
    """Count the reclassification or replanning `branch` makes, if it makes one."""
    kind = sends_back(graph, branch, severity)
    if kind == RECLASSIFICATION:
        state.reclassified[branch.target] = state.reclassified.get(branch.target, 0) + 1
    elif kind == REPLANNING:
        state.count_replan(step.key, branch.name)
