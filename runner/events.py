"""Run events: one builder per event type, and the one place that records them and pushes them.

An event is built here (`Event`, by the function named after its type; `runner.event_schema`
lists each type's payload), stored as a RunEvent row in the same transaction as the state change
it describes (only `rows` makes those rows), and pushed to the websockets' groups only after
that transaction commits. Streamed tokens and tool calls are the exception: they are pushed as
they arrive and never stored (the finished step carries the text, and its calls in its details).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.db import transaction

from workflows import engine

from .models import HumanTask, Run, RunEvent, StepRun
from .publisher import publisher
from .signals import run_events_committed
from .status import RunStatus


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


def reviews_group(group_id: int) -> str:
    return f"reviews-{group_id}"


def runs_list_group(user_id: int) -> str:
    return f"runs-user-{user_id}"


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a run's event log before it is stored: its type and its payload.

    Built only by the functions below, one per type; `runner.event_schema` lists the payload
    keys each type carries (DESIGN.md §4, read by the monitor page and the API).
    """

    type: str
    data: dict[str, Any]


def run_queued(*, version: int) -> Event:
    return Event("run.queued", {"status": RunStatus.QUEUED, "version": version})


def run_started() -> Event:
    return Event("run.started", {"status": RunStatus.RUNNING})


def run_status(status: str) -> Event:
    """The run now waits for a reviewer, or runs again."""
    return Event("run.status", {"status": status})


def run_finished(*, status: str, outcome: str, error: str) -> Event:
    return Event("run.finished", {"status": status, "outcome": outcome, "error": error})


def step_started(
    *, seq: int, step: str, name: str, kind: str, actor: str | None, attempt: int
) -> Event:
    return Event(
        "step.started",
        {
            "seq": seq,
            "step": step,
            "name": name,
            "kind": kind,
            "actor": actor,
            "attempt": attempt,
        },
    )


def step_token(*, seq: int, text: str, offset: int) -> Event:
    """Streamed text of a running step, `offset` characters into its answer: pushed, never
    stored."""
    return Event("step.token", {"seq": seq, "text": text, "offset": offset})


def step_tool_call(*, seq: int, call: dict[str, Any]) -> Event:
    """Build `step.tool_call`: one call a running step made to a tool (pushed, not stored)."""
    return Event(
        "step.tool_call",
        {
            "seq": seq,
            "tool": str(call.get("tool", "")),
            "arguments": call.get("arguments") or {},
            "result": str(call.get("result", "")),
            "is_error": bool(call.get("is_error")),
            "error": call.get("error") or None,
            "truncated": bool(call.get("truncated")),
            "latency_ms": call.get("latency_ms"),
        },
    )


def step_finished(step_run: StepRun) -> Event:
    return Event(
        "step.finished",
        {
            "seq": step_run.seq,
            "step": step_run.step_key,
            "attempt": step_run.attempt,
            "status": step_run.status,
            "response": step_run.response,
            "decision": step_run.decision,
            "error": step_run.error,
            "latency_ms": step_run.latency_ms,
            "tokens_in": step_run.tokens_in,
            "tokens_out": step_run.tokens_out,
            "confidence": step_run.confidence,
            "details": step_run.details,
        },
    )


def branch_evaluated(
    *, seq: int, step: str, evaluation: engine.Evaluation, reason: str | None = None
) -> Event:
    """`reason`: the evaluation's as recorded, if the runner added to it (until when a
    retry waits)."""
    return Event(
        "branch.evaluated",
        {
            "seq": seq,
            "step": step,
            "branch": evaluation.branch,
            "priority": evaluation.priority,
            "matched": evaluation.matched,
            "taken": evaluation.taken,
            "reason": evaluation.reason if reason is None else reason,
        },
    )


def branch_taken(
    *, seq: int, step: str, decision: engine.Decision, resume_at: datetime | None = None
) -> Event:
    """`resume_at`: when the step runs again, if its retry waits `delay_s` in the queue."""
    return Event(
        "branch.taken",
        {
            "seq": seq,
            "step": step,
            "branch": decision.branch,
            "action": decision.action,
            "kind": decision.kind,
            "next_step": decision.next_step,
            "reason": decision.reason,
            "delay_s": decision.delay_s if resume_at is not None else 0.0,
            "resume_at": resume_at.isoformat() if resume_at is not None else None,
        },
    )


def task_payload(task: HumanTask) -> dict[str, Any]:
    """Return what reviewers' pages, the API and the `human_task.*` events show of a task."""
    return {
        "id": task.pk,
        "run": task.run_id,
        "step": task.step_key,
        "group": task.group.name if task.group_id else None,
        "question": task.question,
        "material": task.material,
        "options": task.options,
        "due_at": task.due_at.isoformat() if task.due_at else None,
        "status": task.status,
        "decision": task.decision,
        "comment": task.comment,
        "decided_by": task.decided_by.username if task.decided_by_id else None,
        "claimed_by": task.claimed_by.username if task.claimed_by_id else None,
        "claimed_at": task.claimed_at.isoformat() if task.claimed_at else None,
    }


def human_task_created(task: HumanTask) -> Event:
    return Event("human_task.created", task_payload(task))


def human_task_decided(task: HumanTask) -> Event:
    return Event("human_task.decided", task_payload(task))


def human_task_timed_out(task: HumanTask) -> Event:
    return Event("human_task.timed_out", task_payload(task))


def human_task_escalated(task: HumanTask) -> Event:
    return Event("human_task.escalated", task_payload(task))


def human_task_closed(task: HumanTask) -> Event:
    """The task's run stopped before anyone decided."""
    return Event("human_task.closed", task_payload(task))


def serialize_event(event: RunEvent) -> dict[str, Any]:
    return {"seq": event.seq, "type": event.type, "at": event.at.isoformat(), "data": event.data}


def record(run: Run, events: Iterable[Event]) -> list[RunEvent]:
    """Append events to the run's log inside the caller's transaction; push them on commit.

    Advances `run.event_seq`; the caller saves the run in the same transaction.
    """
    rows = append(run.pk, run.created_by_id, run.event_seq, events)
    run.event_seq += len(rows)
    return rows


def append(run_id: int, owner_id: int, after: int, events: Iterable[Event]) -> list[RunEvent]:
    """Append events numbered from `after + 1`, without a Run instance; push them on commit.

    The caller sets the run's `event_seq` to `after + len(rows)` in the same transaction.
    """
    stored = rows(run_id, events, after=after)
    if stored:
        RunEvent.objects.bulk_create(stored)
        push_on_commit(run_id, owner_id, stored)
    return stored


def rows(run_id: int, events: Iterable[Event], *, after: int = 0) -> list[RunEvent]:
    """Return the RunEvent rows of these events, numbered from `after + 1`, not saved.

    Every stored event is made here: `append` saves them, and the run store writes them in
    the statement that fences its run (it numbers them then, and pushes them with
    `push_on_commit`).
    """
    return [
        RunEvent(run_id=run_id, seq=seq, type=event.type, data=event.data)
        for seq, event in enumerate(events, start=after + 1)
    ]


def push_on_commit(run_id: int, owner_id: int, rows: list[RunEvent]) -> None:
    """Push the run's events, written in the caller's transaction, once it commits, and tell
    the apps that listen (`runner.signals.run_events_committed`)."""
    transaction.on_commit(lambda: _push_run_events(run_id, owner_id, rows))
    transaction.on_commit(lambda: _announce(run_id, rows))


def _announce(run_id: int, rows: list[RunEvent]) -> None:
    """Send `run_events_committed`; a listener's error is logged (by Django, with the
    listener's name and traceback), never raised into the run."""
    run_events_committed.send_robust(RunEvent, run_id=run_id, events=rows)


def _push_run_events(run_id: int, owner_id: int, rows: list[RunEvent]) -> None:
    payload = [serialize_event(r) for r in rows]
    publisher.send(run_group(run_id), {"type": "run.events", "run": run_id, "events": payload})
    statuses = [e for e in payload if e["type"] in STATUS_EVENT_TYPES]
    if statuses:
        publisher.send(
            runs_list_group(owner_id),
            {"type": "run.status", "run": run_id, "status": statuses[-1]["data"].get("status")},
        )


STATUS_EVENT_TYPES = frozenset({"run.started", "run.status", "run.finished"})


def push_task_change(
    group_ids: Iterable[int], kind: Literal["created", "closed", "claimed"], task: dict[str, Any]
) -> None:
    """Tell the reviewers of these groups, after commit, that a task waits for them, no longer
    does (decided, timed out, escalated elsewhere or closed), or was claimed or let go."""
    ids = sorted(set(group_ids))

    def push() -> None:
        for group_id in ids:
            publisher.send(
                reviews_group(group_id), {"type": "task.changed", "kind": kind, "task": task}
            )

    transaction.on_commit(push)


def push_token(run_id: int, seq: int, text: str, offset: int) -> None:
    """Push streamed text of a running step now, `offset` characters into its answer (not in
    the log; `step.finished` carries it all, and `runner.streams` the text so far)."""
    event = step_token(seq=seq, text=text, offset=offset)
    publisher.send(
        run_group(run_id), {"type": "run.token", "event": {"type": event.type, "data": event.data}}
    )


def push_tool_call(run_id: int, seq: int, call: dict[str, Any]) -> None:
    """Push one tool call of a running step now (not stored; the finished step's details
    carry every call)."""
    event = step_tool_call(seq=seq, call=call)
    publisher.send(
        run_group(run_id),
        {"type": "run.tool_call", "event": {"type": event.type, "data": event.data}},
    )
