"""Decision-tree steps: walk the step's tree over the run's facts; no actor is asked."""

from __future__ import annotations

from workflows import engine

from ..claims import StepOutcome
from ..status import StepStatus
from .session import Session

KIND = "decision_tree"


def execute(session: Session) -> StepOutcome:
    claim = session.claim
    result = engine.evaluate_tree(claim.step.tree or {}, claim.state.facts)
    return StepOutcome(
        status=StepStatus.SUCCEEDED,
        response=result.leaf,
        leaf=result.leaf,
        details={"trace": list(result.trace)},
    )
