"""Advance a run: claim its next step under a lease, execute it outside any transaction, and
commit it once — StepRun, branch evaluations, the run's new state and its events together.

The database holds all state (runner.store); Celery messages only say "look at run N" and may
be lost or repeated. A worker may go on with the run's next step for a short time slice, then
hands the run back to the queue so that runs share the workers fairly.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from workflows import engine
from workflows.validators import storable

from . import actors, capacity, dispatch, events, model_calls, notifications, store, tracing
from .claims import SCRIPTED_TIMEOUT, Claim, StepCommit, StepOutcome
from .lease import StepAbandoned, keeper
from .models import BranchEvaluation, HumanTask, ModelCall, StepRun
from .outages import DATABASE_ERRORS
from .status import TERMINAL, Outcome, RunStatus, StepStatus, TaskStatus, check_transition
from .steps import execute, refused

log = logging.getLogger(__name__)


def advance(run_id: int, *, time_slice: float | None = None, resume_token: str = "") -> None:
    """Execute the run's runnable steps one by one until it waits, ends, or the slice is used.

    Each step's commit claims the next one in the same transaction while the slice lasts, and
    hands the run back to the queue once it is used. A database that goes away mid-step raises
    `Interrupted` with the lease token held, so that a retry can take the step again at once
    (`resume_token`) instead of waiting for the lease to run out.
    """
    slice_s = settings.RUN_TIME_SLICE_SECONDS if time_slice is None else time_slice
    deadline = time.monotonic() + slice_s
    try:
        claim = store.claim(run_id, resume_token=resume_token)
    except store.NotYet as early:
        # A message before the retry's time (a duplicate, the reaper's): due again then,
        # and the reaper told so, so that a reset `enqueued_at` does not resend every tick.
        store.mark_waiting(run_id, early.at)
        dispatch.send(run_id, countdown=early.seconds_left())
        return
    except DATABASE_ERRORS as exc:
        raise Interrupted(run_id, resume_token) from exc  # still ours to take back
    if claim is None:
        return
    # One lease token for the slice: each commit checks it together with the step's seq.
    try:
        with keeper.holding(claim.run_id, claim.token):
            while claim is not None:
                try:
                    with tracing.step_span(claim) as span:
                        outcome, decision = execute(claim)
                        span.result(outcome, decision)
                except capacity.ActorFull as full:
                    wait_for_capacity(claim, full)
                    return
                except StepAbandoned:
                    # Cancelled, or taken over by another worker: its result could not commit.
                    log.info("run %s: step %s abandoned: its lease is gone", run_id, claim.seq)
                    return
                claim = commit(claim, outcome, decision, go_on=time.monotonic() < deadline)
    except DATABASE_ERRORS as exc:
        raise Interrupted(run_id, claim.token if claim else "") from exc


def wait_for_capacity(claim: Claim, full: capacity.ActorFull) -> None:
    """Give the claimed step back to the queue, unexecuted, until its actor has a free slot.

    Its worker goes on with other runs meanwhile (it does not spin), and the step does not
    fail: the run's message comes back after a short countdown (or when the rate window frees
    a slot), and its next claim tries again. A lease lost meanwhile leaves the run to the
    worker that took it over.
    """
    try:
        store.give_back(claim)
    except store.Fenced:
        return
    countdown = max(full.retry_after_s, capacity.full_retry_seconds())
    log.info(
        "run %s: step #%s (%s) waits %.1f s in the queue: %s",
        claim.run_id,
        claim.seq,
        claim.step.key,
        countdown,
        full,
    )
    dispatch.send_on_commit(claim.run_id, countdown=countdown)


class Interrupted(Exception):
    """The database went away while a run was advanced; nothing half-done was committed."""

    def __init__(self, run_id: int, token: str) -> None:
        super().__init__(f"run {run_id}: interrupted by a database outage")
        self.run_id, self.token = run_id, token


def commit(
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision | None,
    *,
    go_on: bool = False,
) -> Claim | None:
    """Store the step's result and the run's next move in one transaction.

    If the run has a next step to execute now, it is claimed in the same transaction and
    returned with `go_on`; without, the run is handed back to the queue. A worker whose lease
    was taken over (it was presumed dead) commits nothing. A result the database refuses
    fails the step with the reason (`_refused`), never leaving the run to be taken again.
    """
    try:
        step, following = _write(claim, outcome, decision, go_on)
    except store.Fenced:
        log.info(
            "run %s: step %s result discarded (lease lost or run stopped)", claim.run_id, claim.seq
        )
        return None
    except REFUSED as exc:
        if isinstance(exc, IntegrityError) and outcome.task is None and store.committed(claim):
            # The unique (run, seq, attempt) refused a second copy of a committed step.
            log.warning("run %s: step %s was already committed", claim.run_id, claim.seq)
            return None
        return _refused(claim, outcome, exc, go_on)
    _committed(claim, step)
    return following


# What a database refuses to store, beside a second copy of a committed step: text with a NUL
# or a lone surrogate (DataError, or the driver's UnicodeEncodeError), JSON holding NaN, a value
# past its column's size or checks (IntegrityError); and what JSON cannot write (ValueError,
# TypeError).
REFUSED = (IntegrityError, DataError, ValueError, TypeError)


def _write(
    claim: Claim, outcome: StepOutcome, decision: engine.Decision | None, go_on: bool
) -> tuple[StepCommit, Claim | None]:
    """Write the step's commit; return it and the next step it claimed, if any."""
    if outcome.status == StepStatus.WAITING_HUMAN:
        # The task is inserted first: its events and the run's next name its id.
        with transaction.atomic():
            step = _task_opened(claim, outcome, go_on)
            return step, store.commit(step)
    assert decision is not None
    step = _step_decided(claim, outcome, decision, go_on)
    return step, store.commit(step)


def _committed(claim: Claim, step: StepCommit) -> None:
    """What follows a commit: the run handed back to the queue, the end of its trace."""
    if step.hands_back:
        # After the commit: the next claim must find it. A retry that waits is due later:
        # it waits in the queue, holding no worker.
        wake = store.not_before(step.next)
        countdown = (wake - timezone.now()).total_seconds() if wake else None
        dispatch.send_on_commit(claim.run_id, countdown=countdown)
    if step.status in TERMINAL:
        _trace_finished(claim, step.status, step.outcome, step.error)


def _trace_finished(claim: Claim, status: str, outcome: str, error: str) -> None:
    tracing.run_finished(
        run_id=claim.run_id,
        created_at=claim.created_at,
        workflow=str(claim.document.get("slug", "")),
        status=status,
        outcome=outcome,
        error=error,
    )


def _refused(claim: Claim, outcome: StepOutcome, exc: Exception, go_on: bool) -> Claim | None:
    """Commit the step as failed, saying why the database refused its result.

    The failure is decided again on the state the run had before the step (the refused commit
    changed nothing), so that the step's error branches can take the run on. If even that is
    refused (or the step is a human one, whose StepRun exists), the run fails without it.
    """
    reason = storable(f"the database refused the step's result: {_refusal(exc)}")
    log.warning(
        "run %s: step %s: %s", claim.run_id, claim.seq, reason, exc_info=isinstance(exc, TypeError)
    )
    try:
        if outcome.task is None:
            claim.state = store.stored_state(claim.run_id)
            failed, decision = refused(claim, outcome, reason)
            step, following = _write(claim, failed, decision, go_on)
            _committed(claim, step)
            return following
    except store.Fenced:
        return None
    except REFUSED as again:
        log.error(
            "run %s: step %s: its failure was refused too: %s", claim.run_id, claim.seq, again
        )
    try:
        store.fail_claimed(claim, reason)
    except store.Fenced:
        return None
    _trace_finished(claim, RunStatus.FAILED, Outcome.FAILED, reason)
    return None


def _refusal(exc: Exception) -> str:
    """The database's (or the driver's) words for a refused write, without the values: the
    detail only of a JSON value it could not read (`Token "NaN" is invalid.`), never one that
    shows the row ("Failing row contains (...)")."""
    diag = getattr(exc.__cause__, "diag", None)
    if diag is not None and diag.message_primary:
        text = str(diag.message_primary)
        detail = diag.message_detail
        if detail and str(diag.sqlstate) in _JSON_VALUE_STATES:
            text += f" ({detail})"
    else:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:REFUSAL_MAX_CHARS]


# invalid_text_representation, untranslatable_character: their detail names the JSON token.
_JSON_VALUE_STATES = {"22P02", "22P05"}
REFUSAL_MAX_CHARS = 300


def _step_decided(
    claim: Claim, outcome: StepOutcome, decision: engine.Decision, go_on: bool
) -> StepCommit:
    """The commit of a step the engine decided: its result, and where the run goes next."""
    step_run = _step_run(claim, outcome)
    resume_at = _resume_at(decision)
    # What the recipe did next says whether the attempt succeeded (for the actor statistics).
    step_run.outcome = engine.attempt_outcome(
        claim.step,
        decision.branch,
        failed=outcome.status == StepStatus.FAILED,
        run_failed=decision.kind == "fail",
    )
    evaluations = [
        BranchEvaluation(
            step_run=step_run,
            order=i,
            branch=e.branch,
            priority=e.priority,
            matched=e.matched,
            taken=e.taken,
            reason=_until(e, resume_at),
        )
        for i, e in enumerate(decision.evaluations)
    ]
    step_events = [events.step_finished(step_run)]
    step_events += [
        events.branch_evaluated(seq=claim.seq, step=claim.step.key, evaluation=e, reason=r.reason)
        for e, r in zip(decision.evaluations, evaluations, strict=True)
    ]
    step_events.append(
        events.branch_taken(
            seq=claim.seq, step=claim.step.key, decision=decision, resume_at=resume_at
        )
    )
    commit = StepCommit(
        claim,
        step_run,
        evaluations,
        step_events,
        next={},
        go_on=go_on,
        model_calls=_call_rows(claim, outcome),
    )
    _apply_decision(commit, decision)
    if resume_at is not None and commit.next:
        # The run waits in the queue for its retry: the step is not claimed at once.
        commit.next[store.NOT_BEFORE] = resume_at.isoformat()
        commit.go_on = False
    if commit.status in TERMINAL:
        step_events.append(
            events.run_finished(status=commit.status, outcome=commit.outcome, error=commit.error)
        )
    return commit


def _resume_at(decision: engine.Decision) -> datetime | None:
    """When the step runs again, if the branch taken asked its retry to wait."""
    if decision.delay_s <= 0 or decision.kind not in ("repeat", "retry_actor"):
        return None
    return timezone.now() + timedelta(seconds=decision.delay_s)


def _until(evaluation: engine.Evaluation, resume_at: datetime | None) -> str:
    """The evaluation's reason; the taken branch's says until when the run waits."""
    if resume_at is None or not evaluation.taken:
        return evaluation.reason
    return f"{evaluation.reason}, until {resume_at.isoformat(timespec='seconds')}"


def _step_run(claim: Claim, outcome: StepOutcome) -> StepRun:
    """The step's StepRun with its result: a new one, or a resumed human step's own."""
    if outcome.task is not None:
        step_run = outcome.task.step_run
    else:
        step = claim.step
        step_run = StepRun(
            run_id=claim.run_id,
            seq=claim.seq,
            attempt=claim.attempt,
            step_key=step.key,
            step_name=step.name,
            kind=step.kind,
            actor_alias=outcome.actor_alias,
            actor_name=outcome.actor_name,
            variant=outcome.variant,
            choice=outcome.choice,
            intent_pattern=claim.state.intent_pattern,
            started_at=outcome.started_at,
            prompt=outcome.prompt,
        )
    step_run.status = outcome.status
    step_run.response = outcome.response
    step_run.decision = outcome.decision
    step_run.error = outcome.error
    step_run.latency_ms = outcome.latency_ms
    # The sums over every call the step made (its judge's and evaluators' too).
    totals = model_calls.totals(outcome.model_calls)
    step_run.tokens_in, step_run.tokens_out = totals.tokens_in, totals.tokens_out
    step_run.cost, step_run.model_calls = totals.cost, totals.calls
    step_run.confidence = outcome.confidence
    step_run.details = outcome.details
    step_run.finished_at = timezone.now()
    return step_run


def _call_rows(claim: Claim, outcome: StepOutcome) -> list[ModelCall]:
    """The ModelCall rows of the step's calls (the store links them to its StepRun)."""
    return [record.as_row(run_id=claim.run_id, seq=claim.seq) for record in outcome.model_calls]


def _apply_decision(commit: StepCommit, decision: engine.Decision) -> None:
    """Set the run's next step, or its end, as the engine decided (a failed step that no branch
    handles fails the run: the engine says so with a `fail` decision)."""
    step = commit.claim.step
    if decision.kind in ("goto", "repeat", "retry_actor"):
        commit.next = {"step": decision.next_step or step.key}
        if decision.feedback:
            # A failure sent back (RECLASSIFICATION, REPLANNING): the step's `{feedback}`.
            commit.next["feedback"] = decision.feedback
        if decision.kind == "repeat" and decision.prompt_suffix:
            commit.next["prompt_suffix"] = decision.prompt_suffix
        if decision.kind in ("repeat", "retry_actor"):
            # The visit goes on: with the actor and variant chosen for it (a repeat keeps
            # them), so a learning step does not choose again (`steps.llm`).
            if decision.actor:
                commit.next["actor"] = decision.actor
            commit.next["variant"] = decision.variant
            if decision.choice is not None:
                commit.next["choice"] = decision.choice.as_json()
    elif decision.kind == "complete":
        # The engine says whether an approval or a handled error marks the run's outcome.
        _finish(commit, RunStatus.SUCCEEDED, decision.outcome or Outcome.COMPLETED, "")
    elif decision.kind == "end":
        _finish(commit, RunStatus.ENDED, decision.outcome or Outcome.ENDED, "")
    else:
        _finish(commit, RunStatus.FAILED, Outcome.FAILED, decision.reason)


def _finish(commit: StepCommit, status: str, outcome: str, error: str) -> None:
    check_transition(commit.status, status)
    commit.status, commit.outcome, commit.error = status, outcome, error
    commit.next = {}


def _task_opened(claim: Claim, outcome: StepOutcome, go_on: bool) -> StepCommit:
    """The commit of a human step that opens its task: the run waits for a reviewer, or goes
    on with the step at once if a dry-run script answers for them.

    Inserts the task with the step's StepRun (inside the caller's transaction, behind the lease
    fence); the reviewers are told, and mailed, once the commit is in.
    """
    step = claim.step
    escalation_group_id = None
    if step.escalate_to:
        escalation = actors.resolve(step.escalate_to, document=claim.document, script=None)
        escalation_group_id = escalation.group_id
    task = HumanTask(
        run_id=claim.run_id,
        step_key=step.key,
        group_id=outcome.human_group_id,
        escalation_group_id=escalation_group_id,
        question=outcome.prompt,
        material=outcome.material,
        options=list(step.options),
        due_at=timezone.now() + timedelta(seconds=step.timeout_s) if step.timeout_s else None,
    )
    step_run = _step_run(claim, outcome)
    store.insert_task(claim, step_run, task)
    step_events = [events.human_task_created(task)]
    commit = StepCommit(
        claim,
        step_run,
        [],
        step_events,
        next={},
        go_on=go_on,
        model_calls=_call_rows(claim, outcome),
    )
    if outcome.scripted_decision is None:
        check_transition(commit.status, RunStatus.WAITING_HUMAN)
        commit.status = RunStatus.WAITING_HUMAN
        step_events.append(events.run_status(commit.status))
        events.push_task_change([task.group_id], "created", events.task_payload(task))
        notifications.mail_reviewers_on_commit(task)
    else:
        _answer(task, outcome.scripted_decision)
        step_events.append(
            events.human_task_decided(task)
            if task.status == TaskStatus.DECIDED
            else events.human_task_timed_out(task)
        )
        commit.task = task
        commit.next = {"step": task.step_key, "resume_task": task.pk}
    return commit


def _answer(task: HumanTask, scripted: str) -> None:
    """Give the task a dry-run script's answer: `option`, `option: comment`, or `@timeout`
    (a script can let the task lapse, to walk `execution_timeout` branches)."""
    answer, _, comment = scripted.partition(":")
    if answer.strip() == SCRIPTED_TIMEOUT:
        task.status = TaskStatus.TIMED_OUT
    else:
        task.status, task.decided_at = TaskStatus.DECIDED, timezone.now()
        task.decision, task.comment = answer.strip(), comment.strip()
