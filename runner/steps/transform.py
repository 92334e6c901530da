"""Transform steps: evaluate the step's JMESPath expressions over the run; no actor is asked.

The expressions read the run's JSON view (`workflows.engine.transform.run_view`): the facts,
the inputs and the latest answers of the steps they name (`steps.KEY`), read in one query. The response is the JSON of
what the step set (its results are added to the facts by the engine); an expression that
fails fails the step, its error naming the expression (`steps[2].set.total: ...`).
"""

from __future__ import annotations

import json
import time

from workflows.engine import transform

from ..claims import StepOutcome
from ..models import StepRun
from ..status import StepStatus
from .session import Session

KIND = "transform"


def execute(session: Session) -> StepOutcome:
    claim = session.claim
    step = claim.step
    outcome = StepOutcome(status=StepStatus.SUCCEEDED)
    outcome.prompt = json.dumps(dict(step.set), ensure_ascii=False)
    began = time.monotonic()
    view = transform.run_view(claim.state.facts, claim.state.inputs, _answers(session))
    try:
        results = transform.evaluate(step.set, view, f"steps[{claim.graph.index(step.key)}]")
    except transform.TransformError as exc:
        outcome.status, outcome.error = StepStatus.FAILED, str(exc)
    else:
        outcome.response = json.dumps(results, ensure_ascii=False)
    outcome.latency_ms = int((time.monotonic() - began) * 1000)
    return outcome


def _answers(session: Session) -> dict[str, str]:
    """Return the latest answer of each step the expressions read that has answered, by key
    (one query; every step's when an expression may read any)."""
    latest = session.claim.state.latest_seq
    wanted = transform.steps_read(session.claim.step.set)
    if wanted is not None:
        latest = {key: seq for key, seq in latest.items() if key in wanted}
    by_seq = dict(
        StepRun.objects.filter(run_id=session.claim.run_id, seq__in=latest.values()).values_list(
            "seq", "response"
        )
    )
    return {key: by_seq[seq] for key, seq in latest.items() if seq in by_seq}
