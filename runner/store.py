"""The run store: the one module that writes a run (start it, a fork with copies of its
parent's steps; claim its next step under a lease, commit a step, mark it sent to the workers;
resume, escalate or cancel it for a person), and the only one that knows which database it is
on.

A claimed run changes only through a fenced UPDATE, `... WHERE id = %s AND lease_token = %s AND
next_seq = %s AND status IN (runnable)`, which matches no row once another worker took the lease
over or the run stopped (healthchecks claims its work the same way). It is the first statement
of each write, so it also holds the run's row until the commit; the StepRun, its branch
evaluations and the run's events follow in the same transaction.

What differs by database: on PostgreSQL a claim, and the commit of a step with a new StepRun,
is one statement (`_write_in_one_statement`: the same fence as a data-modifying CTE whose
INSERTs read the run's id from it, and which adds to the run's event count instead of
matching it, unless the write must find the run unchanged, as a claim must); elsewhere the ORM
sends the fenced UPDATE, then the INSERTs, in one transaction.
The rare writes take the ORM's path on both: a human step's task (`insert_task`) and its
resumed commit, and the runs people move (`lock` is SELECT ... FOR UPDATE, which SQLite
ignores: its write transaction locks the whole database).

A step's calls to models (ModelCall rows) are inserted with its StepRun, and their totals
added to the run's (`tokens_in`, `tokens_out`, `model_calls`, `cost`) by the same fenced
UPDATE, as `column = column + value`: never read, added to, and written back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F
from django.utils import timezone

from workflows import engine

from . import events
from .claims import Claim, StepCommit, lease_seconds
from .models import BranchEvaluation, HumanTask, ModelCall, Run, RunEvent, StepRun
from .status import RUNNABLE, TERMINAL, Outcome, RunStatus, check_transition
from .versions import version_graph


class Fenced(Exception):
    """The worker's lease was taken over, or the run stopped: the write wrote nothing."""


# --------------------------------------------------------------------------------------------
# Start


def start(run: Run, first: list[events.Event], *, history: Sequence[StepRun] = ()) -> None:
    """Insert a new run with its first events; a fork's with the `history` it copies."""
    run.event_seq = len(first)
    # Its callers start it in their own transaction, with its message: no savepoint of its own.
    with transaction.atomic(savepoint=False):
        run.save(force_insert=True)
        _copy_steps(run, history)
        events.append(run.pk, run.created_by_id, 0, first)


def start_many(runs: list[Run], first: list[events.Event]) -> None:
    """Insert new runs, each with the same first events, in two statements (one for one run)."""
    if len(runs) == 1:
        start(runs[0], first)
        return
    for run in runs:
        run.event_seq = len(first)
    with transaction.atomic(savepoint=False):
        # Both databases return the new keys from a bulk insert (SQLite since 3.35).
        Run.objects.bulk_create(runs)
        rows = [events.rows(run.pk, first) for run in runs]
        RunEvent.objects.bulk_create(row for run_rows in rows for row in run_rows)
        for run, run_rows in zip(runs, rows, strict=True):
            events.push_on_commit(run.pk, run.created_by_id, run_rows)


def _copy_steps(run: Run, steps: Sequence[StepRun]) -> None:
    """Insert copies of another run's StepRuns (their evaluations prefetched) into `run`.

    Their calls to models are not copied: they were made, and paid for, once, and are counted
    in the run that made them; the copies keep the steps' own sums of them. Nor are human
    steps' tasks: they were decided in that run (a copy keeps the decision and the comment).
    """
    if not steps:
        return
    step_fields = [f.name for f in _inserted_fields(StepRun, frozenset({"run"}))]
    copies = [StepRun(run=run, **{name: getattr(s, name) for name in step_fields}) for s in steps]
    # Both databases return the new keys from a bulk insert (SQLite since 3.35).
    StepRun.objects.bulk_create(copies)
    evaluation_fields = [
        f.name for f in _inserted_fields(BranchEvaluation, frozenset({"step_run"}))
    ]
    BranchEvaluation.objects.bulk_create(
        BranchEvaluation(step_run=copy, **{name: getattr(e, name) for name in evaluation_fields})
        for step, copy in zip(steps, copies, strict=True)
        for e in step.evaluations.all()
    )


def mark_enqueued(run_id: int) -> None:
    """Note that the run's message is on its way (the reaper resends it if it gets lost)."""
    Run.objects.filter(pk=run_id).update(enqueued_at=timezone.now())


def mark_waiting(run_id: int, until: datetime) -> None:
    """Note that the run's message is due at `until` (a retry's delay): the reaper leaves it
    alone until then."""
    Run.objects.filter(pk=run_id).update(enqueued_at=until)


def mark_unsent(run_id: int) -> None:
    """Note that the run's message did not leave: the reaper sends it at its next tick."""
    Run.objects.filter(pk=run_id).update(enqueued_at=None)


def renew_leases(tokens: dict[str, int]) -> set[str]:
    """Extend the leases these tokens hold on their runs (lease token -> run id); return the
    tokens whose run another token holds now, or none (a cancel or a takeover replaced it)."""
    runs = Run.objects.filter(pk__in=tokens.values())
    runs.filter(lease_token__in=list(tokens)).update(
        lease_expires_at=timezone.now() + timedelta(seconds=lease_seconds())
    )
    current = dict(runs.values_list("pk", "lease_token"))
    return {token for token, run_id in tokens.items() if current.get(run_id, token) != token}


# --------------------------------------------------------------------------------------------
# Runs moved by people: a reviewer's decision, a task past due, a cancel, a resume


def lock(run_id: int) -> Run:
    """The run, locked until the caller's transaction ends.

    Lock a run before its human tasks: every writer of both takes them in that order, since the
    opposite order would deadlock against it.
    """
    return Run.objects.select_for_update().get(pk=run_id)


def add_events(run: Run, new_events: list[events.Event]) -> None:
    """Record events of a run `lock`ed in the caller's transaction."""
    events.record(run, new_events)
    run.save(update_fields=["event_seq"])


def resume(
    run: Run,
    task: HumanTask | None,
    new_events: list[events.Event],
    *,
    at: dict[str, Any] | None = None,
) -> None:
    """Set a run `lock`ed in the caller's transaction going again, and record `new_events`.

    With a `task`: the run waited for it, and runs again on the task's step (its next claim
    reads the task). Without: a failed or cancelled run is queued again at `at` (its next
    step, and how to run it), a new attempt of that step; what the caller changed for it (the
    run's version, state and next seq) is saved too. The caller sends its message.
    """
    if task is not None:
        check_transition(run.status, RunStatus.RUNNING)
        run.status = RunStatus.RUNNING
        run.next = {"step": task.step_key, "resume_task": task.pk}
        events.record(run, new_events)
        run.save(update_fields=["status", "next", "event_seq"])
        return
    assert at and at.get("step"), "a stopped run resumes at a step"
    check_transition(run.status, RunStatus.QUEUED)
    run.status, run.outcome, run.error, run.finished_at = RunStatus.QUEUED, "", "", None
    run.next, run.claims, run.lease_token, run.lease_expires_at = at, 0, "", None
    run.enqueued_at = timezone.now()
    events.record(run, new_events)
    run.save(
        update_fields=[
            "status",
            "outcome",
            "error",
            "finished_at",
            "next",
            "claims",
            "lease_token",
            "lease_expires_at",
            "enqueued_at",
            "version",
            "state",
            "next_seq",
            "event_seq",
        ]
    )


def cancel(run: Run, new_events: list[events.Event]) -> None:
    """Stop a run `lock`ed in the caller's transaction before its next step, and record
    `new_events`.

    The run keeps its `next` (no claim takes a stopped run's): a resume goes on from there.
    """
    check_transition(run.status, RunStatus.CANCELLED)
    run.status, run.outcome = RunStatus.CANCELLED, Outcome.CANCELLED
    run.lease_token, run.lease_expires_at = "", None
    run.finished_at = timezone.now()
    events.record(run, new_events)
    run.save(
        update_fields=[
            "status",
            "outcome",
            "lease_token",
            "lease_expires_at",
            "finished_at",
            "event_seq",
        ]
    )


# --------------------------------------------------------------------------------------------
# Claim


def claim(run_id: int, *, resume_token: str = "") -> Claim | None:
    """Take the lease on the run's next step, or return None if there is nothing to take;
    raise NotYet if the step waits for its retry's delay.

    A live lease is taken only by the worker that holds its token (`resume_token`): a task
    retried after a database outage goes on with the step it was running.

    The run is read without a lock; the claim's write is fenced by what was read (the lease
    token, the next step's seq, a runnable status, the count of its events), so that of two
    workers claiming the same step only one takes it, and a claim never acts on a run changed
    since it was read (every writer adds an event). A lease is taken only once it has expired.
    """
    now = timezone.now()
    run = _read(run_id)
    if run is None or run.status not in RUNNABLE or not run.next.get("step"):
        return None
    leased = run.lease_token and run.lease_expires_at and run.lease_expires_at > now
    if leased and run.lease_token != resume_token:
        return None  # another worker holds it
    wake = not_before(run.next)
    if wake is not None and wake > now:
        raise NotYet(run.pk, wake)
    if run.claims >= settings.RUN_MAX_STEP_CLAIMS:
        _fail_unclaimed(
            run,
            f"step '{run.next['step']}' was lost {run.claims} times: the workers running it "
            "stopped before finishing",
        )
        return None
    try:
        graph, document = version_graph(run.version_id, run.version_created_at)
    except engine.RecipeInvalid as exc:
        # Published before a check it now fails (say, a bound on regexes): it can never run.
        _fail_unclaimed(run, f"its recipe version can no longer run: {exc}")
        return None
    new_events: list[events.Event] = []
    changes: dict[str, Any] = {}
    if run.status == RunStatus.QUEUED:
        check_transition(run.status, RunStatus.RUNNING)
        changes.update(status=RunStatus.RUNNING, started_at=now)
        new_events.append(events.run_started())
    state = engine.RunState.from_dict(run.state)
    claimed = Claim(
        run_id=run.pk,
        token=str(uuid.uuid4()),
        seq=run.next_seq,
        attempt=_attempt(state, run.next),
        step=graph.step(run.next["step"]),
        graph=graph,
        document=document,
        state=state,
        next=dict(run.next),
        calls=dict(run.calls),
        script=run.script,
        options=dict(run.options or {}),
        recipe_id=run.recipe_id,
        owner_id=run.created_by_id,
        created_at=run.created_at,
        spent=engine.Spend(
            tokens=run.tokens_in + run.tokens_out, cost=run.cost, calls=run.model_calls
        ),
        started_at=run.started_at or now,
    )
    new_events += _started(claimed)
    changes.update(
        lease_token=claimed.token,
        lease_expires_at=now + timedelta(seconds=lease_seconds()),
        claims=run.claims + 1,
    )
    try:
        claimed.event_seq = _write(_fence_of(run), changes, new_events, exact_events=True)
    except Fenced:
        return None  # another worker claimed it first
    return claimed


def _read(run_id: int) -> Run | None:
    """The run, with its version's creation time as `version_created_at` (a key of the
    parsed-version cache)."""
    return (
        Run.objects.annotate(version_created_at=F("version__created_at")).filter(pk=run_id).first()
    )


def _fence_of(run: Run) -> _Fence:
    return _Fence(run.pk, run.created_by_id, run.lease_token, run.next_seq, run.event_seq)


def _attempt(state: engine.RunState, next_: dict[str, Any]) -> int:
    """The attempt at the step the run's `next` names (from 1)."""
    resume_task = next_.get("resume_task")
    if resume_task:  # a human step resumed by its decision: its StepRun exists
        attempt: int = StepRun.objects.values_list("attempt", flat=True).get(task__pk=resume_task)
        return attempt
    # The state counts the committed StepRuns per step, in the same transaction.
    return 1 + state.attempts.get(next_["step"], 0)


def _started(claim: Claim) -> list[events.Event]:
    """The claimed step's `step.started`, unless it resumes a human step (started already)."""
    if claim.next.get("resume_task") or claim.next.get(WAITING) == claim.seq:
        return []
    step = claim.step
    return [
        events.step_started(
            seq=claim.seq,
            step=step.key,
            name=step.name,
            kind=step.kind,
            actor=claim.next.get("actor") or step.actor,
            attempt=claim.attempt,
        )
    ]


def _fail_unclaimed(run: Run, error: str) -> None:
    """Fail a run that cannot be claimed, if nothing changed it since it was read."""
    check_transition(run.status, RunStatus.FAILED)
    with suppress(Fenced):  # another writer moved it: its next claim looks again
        _write(_fence_of(run), *_failed(error), exact_events=True)


def _failed(error: str) -> tuple[dict[str, Any], list[events.Event]]:
    """The run's fields and its event when it fails with `error`, its lease let go."""
    changes = {
        "status": RunStatus.FAILED,
        "outcome": Outcome.FAILED,
        "error": error,
        "next": {},
        "finished_at": timezone.now(),
        "lease_token": "",
        "lease_expires_at": None,
        "claims": 0,
    }
    finished = events.run_finished(status=RunStatus.FAILED, outcome=Outcome.FAILED, error=error)
    return changes, [finished]


# In a run's `next`: the seq of a step given back to the queue to wait for its actor, whose
# `step.started` was told already (its next claims do not tell it again).
WAITING = "waiting"
# In a run's `next`: the time (ISO 8601) before which its step does not run, the wait a
# retry's branch asked for (`engine.retry_delays`). The run waits in the queue, its message
# due then; a message that comes earlier (the reaper's, a duplicate) is sent again for then.
NOT_BEFORE = "not_before"


class NotYet(Exception):
    """The run's next step waits until `at` (its retry's delay): nothing was claimed."""

    def __init__(self, run_id: int, at: datetime) -> None:
        super().__init__(f"run {run_id}: its next step waits until {at.isoformat()}")
        self.at = at

    def seconds_left(self) -> float:
        return max((self.at - timezone.now()).total_seconds(), 0.0)


def not_before(next_: dict[str, Any]) -> datetime | None:
    """When the step a run's `next` names may run, if it waits for a retry's delay."""
    value = next_.get(NOT_BEFORE)
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def give_back(claim: Claim) -> None:
    """Hand a claimed step back to the queue unexecuted (its actor is full: runner.capacity),
    if the worker still holds the lease (else raise Fenced, having written nothing).

    The run keeps its next step, marked as waiting so that however many times it is claimed
    and given back, its `step.started` is told once; and the claim is not counted among the
    step's lost claims, so that a step may wait for its actor as long as it must without
    being failed as lost.
    """
    fence = _fence_of_claim(claim)
    with transaction.atomic():
        # The run's `next` as stored (the claim's copy may have been changed by the step);
        # only the lease holder changes it, and the fence below checks the lease again.
        stored = (
            Run.objects.filter(pk=fence.run_id, lease_token=fence.token, next_seq=fence.seq)
            .values_list("next", flat=True)
            .first()
        )
        if not stored:
            raise Fenced
        changes = {
            "next": {**stored, WAITING: claim.seq},
            "lease_token": "",
            "lease_expires_at": None,
            "claims": F("claims") - 1,
            "enqueued_at": timezone.now(),
        }
        _fence(fence, changes, 0)


# --------------------------------------------------------------------------------------------
# Commit


def commit(step: StepCommit) -> Claim | None:
    """Write the step's commit in one transaction, if the worker still holds the lease.

    Returns the run's next step, claimed in the same transaction, if the commit goes on with
    it. Raises Fenced (nothing written) if the lease was taken over or the run stopped, and
    IntegrityError if the step was committed already (the unique (run, seq, attempt)).

    The run's row is not read: the claim knows it (only the lease holder moves a leased run).
    """
    claim = step.claim
    now = timezone.now()
    new_events = list(step.events)
    following, changes = _moves(step, new_events, now)
    fence = _fence_of_claim(claim)
    added = _added(step.model_calls)
    if step.step_run.pk is None:
        written = _Step(step.step_run, step.evaluations, step.model_calls)
        event_seq = _write(fence, changes, new_events, written, added=added)
    else:  # a human step's StepRun, inserted with its task (rare: the ORM's path)
        with transaction.atomic():
            base = _fence(fence, changes, len(new_events), added=added)
            if step.decided:  # resumed by the task's decision
                step.step_run.save(force_update=True)
                BranchEvaluation.objects.bulk_create(step.evaluations)
            _insert_calls(step.step_run, step.model_calls)
            if step.task is not None:
                step.task.save(update_fields=["status", "decision", "comment", "decided_at"])
            events.append(claim.run_id, claim.owner_id, base, new_events)
        event_seq = base + len(new_events)
    if following is not None:
        following.event_seq = event_seq
    return following


def committed(claim: Claim) -> bool:
    """Tell whether the claimed step's attempt has a StepRun already (a second commit of it is
    a duplicate the unique (run, seq, attempt) refused)."""
    return StepRun.objects.filter(
        run_id=claim.run_id, seq=claim.seq, attempt=claim.attempt
    ).exists()


def stored_state(run_id: int) -> engine.RunState:
    """The run's state as committed: before the claimed step, whose commit was refused."""
    state: dict[str, Any] = Run.objects.values_list("state", flat=True).get(pk=run_id)
    return engine.RunState.from_dict(state)


def fail_claimed(claim: Claim, error: str) -> None:
    """Fail the claimed run with `error` and no StepRun, if the worker still holds the lease
    (else raise Fenced, having written nothing): the last resort for a step whose failure
    could not be stored either."""
    check_transition(RunStatus.RUNNING, RunStatus.FAILED)
    _write(_fence_of_claim(claim), *_failed(error))


def insert_task(claim: Claim, step_run: StepRun, task: HumanTask) -> None:
    """Insert a human step's StepRun and its new task, if the worker still holds the lease
    (else raise Fenced, having written nothing).

    Called inside the transaction that then commits the step (`commit`), since the task's
    events and the run's next name the task's id; the fence, first, holds the run's row.
    """
    assert connection.in_atomic_block, "the task and the step's commit are written together"
    _fence(_fence_of_claim(claim), {}, 0)
    step_run.save(force_insert=True)
    task.step_run = step_run
    task.save(force_insert=True)


def _moves(
    step: StepCommit, new_events: list[events.Event], now: datetime
) -> tuple[Claim | None, dict[str, Any]]:
    """The run's fields the commit changes, and its next step if the commit claims it (whose
    events are added to `new_events`)."""
    claim = step.claim
    changes: dict[str, Any] = {
        "status": step.status,
        "next": step.next,
        "calls": claim.calls,
        "lease_token": "",
        "lease_expires_at": None,
        "claims": 0,
    }
    seq = claim.seq
    if step.decided:  # its seq is done
        seq += 1
        changes.update(next_seq=seq, state=claim.state.to_dict())
    if step.status in TERMINAL:
        changes.update(outcome=step.outcome, error=step.error, finished_at=now)
    following = None
    if step.next_step is not None:
        if step.go_on:
            # The next step keeps this one's lease token and the actors it resolved.
            following = replace(
                claim,
                seq=seq,
                attempt=_attempt(claim.state, step.next),
                step=claim.graph.step(step.next_step),
                next=dict(step.next),
                event_seq=0,
                spent=claim.spent + _spend(step.model_calls),
            )
            new_events += _started(following)
            changes.update(
                lease_token=claim.token,
                lease_expires_at=now + timedelta(seconds=lease_seconds()),
                claims=1,
            )
        else:
            # A step that waits is sent for when it may run: the reaper counts from then.
            changes["enqueued_at"] = not_before(step.next) or now
    return following, changes


# --------------------------------------------------------------------------------------------
# The fenced write


@dataclass(frozen=True)
class _Fence:
    """What a write of a run is fenced by: the lease token and step seq it was read with (and
    the count of its events, for writes that must find nothing changed since)."""

    run_id: int
    owner_id: int
    token: str
    seq: int
    event_seq: int


def _fence_of_claim(claim: Claim) -> _Fence:
    return _Fence(claim.run_id, claim.owner_id, claim.token, claim.seq, claim.event_seq)


@dataclass(frozen=True)
class _Step:
    """A step's new rows: its StepRun, its branch evaluations, its calls to models."""

    step_run: StepRun
    evaluations: list[BranchEvaluation]
    calls: list[ModelCall]


def _added(calls: list[ModelCall]) -> dict[str, Any]:
    """What a step's calls add to the run's totals (nothing for a step without calls)."""
    if not calls:
        return {}
    return {
        "tokens_in": sum(call.tokens_in or 0 for call in calls),
        "tokens_out": sum(call.tokens_out or 0 for call in calls),
        "model_calls": len(calls),
        "cost": sum((call.cost for call in calls if call.cost is not None), Decimal(0)),
    }


def _spend(calls: list[ModelCall]) -> engine.Spend:
    """What a step's calls spent, as the run's budget counts it."""
    added = _added(calls)
    if not added:
        return engine.Spend()
    tokens = added["tokens_in"] + added["tokens_out"]
    return engine.Spend(tokens=tokens, cost=added["cost"], calls=added["model_calls"])


def _insert_calls(step_run: StepRun, calls: list[ModelCall]) -> None:
    """Insert a step's calls to models, linked to its saved StepRun (the ORM's path)."""
    for call in calls:
        call.step_run = step_run
    ModelCall.objects.bulk_create(calls)


def _write(
    fence: _Fence,
    changes: dict[str, Any],
    new_events: list[events.Event],
    step: _Step | None = None,
    *,
    exact_events: bool = False,
    added: dict[str, Any] | None = None,
) -> int:
    """Change the run and add its events, with a step's new StepRun, evaluations and calls,
    if the fence holds (else write nothing and raise Fenced); return the run's event_seq
    after it. `added` is added to the run's fields of those names (its totals).

    One statement on PostgreSQL (below); elsewhere the fenced UPDATE first, then the rows.
    """
    added = added or {}
    if connection.vendor == "postgresql":
        return _write_in_one_statement(fence, changes, added, new_events, step, exact_events)
    with transaction.atomic():
        base = _fence(fence, changes, len(new_events), exact_events=exact_events, added=added)
        if step is not None:
            step.step_run.save(force_insert=True)
            BranchEvaluation.objects.bulk_create(step.evaluations)
            _insert_calls(step.step_run, step.calls)
        events.append(fence.run_id, fence.owner_id, base, new_events)
    return base + len(new_events)


def _fence(
    fence: _Fence,
    changes: dict[str, Any],
    new_events: int,
    *,
    exact_events: bool = False,
    added: dict[str, Any] | None = None,
) -> int:
    """Apply `changes` to the run, and add `added` to its fields of those names, if it is
    still at the fence's token and seq and runnable; else raise Fenced.

    Returns the run's event_seq before this write: the caller numbers its `new_events` events
    from the next one. Another writer may have added events since the run was read (none does
    to a leased run today); then the UPDATE is retried with the run's current event_seq, unless
    `exact_events` asks that nothing happened to the run since it was read.
    """
    fenced = Run.objects.filter(
        pk=fence.run_id, lease_token=fence.token, next_seq=fence.seq, status__in=RUNNABLE
    )
    # Added in the UPDATE itself: the totals are never read and written back.
    changes = changes | {name: F(name) + value for name, value in (added or {}).items()}
    base = fence.event_seq
    while not fenced.filter(event_seq=base).update(event_seq=base + new_events, **changes):
        current = fenced.values_list("event_seq", flat=True).first()
        if current is None or exact_events:
            raise Fenced
        base = current
    return base


# --------------------------------------------------------------------------------------------
# PostgreSQL: a write in one statement
#
# Through the ORM a step's commit is six round trips to the database (BEGIN, the fenced UPDATE,
# the StepRun's, the evaluations' and the events' INSERTs, COMMIT), and most of a fast step's
# time: benchmarks/runner_overhead.py measured 4.1 ms a step that way, 1.5 ms in one statement.
# At real model latencies it pays as much: 1,000 runs of 3 one-second calls on two workers took
# 23.9 s and 20.5 s of the workers' CPU in one statement, 29.1 s and 30.3 s through the ORM
# (benchmarks/inflight.py).
# On PostgreSQL a write is one data-modifying CTE: the fenced UPDATE, then the inserts reading
# the run's id from it, so that a fenced-out worker inserts nothing. The UPDATE adds the new
# events to the run's event_seq (instead of matching it), so that events another writer added
# since the claim are numbered after, as the ORM path's retry does. Values are prepared by the
# fields, as the ORM prepares them, and bound by the server: once a statement has run
# `prepare_threshold` times on a connection, psycopg keeps it prepared (config/settings.py).


def _write_in_one_statement(
    fence: _Fence,
    changes: dict[str, Any],
    added: dict[str, Any],
    new_events: list[events.Event],
    step: _Step | None,
    exact_events: bool,
) -> int:
    rows = events.rows(fence.run_id, new_events)  # numbered from 1: offsets from the base
    params = [_db_value(Run._meta.get_field(name), value) for name, value in changes.items()]
    params += [_db_value(Run._meta.get_field(name), value) for name, value in added.items()]
    params += [len(rows), fence.run_id, fence.token, fence.seq, *sorted(RUNNABLE)]
    params += [fence.event_seq] if exact_events else []
    params.append(len(rows))
    with_calls = step is not None and bool(step.calls)
    if step is not None:
        step_run = step.step_run
        params += [_db_value(f, f.pre_save(step_run, True)) for f in _inserted_fields(StepRun)]
        params.append(_rows_json(BranchEvaluation, step.evaluations, EVALUATION_COMPUTED))
        if with_calls:
            params.append(_rows_json(ModelCall, step.calls, CALL_COMPUTED))
    params.append(_rows_json(RunEvent, rows, EVENT_COMPUTED))
    statement = _statement(tuple(changes), tuple(added), step is not None, with_calls, exact_events)
    connection.close_if_health_check_failed()  # as connection.cursor() does
    connection.ensure_connection()
    cursor = psycopg.Cursor(connection.connection)  # binds on the server, to be prepared
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    # Inside a caller's transaction, a savepoint keeps it usable if the statement is refused.
    with transaction.atomic() if connection.in_atomic_block else nullcontext(), wrap(cursor) as c:
        c.execute(statement, params)
        found = c.fetchone()
    if found is None:
        raise Fenced
    base: int = found[0]
    for row in rows:
        row.seq += base
    events.push_on_commit(fence.run_id, fence.owner_id, rows)
    return base + len(rows)


# The columns the statement computes: the evaluations' StepRun, the calls' run and StepRun,
# the events' run and number.
EVALUATION_COMPUTED = {"step_run": "step.id"}
CALL_COMPUTED = {"run": "fence.id", "step_run": "step.id"}
EVENT_COMPUTED = {"run": "fence.id", "seq": "fence.base + rows.n"}


@cache
def _statement(
    changed: tuple[str, ...],
    added: tuple[str, ...],
    with_step: bool,
    with_calls: bool,
    exact_events: bool,
) -> str:
    """The SQL of a write that sets the run's `changed` fields, adds to its `added` ones (and,
    `exact_events`, fences on its event count too) and inserts its events and, `with_step`, a
    StepRun, its evaluations and, `with_calls`, its calls to models; parameters in
    `_write_in_one_statement`'s order."""
    quote = connection.ops.quote_name
    run, event_seq = quote(Run._meta.db_table), _column(Run, "event_seq")
    sets = [f"{_column(Run, name)} = %s" for name in changed]
    sets += [f"{_column(Run, name)} = {_column(Run, name)} + %s" for name in added]
    statuses = ", ".join(["%s"] * len(RUNNABLE))
    parts = [
        f"fence AS (UPDATE {run} SET {', '.join(sets)}, {event_seq} = {event_seq} + %s "
        f"WHERE {_column(Run, 'id')} = %s AND {_column(Run, 'lease_token')} = %s "
        f"AND {_column(Run, 'next_seq')} = %s AND {_column(Run, 'status')} IN ({statuses}) "
        + (f"AND {event_seq} = %s " if exact_events else "")
        + f"RETURNING {_column(Run, 'id')} AS id, {event_seq} - %s AS base)"
    ]
    if with_step:
        step_fields = _inserted_fields(StepRun)
        step_columns = ", ".join(quote(f.column) for f in step_fields)
        parts += [
            f"step AS (INSERT INTO {quote(StepRun._meta.db_table)} ({step_columns}) "
            f"SELECT {', '.join(['%s'] * len(step_fields))} FROM fence RETURNING id)",
            f"evaluations AS ({_insert_rows(BranchEvaluation, EVALUATION_COMPUTED, 'step')})",
        ]
    if with_calls:
        parts.append(f"calls AS ({_insert_rows(ModelCall, CALL_COMPUTED, 'fence, step')})")
    parts.append(f"new_events AS ({_insert_rows(RunEvent, EVENT_COMPUTED, 'fence')})")
    return f"WITH {', '.join(parts)} SELECT base FROM fence"


def _insert_rows(model: type[models.Model], computed: dict[str, str], source: str) -> str:
    """An INSERT of rows of `model` for each row of `source`: the `computed` columns are SQL,
    the others come in one parameter, a JSON array of objects (`_rows_json`), read as the
    table's own row type so that each value takes its column's type. Rows are numbered from 1
    as `rows.n`."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    fields = _inserted_fields(model, frozenset(computed))
    columns = [_column(model, name) for name in computed] + [quote(f.column) for f in fields]
    values = list(computed.values()) + [f"value.{quote(f.column)}" for f in fields]
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} FROM {source}, "
        "jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS rows(json, n), "
        f"jsonb_populate_record(NULL::{table}, rows.json) AS value"
    )


def _rows_json(model: type[models.Model], objs: list[Any], computed: dict[str, str]) -> str:
    """`objs` as `_insert_rows` reads them. Their fields hold JSON values, datetimes (whose
    ISO text keeps the microseconds) or Decimals (as text, which keeps every digit: a
    numeric column reads it exactly)."""
    fields = _inserted_fields(model, frozenset(computed))
    rows = [{f.column: f.pre_save(obj, True) for f in fields} for obj in objs]
    return json.dumps(rows, default=_json_default)


def _json_default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _db_value(field: models.Field[Any, Any], value: Any) -> Any:
    return field.get_db_prep_save(value, connection)


@cache
def _inserted_fields(
    model: type[models.Model], exclude: frozenset[str] = frozenset()
) -> tuple[models.Field[Any, Any], ...]:
    """The fields an INSERT of `model` sets (all but its key and `exclude`), in order."""
    return tuple(
        f for f in model._meta.concrete_fields if not f.primary_key and f.name not in exclude
    )


def _column(model: type[models.Model], name: str) -> str:
    return str(connection.ops.quote_name(model._meta.get_field(name).column))
