"""Execute runs: claim the next step under a lease, run it outside any transaction, and
commit it once — StepRun, branch evaluations, the run's new state and its events together.

PostgreSQL holds all state; Celery messages only say "look at run N" and may be lost or repeated.
A worker may go on with the run's next step for a short time slice, then hands the run back to
the queue so that runs share the workers fairly.
"""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from workflows import engine
from workflows.models import RecipeVersion

from . import actors, events, fast_commit
from .claims import SCRIPTED_TIMEOUT, Claim, StepOutcome, lease_seconds, version_graph
from .models import BranchEvaluation, HumanTask, Run, RunEvent, StepRun
from .outages import DATABASE_ERRORS, broker
from .status import RUNNABLE, Outcome, RunStatus, StepStatus, TaskStatus, check_transition
from .steps import LeaseKeeper, execute

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# The loop a Celery task runs


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
        claim = claim_next_step(run_id, resume_token=resume_token)
    except DATABASE_ERRORS as exc:
        raise Interrupted(run_id, resume_token) from exc  # still ours to take back
    if claim is None:
        return
    # One lease token for the slice: each commit checks it together with the step's seq.
    try:
        with LeaseKeeper(claim.run_id, claim.token):
            while claim is not None:
                outcome, decision = execute(claim)
                claim = commit(claim, outcome, decision, go_on=time.monotonic() < deadline)
    except DATABASE_ERRORS as exc:
        raise Interrupted(run_id, claim.token if claim else "") from exc


class Interrupted(Exception):
    """The database went away while a run was advanced; nothing half-done was committed."""

    def __init__(self, run_id: int, token: str) -> None:
        super().__init__(f"run {run_id}: interrupted by a database outage")
        self.run_id, self.token = run_id, token


# Messages of runs that were interrupted or lost jump the queue (with Redis, 0 is served first;
# CELERY_TASK_DEFAULT_PRIORITY is below it), so that a recovered run does not wait behind every
# run queued since.
RECOVERY_PRIORITY = 0


def enqueue(run_id: int, *, priority: int | None = None) -> None:
    """Ask a worker to look at the run (after the current transaction commits, if any)."""
    Run.objects.filter(pk=run_id).update(enqueued_at=timezone.now())
    send_on_commit(run_id, priority=priority)


def send_on_commit(run_id: int, *, priority: int | None = None) -> None:
    """Send the run's message once the current transaction commits; the caller has set the
    run's `enqueued_at` in it (the reaper resends messages that never left)."""
    transaction.on_commit(lambda: send(run_id, priority=priority))


def send(run_id: int, *, priority: int | None = None) -> bool:
    """Send the run's message now; return whether the broker took it.

    What the message asks for is already committed, so a broker that is down or frozen must
    not fail (or hold up) the caller: the send is bounded by the broker's socket timeouts,
    and a run whose message did not leave is marked for the reaper's next tick.
    """
    from .tasks import advance_run

    if broker.is_open():
        sent = False
    else:
        try:
            advance_run.apply_async((run_id,), priority=priority, retry=False)
            sent = True
        except Exception as exc:  # kombu's and redis-py's errors have no common base
            broker.trip(exc)
            sent = False
    if not sent:
        log.warning("run %s: the broker is unreachable; the reaper will send it", run_id)
        with suppress(*DATABASE_ERRORS):
            Run.objects.filter(pk=run_id).update(enqueued_at=None)
    return sent


# --------------------------------------------------------------------------------------------
# Claim


def claim_next_step(run_id: int, *, resume_token: str = "") -> Claim | None:
    """Take the lease on the run's next step, or return None if there is nothing to take.

    A live lease is taken only by the worker that holds its token (`resume_token`): a task
    retried after a database outage goes on with the step it was running.

    The run is read without a lock; the claim's write is fenced by what was read (the lease
    token, the next step's seq, a runnable status, the count of its events), so that of two
    workers claiming the same step only one takes it, and a claim never acts on a run changed
    since it was read (every writer adds an event). A lease is taken only once it has expired.
    """
    now = timezone.now()
    run = _run_to_claim(run_id)
    if run is None or run.status not in RUNNABLE or not run.next.get("step"):
        return None
    leased = run.lease_token and run.lease_expires_at and run.lease_expires_at > now
    if leased and run.lease_token != resume_token:
        return None  # another worker holds it
    read = (run.lease_token, run.next_seq, run.event_seq)
    pending: list[tuple[str, dict[str, Any]]] = []
    if run.claims >= settings.RUN_MAX_STEP_CLAIMS:
        _fail_unclaimed(
            run,
            read,
            f"step '{run.next['step']}' was lost {run.claims} times: the workers running it "
            "stopped before finishing",
        )
        return None
    try:
        graph, document = version_graph(run.version_id, run.version_created_at)
    except engine.RecipeInvalid as exc:
        # Published before a check it now fails (say, a bound on regexes): it can never run.
        _fail_unclaimed(run, read, f"its recipe version can no longer run: {exc}")
        return None
    changes: dict[str, Any] = {}
    if run.status == RunStatus.QUEUED:
        check_transition(run.status, RunStatus.RUNNING)
        run.status = changes["status"] = RunStatus.RUNNING
        run.started_at = changes["started_at"] = now
        pending.append(("run.started", {"status": run.status}))
    claim = _take_lease(run, graph, document, now, pending)
    changes.update(
        lease_token=run.lease_token, lease_expires_at=run.lease_expires_at, claims=run.claims
    )
    try:
        claim.event_seq = _write(
            run.pk, run.created_by_id, *read, changes, pending, exact_events=True
        )
    except _Fenced:
        return None  # another worker claimed it first
    return claim


def _fail_unclaimed(run: Run, read: tuple[str, int, int], error: str) -> None:
    """Fail a run that cannot be claimed, if nothing changed it since it was read."""
    _finish(run, RunStatus.FAILED, Outcome.FAILED, error)
    changed = (
        "status",
        "outcome",
        "error",
        "next",
        "finished_at",
        "lease_token",
        "lease_expires_at",
    )
    changes = {name: getattr(run, name) for name in changed}
    with suppress(_Fenced):
        _write(
            run.pk,
            run.created_by_id,
            *read,
            changes,
            [("run.finished", _finished_data(run))],
            exact_events=True,
        )


def _run_to_claim(run_id: int) -> Run | None:
    """The run, with its version's creation time as `version_created_at` (a key of the
    parsed-version cache, as the database returns it: SQLite gives text)."""
    if connection.vendor == "postgresql":
        read = fast_commit.read_run(run_id)  # prepared, as the claim's write
        if read is None:
            return None
        run, run.version_created_at = read
        return run
    quote = connection.ops.quote_name
    run_table, version_table = Run._meta.db_table, RecipeVersion._meta.db_table
    sql = (
        f"SELECT r.*, v.{quote('created_at')} AS version_created_at "
        f"FROM {quote(run_table)} r JOIN {quote(version_table)} v ON v.id = r.{quote('version_id')} "
        "WHERE r.id = %s"
    )
    return next(iter(Run.objects.raw(sql, [run_id])), None)


def _take_lease(
    run: Run,
    graph: engine.RecipeGraph,
    document: dict[str, Any],
    now: datetime,
    pending: list[tuple[str, dict[str, Any]]],
    previous: Claim | None = None,
) -> Claim:
    """Lease the run's next step to this worker (the caller saves the run and the events).

    `previous` is the step this worker commits in the same transaction: the next one keeps its
    lease token and the actors it resolved.
    """
    step = graph.step(run.next["step"])
    resume_task = run.next.get("resume_task")
    if resume_task:
        attempt = StepRun.objects.get(task__pk=resume_task).attempt
    else:
        # The state records one response per committed StepRun, in the same transaction.
        responses = previous.state.responses if previous else run.state.get("responses", ())
        attempt = 1 + sum(1 for r in responses if r["step"] == step.key)
        pending.append(
            (
                "step.started",
                {
                    "seq": run.next_seq,
                    "step": step.key,
                    "name": step.name,
                    "kind": step.kind,
                    "actor": run.next.get("actor") or step.actor,
                    "attempt": attempt,
                },
            )
        )
    run.lease_token = previous.token if previous else str(uuid.uuid4())
    run.lease_expires_at = now + timedelta(seconds=lease_seconds())
    run.claims += 1
    return Claim(
        run_id=run.pk,
        token=run.lease_token,
        seq=run.next_seq,
        attempt=attempt,
        step=step,
        graph=graph,
        document=document,
        state=engine.RunState.from_dict(run.state),
        directive=dict(run.next),
        calls=dict(run.calls),
        script=run.script,
        recipe_id=run.recipe_id,
        owner_id=run.created_by_id,
        resolved=previous.resolved if previous else {},
    )


# --------------------------------------------------------------------------------------------
# Commit


class _Fenced(Exception):
    """The worker's lease was taken over, or the run stopped: the commit must write nothing."""


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
    was taken over (it was presumed dead) commits nothing.

    The run's row is not read: the claim knows it (only the lease holder moves a leased run).
    The first statement is the fenced UPDATE of the run, which also locks its row until commit.
    """
    try:
        if outcome.status == StepStatus.WAITING_HUMAN:
            with transaction.atomic():
                return _commit_task_created(claim, outcome, go_on)
        assert decision is not None
        return _commit_step_result(claim, outcome, decision, go_on)
    except _Fenced:
        log.info(
            "run %s: step %s result discarded (lease lost or run stopped)",
            claim.run_id,
            claim.seq,
        )
        return None
    except IntegrityError:
        # The unique (run, seq, attempt) refused a second copy of a committed step.
        log.warning("run %s: step %s was already committed", claim.run_id, claim.seq)
        return None


def _working_run(claim: Claim) -> Run:
    """The run as its claim left it (never saved: `_fence` writes the changed fields)."""
    return Run(
        pk=claim.run_id,
        recipe_id=claim.recipe_id,
        created_by_id=claim.owner_id,
        status=RunStatus.RUNNING,
        next=dict(claim.directive),
        next_seq=claim.seq,
        event_seq=claim.event_seq,
        calls=claim.calls,
        script=claim.script,
        lease_token=claim.token,
    )


def _fence(
    run_id: int,
    token: str,
    seq: int,
    event_seq: int,
    changes: dict[str, Any],
    new_events: int,
    *,
    exact_events: bool = False,
) -> int:
    """Apply `changes` to the run if it is still at (`token`, `seq`) and runnable; else raise.

    Returns the run's event_seq before this write: the caller numbers its `new_events` events
    from the next one. Another writer may have added events since the run was read (none does
    to a leased run today); then the UPDATE is retried with the run's current event_seq, unless
    `exact_events` asks that nothing happened to the run since it was read.
    """
    fenced = Run.objects.filter(pk=run_id, lease_token=token, next_seq=seq, status__in=RUNNABLE)
    base = event_seq
    while not fenced.filter(event_seq=base).update(event_seq=base + new_events, **changes):
        current = fenced.values_list("event_seq", flat=True).first()
        if current is None or exact_events:
            raise _Fenced
        base = current
    return base


def _write(
    run_id: int,
    owner_id: int,
    token: str,
    seq: int,
    event_seq: int,
    changes: dict[str, Any],
    pending: list[tuple[str, dict[str, Any]]],
    step: tuple[StepRun, list[BranchEvaluation]] | None = None,
    *,
    exact_events: bool = False,
) -> int:
    """Change the run, add its events and a step's rows, if the run is still at (`token`,
    `seq`) and runnable; else write nothing and raise `_Fenced`. Events are pushed on commit.

    Returns the run's event_seq after the write. On PostgreSQL it is one statement, its own
    transaction (fast_commit); elsewhere the fenced UPDATE first, then the rows.
    """
    if connection.vendor == "postgresql":
        rows = [RunEvent(run_id=run_id, type=type_, data=data) for type_, data in pending]
        base = fast_commit.commit_step(
            run_id=run_id,
            token=token,
            seq=seq,
            statuses=sorted(RUNNABLE),
            changes=changes,
            run_events=rows,
            step_run=step[0] if step else None,
            evaluations=step[1] if step else (),
            event_seq=event_seq if exact_events else None,
        )
        if base is None:
            raise _Fenced
        events.push_on_commit(run_id, owner_id, rows)
        return base + len(rows)
    with transaction.atomic():
        base = _fence(
            run_id, token, seq, event_seq, changes, len(pending), exact_events=exact_events
        )
        if step:
            step_run, evaluations = step
            step_run.save(force_insert=True)
            for evaluation in evaluations:
                evaluation.step_run = step_run
            BranchEvaluation.objects.bulk_create(evaluations)
        events.append(run_id, owner_id, base, pending)
    return base + len(pending)


def _release_or_go_on(
    run: Run, claim: Claim, pending: list[tuple[str, dict[str, Any]]], go_on: bool
) -> tuple[Claim | None, dict[str, Any]]:
    """Release the lease, and claim the run's next step or hand the run back to the queue.

    Returns the next claim, if any, and the run's fields this commit changes. A run handed
    back to the queue has `enqueued_at` among them: the caller sends its message once the
    commit is done.
    """
    now = timezone.now()
    run.lease_token, run.lease_expires_at, run.claims = "", None, 0
    next_claim = None
    changes: dict[str, Any] = {}
    if run.status in RUNNABLE and run.next.get("step"):
        if go_on:
            next_claim = _take_lease(run, claim.graph, claim.document, now, pending, claim)
        else:
            run.enqueued_at = changes["enqueued_at"] = now
    changes.update(
        lease_token=run.lease_token,
        lease_expires_at=run.lease_expires_at,
        claims=run.claims,
        calls=claim.calls,
    )
    if run.next != claim.directive:
        changes["next"] = run.next
    if run.next_seq != claim.seq:
        changes["next_seq"], changes["state"] = run.next_seq, run.state
    if run.status != RunStatus.RUNNING:
        changes.update(
            status=run.status, outcome=run.outcome, error=run.error, finished_at=run.finished_at
        )
    return next_claim, changes


def _step_run_fields(claim: Claim, outcome: StepOutcome) -> dict[str, Any]:
    return {
        "status": outcome.status,
        "prompt": outcome.prompt,
        "response": outcome.response,
        "decision": outcome.decision,
        "error": outcome.error,
        "latency_ms": outcome.latency_ms,
        "tokens_in": outcome.tokens_in,
        "tokens_out": outcome.tokens_out,
        "confidence": outcome.confidence,
        "details": outcome.details,
        "finished_at": timezone.now(),
    }


def _new_step_run(claim: Claim, outcome: StepOutcome) -> StepRun:
    step_run = _step_run(claim, outcome)
    step_run.save(force_insert=True)
    return step_run


def _step_run(claim: Claim, outcome: StepOutcome) -> StepRun:
    """The step's StepRun, not saved yet."""
    step = claim.step
    return StepRun(
        run_id=claim.run_id,
        seq=claim.seq,
        attempt=claim.attempt,
        step_key=step.key,
        step_name=step.name,
        kind=step.kind,
        actor_alias=outcome.actor_alias,
        actor_name=outcome.actor_name,
        started_at=outcome.started_at,
        **_step_run_fields(claim, outcome),
    )


def _commit_task_created(claim: Claim, outcome: StepOutcome, go_on: bool) -> Claim | None:
    """Store a human step's task (rare next to model steps: two UPDATEs of the run are fine)."""
    from .human import task_payload

    # First: refuse a stale worker, lock the row.
    base = _fence(claim.run_id, claim.token, claim.seq, claim.event_seq, {"claims": 0}, 0)
    run = _working_run(claim)
    run.event_seq = base
    run.state = claim.state.to_dict()  # unchanged (the step has not been decided yet)
    step = claim.step
    step_run = _new_step_run(claim, outcome)
    escalation_group_id = None
    doc_step = next(s for s in claim.document["steps"] if s["key"] == step.key)
    if doc_step.get("escalate_to"):
        escalation_group_id = actors.resolve(
            doc_step["escalate_to"], document=claim.document, script=None
        ).group_id
    task = HumanTask.objects.create(
        run_id=claim.run_id,
        step_run=step_run,
        step_key=step.key,
        group_id=outcome.human_group_id,
        escalation_group_id=escalation_group_id,
        question=outcome.prompt,
        material=outcome.material,
        options=list(step.options),
        due_at=timezone.now() + timedelta(seconds=step.timeout_s) if step.timeout_s else None,
    )
    pending: list[tuple[str, dict[str, Any]]] = [("human_task.created", task_payload(task))]
    if outcome.scripted_decision is not None:
        decision, _, comment = outcome.scripted_decision.partition(":")
        if decision.strip() == SCRIPTED_TIMEOUT:
            # A script can let the task lapse, to walk `execution_timeout` branches.
            task.status = TaskStatus.TIMED_OUT
            event = "human_task.timed_out"
        else:
            task.status, task.decision, task.comment = (
                TaskStatus.DECIDED,
                decision.strip(),
                comment.strip(),
            )
            task.decided_at = timezone.now()
            event = "human_task.decided"
        task.save(update_fields=["status", "decision", "comment", "decided_at"])
        pending.append((event, task_payload(task)))
        run.next = {"step": step.key, "resume_task": task.pk}
    else:
        check_transition(run.status, RunStatus.WAITING_HUMAN)
        run.status = RunStatus.WAITING_HUMAN
        run.next = {}
        pending.append(("run.status", {"status": run.status}))
        events.push_task_change([task.group_id], "created", task_payload(task))
    next_claim, changes = _release_or_go_on(run, claim, pending, go_on)
    events.record(run, pending)
    Run.objects.filter(pk=claim.run_id).update(event_seq=run.event_seq, **changes)
    if "enqueued_at" in changes:
        send_on_commit(claim.run_id)
    if next_claim is not None:
        next_claim.event_seq = run.event_seq
    return next_claim


def _commit_step_result(
    claim: Claim, outcome: StepOutcome, decision: engine.Decision, go_on: bool
) -> Claim | None:
    """Decide the run's new state in memory, then write it: fenced UPDATE first, then rows."""
    step = claim.step
    run = _working_run(claim)
    pending: list[tuple[str, dict[str, Any]]] = [
        (
            "step.finished",
            {
                "seq": claim.seq,
                "step": step.key,
                "attempt": claim.attempt,
                "status": outcome.status,
                "response": outcome.response,
                "decision": outcome.decision,
                "error": outcome.error,
                "latency_ms": outcome.latency_ms,
                "tokens_in": outcome.tokens_in,
                "tokens_out": outcome.tokens_out,
                "confidence": outcome.confidence,
                "details": outcome.details,
            },
        ),
    ]
    pending += [
        (
            "branch.evaluated",
            {
                "seq": claim.seq,
                "step": step.key,
                "branch": e.branch,
                "priority": e.priority,
                "matched": e.matched,
                "taken": e.taken,
                "reason": e.reason,
            },
        )
        for e in decision.evaluations
    ]
    pending.append(
        (
            "branch.taken",
            {
                "seq": claim.seq,
                "step": step.key,
                "branch": decision.branch,
                "action": decision.action,
                "kind": decision.kind,
                "next_step": decision.next_step,
                "reason": decision.reason,
            },
        )
    )
    _apply_decision(run, claim, outcome, decision, pending)
    run.state = claim.state.to_dict()
    run.next_seq = claim.seq + 1
    next_claim, changes = _release_or_go_on(run, claim, pending, go_on)

    if outcome.task is None:
        step = (_step_run(claim, outcome), _evaluations(None, decision))
        fence = (claim.token, claim.seq, claim.event_seq)
        event_seq = _write(claim.run_id, claim.owner_id, *fence, changes, pending, step)
    else:
        with transaction.atomic():
            event_seq = _commit_resumed_task(claim, outcome, decision, changes, pending)
    if "enqueued_at" in changes:
        send_on_commit(claim.run_id)  # after the commit: the next claim must find it done
    if next_claim is not None:
        next_claim.event_seq = event_seq
    return next_claim


def _commit_resumed_task(
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision,
    changes: dict[str, Any],
    pending: list[tuple[str, dict[str, Any]]],
) -> int:
    """A decided human step: its StepRun exists. Returns the run's event_seq after the commit."""
    base = _fence(claim.run_id, claim.token, claim.seq, claim.event_seq, changes, len(pending))
    step_run = outcome.task.step_run  # type: ignore[union-attr]
    fields = _step_run_fields(claim, outcome)
    del fields["prompt"]
    for name, value in fields.items():
        setattr(step_run, name, value)
    step_run.save(update_fields=list(fields))
    BranchEvaluation.objects.bulk_create(_evaluations(step_run, decision))
    events.append(claim.run_id, claim.owner_id, base, pending)
    return base + len(pending)


def _evaluations(step_run: StepRun | None, decision: engine.Decision) -> list[BranchEvaluation]:
    return [
        BranchEvaluation(
            step_run=step_run,
            order=i,
            branch=e.branch,
            priority=e.priority,
            matched=e.matched,
            taken=e.taken,
            reason=e.reason,
        )
        for i, e in enumerate(decision.evaluations)
    ]


def _apply_decision(
    run: Run,
    claim: Claim,
    outcome: StepOutcome,
    decision: engine.Decision,
    pending: list[tuple[str, dict[str, Any]]],
) -> None:
    step = claim.step
    failed = outcome.status in (StepStatus.FAILED, StepStatus.TIMED_OUT)
    if failed and not _handles_failure(step, decision.branch):
        # Only a branch that asks about errors or timeouts handles a failed step; anything
        # else (a default, the next step in sequence) would go on working on nothing.
        _finish(
            run,
            RunStatus.FAILED,
            Outcome.FAILED,
            f"step '{step.key}' failed: {outcome.error or 'timed out'}",
        )
    elif decision.kind in ("goto", "repeat", "retry_actor"):
        run.next = {"step": decision.next_step or step.key}
        if decision.kind == "repeat" and decision.prompt_suffix:
            run.next["prompt_suffix"] = decision.prompt_suffix
        if decision.kind == "retry_actor" and decision.actor:
            run.next["actor"] = decision.actor
        return
    elif decision.kind == "complete":
        state = claim.state
        outcome_ = (
            Outcome.APPROVED
            if state.approved
            else Outcome.ERROR_HANDLED
            if state.error_handled
            else Outcome.COMPLETED
        )
        _finish(run, RunStatus.SUCCEEDED, outcome_, "")
    elif decision.kind == "end":
        _finish(run, RunStatus.ENDED, Outcome.ENDED, "")
    else:
        _finish(run, RunStatus.FAILED, Outcome.FAILED, decision.reason)
    pending.append(("run.finished", _finished_data(run)))


FAILURE_CONDITIONS = frozenset({"execution_error", "execution_timeout"})


def _handles_failure(step: engine.StepSpec, branch_name: str | None) -> bool:
    branch = next((b for b in step.branches if b.name == branch_name), None)
    if branch is None:
        return False
    pending = [branch.when]
    while pending:
        condition = pending.pop()
        if condition.type in FAILURE_CONDITIONS:
            return True
        pending.extend(condition.conditions)
    return False


def _finished_data(run: Run) -> dict[str, Any]:
    return {"status": run.status, "outcome": run.outcome, "error": run.error}


def _finish(run: Run, status: str, outcome: str, error: str) -> None:
    check_transition(run.status, status)
    run.status, run.outcome, run.error = status, outcome, error
    run.next = {}
    run.finished_at = timezone.now()
    run.lease_token, run.lease_expires_at = "", None
