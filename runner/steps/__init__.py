"""Run one claimed step outside any transaction, by its kind: one module per step kind.

Model calls may take minutes, so nothing here holds a database transaction; the lease keeper
(`runner.lease`, held by `runner.advance`) renews the claim meanwhile. `execute` runs the step
with its kind's module and asks the engine what comes next; the caller commits both.

A step kind is a module with `KIND` and `execute(session) -> StepOutcome` (see `llm`), listed
in `EXECUTORS`; the engine's side of the kind (its fields, how a step of it is read and
checked) is its module in `workflows/engine/step_kinds/`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.utils import timezone

from workflows import engine
from workflows.engine.output_schema import SchemaCheck
from workflows.validators import storable

from .. import model_calls
from ..capacity import ActorFull
from ..claims import Claim, StepOutcome
from ..lease import StepAbandoned
from ..outages import DATABASE_ERRORS
from ..status import StepStatus
from . import classify, decision_tree, given, http, human, intent, llm, retrieve, tool, transform
from .actor_stats import learning
from .phases import DETAILS as PHASES
from .phases import FAILED, OK, Phases
from .session import Session

log = logging.getLogger(__name__)

# Where a failed step's details say its failure was transient (`engine.StepResult.transient`).
TRANSIENT = "transient"

EXECUTORS: dict[str, Callable[[Session], StepOutcome]] = {
    kind.KIND: kind.execute
    for kind in (
        llm,
        human,
        decision_tree,
        classify,
        retrieve,
        tool,
        intent,
        transform,
        http,
    )
}


def execute(claim: Claim) -> tuple[StepOutcome, engine.Decision | None]:
    """Run the claimed step and decide what comes next (no database transaction is held).

    A human step that waits for its reviewers has no decision yet (None).
    """
    session = Session(claim)
    step = claim.step
    started = timezone.now()
    # A fork may give the step its answer: recorded instead of executed (`given`).
    executor = given.execute if given.ANSWER in claim.next else EXECUTORS[step.kind]
    began = time.monotonic()
    try:
        outcome = executor(session)
    except (LookupError, engine.EngineError) as exc:
        outcome = StepOutcome(status=StepStatus.FAILED, error=str(exc))
    except DATABASE_ERRORS:
        raise  # the database went away, not the step: the task is retried (runner.tasks)
    except ActorFull:
        raise  # the step's actor is full: the step waits in the queue (runner.advance)
    except StepAbandoned:
        raise  # the lease is gone: nothing of the step could be committed (runner.advance)
    except Exception as exc:
        # Anything else is a bug here or in a provider: fail the step once, with the reason,
        # rather than leave the lease to expire and run the (paid) step again and again.
        log.exception("run %s: step %s failed unexpectedly", claim.run_id, step.key)
        outcome = StepOutcome(status=StepStatus.FAILED, error=f"unexpected error: {exc!r}")
    executed = time.monotonic() - began
    finishing = time.monotonic()
    _make_storable(outcome)
    if executor is not given.execute and step.kind != human.KIND:
        _record_phases(session.phases, outcome, executed, finishing)
    outcome.started_at = started
    session.executed = True  # from here on a full actor is waited for (Session._slot)
    # The session's own list: the calls of the evaluators `decide` asks are added to it.
    outcome.model_calls = session.model_calls
    outcome.budget_exceeded = session.budget_stop is not None and outcome.status in (
        StepStatus.FAILED,
        StepStatus.TIMED_OUT,
    )
    if outcome.status == StepStatus.WAITING_HUMAN:
        _add_up(outcome)
        return outcome, None
    # Trying again may help: its severity is RETRIABLE (kept in the details for a fork's replay).
    # A reviewers' task past due is not: escalation and execution_timeout branches handle it.
    transient = (
        outcome.status in (StepStatus.FAILED, StepStatus.TIMED_OUT)
        and not outcome.budget_exceeded
        and (session.failed_transiently or (outcome.timed_out and step.kind != human.KIND))
    )
    if transient:
        outcome.details[TRANSIENT] = True
    result = engine.StepResult(
        step_key=step.key,
        response=outcome.response,
        decision=outcome.decision or None,
        comment=outcome.response if step.kind == human.KIND else None,
        timed_out=outcome.timed_out,
        # A failed step always reaches the engine as failed, even when its exception had no text.
        error=outcome.error
        or ("failed without a message" if outcome.status == StepStatus.FAILED else None),
        route_selection=outcome.route_selection,
        leaf=outcome.leaf,
        hits=outcome.hits,
        tool_calls=outcome.tool_calls,
        budget_exceeded=outcome.budget_exceeded,
        validation=_validation(step, outcome),
        classification_failure=outcome.details.get(classify.FAILURE)
        if step.kind == classify.KIND
        else None,
        actor=outcome.actor_alias or None,
        # The variant the visit asks with: a repeat's suffix is added to it again by `next`.
        variant=session.variant,
        transient=transient,
        schema=SchemaCheck.from_json(outcome.details.get(llm.SCHEMA_DETAILS))
        if step.output_schema is not None
        else None,
        http_status=http.http_status(outcome) if step.kind == http.KIND else None,
        facts=outcome.details.get(decision_tree.DETECTED)
        if step.kind == decision_tree.KIND
        else None,
    )
    decision = engine.decide(
        claim.graph,
        claim.state,
        result,
        judge=session.judge,
        learning=learning(claim),
        hits_of=session.stored_hits,
        spend=session.spend,
        answer_of=session.latest_answer,
    )
    _add_up(outcome)
    return outcome, decision


def _record_phases(phases: Phases, outcome: StepOutcome, executed: float, finishing: float) -> None:
    """Keep the step's phases, attempts and duration in its details (`phases.py`). A kind
    that times no phases of its own has one: `call`, its whole execution."""
    if not phases.ran():
        failed = outcome.status != StepStatus.SUCCEEDED
        phases.add("call", executed, FAILED if failed else OK)
        phases.attempts = phases.attempts or 1
    phases.add("finalise", time.monotonic() - finishing)
    outcome.details[PHASES] = phases.as_json()


def _make_storable(outcome: StepOutcome) -> None:
    """Keep what a model or tool wrote the way every database can hold it: a NUL or a lone
    surrogate in its text as U+FFFD, a NaN or Infinity in its details as null (PostgreSQL
    refuses them, and the step's result would be lost)."""
    outcome.response = storable(outcome.response)
    outcome.prompt = storable(outcome.prompt)
    outcome.error = storable(outcome.error)
    outcome.material = storable(outcome.material)
    if outcome.details:
        outcome.details = storable(outcome.details)


def _validation(step: engine.StepSpec, outcome: StepOutcome) -> engine.ValidationSummary | None:
    """Return how the step's validation loop ended, for its conditions (None: none ran)."""
    loop = outcome.details.get("validation")
    if step.validation is None or not isinstance(loop, dict):
        return None
    return engine.ValidationSummary.from_details(
        step.validation["threshold"], loop, outcome.confidence
    )


def _add_up(outcome: StepOutcome) -> None:
    """Set the step's tokens to the sums over its model calls, its evaluators' included."""
    totals = model_calls.totals(outcome.model_calls)
    outcome.tokens_in, outcome.tokens_out = totals.tokens_in, totals.tokens_out


def refused(claim: Claim, outcome: StepOutcome, reason: str) -> tuple[StepOutcome, engine.Decision]:
    """The step failed: the database refused its result (`reason`). Decided as a failed step
    on the claim's state, with no judge asked, so that its error branches can take the run on;
    its calls to models are kept (they were made, and paid for)."""
    failed = StepOutcome(
        status=StepStatus.FAILED,
        prompt=outcome.prompt,
        error=reason,
        actor_alias=outcome.actor_alias,
        actor_name=outcome.actor_name,
        variant=outcome.variant,
        choice=outcome.choice,
        latency_ms=outcome.latency_ms,
        started_at=outcome.started_at,
        model_calls=outcome.model_calls,
    )
    _add_up(failed)
    result = engine.StepResult(
        step_key=claim.step.key,
        response="",
        error=reason,
        actor=failed.actor_alias or None,
        variant=outcome.variant,
    )
    return failed, engine.decide(claim.graph, claim.state, result)
