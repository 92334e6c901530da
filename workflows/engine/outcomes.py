"""Tell what a step attempt's outcome was, from what the recipe did next.

A branch may say what taking it means (`counts_as`: success, failure or neutral); without,
its action says (`ACTION_OUTCOMES`), or a reviewer's decision it reads (approve: success,
reject: failure). The actor statistics count successes from these outcomes, so an answer the
recipe rejected is not counted as a success because the model call did not error.
"""

from __future__ import annotations

from workflows.engine.graph import BranchSpec, Condition, StepSpec
from workflows.engine.vocabulary import ACTION_OUTCOMES

SUCCESS = "success"
FAILURE = "failure"
NEUTRAL = "neutral"

HUMAN_OUTCOMES = {"approve": SUCCESS, "reject": FAILURE}


def default_outcome(action: str, when: Condition | None = None) -> str:
    """Return what taking a branch with `action` (and condition `when`) means by default."""
    if action in ACTION_OUTCOMES:
        return ACTION_OUTCOMES[action]
    if when is not None and when.type == "human_decision" and isinstance(when.value, str):
        return HUMAN_OUTCOMES.get(when.value.strip().lower(), NEUTRAL)
    return NEUTRAL


def branch_outcome(branch: BranchSpec) -> str:
    """Return what taking `branch` says of the attempt: its `counts_as`, else the default."""
    return branch.counts_as or default_outcome(branch.action, branch.when)


def attempt_outcome(step: StepSpec, branch: str | None, *, failed: bool, run_failed: bool) -> str:
    """Return the outcome of one attempt of `step` after which the branch named `branch` was
    taken (None: none was). A failed attempt that fails the run is a failure whatever the
    branch; one that no branch took is a failure if it failed, else neutral."""
    if failed and run_failed:
        return FAILURE
    taken = next((b for b in step.branches if b.name == branch), None) if branch else None
    if taken is not None:
        return branch_outcome(taken)
    return FAILURE if failed else NEUTRAL
